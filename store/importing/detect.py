"""Telling a source's format from its content.

The rules, in order:

0. A data export, told by its first conversation: a zip archive, a folder or a file
   whose ``conversations.json`` is a JSON array of conversations with a ``mapping`` is
   ``chatgpt``, with ``chat_messages`` ``claude-ai``; a JSON array of chats with
   ``chat.history.messages`` (Open WebUI's "Export chats") is ``open-webui`` (only the
   first element is read: the file may be gigabytes). Another zip archive is refused.
1. A folder: the format of its first ``.jsonl`` file these rules place (its own
   files first, then those beneath it), when that is ``claude-code`` or ``codex``;
   else the format of its first ``.json`` file these rules place, when that is
   ``pydantic-ai`` or ``vercel-ai`` and the folder holds no ``.jsonl`` file (one chat
   a file); otherwise ``agent-framework`` (``FileHistoryProvider`` storage: JSONL
   files).
2. A SQLite database (a file, or its ``sqlite:///`` URL) or a PostgreSQL database (its
   ``postgresql://`` URL; the tables on its search path): the table given with
   ``--table`` is ``openai-agents`` when it has a ``message_data`` column,
   ``langchain`` with a ``message`` column, ``adk`` when it is an ADK events table
   (below), ``open-webui`` with ``id``, ``user_id``, ``title`` and ``chat`` columns,
   and ``langgraph`` when it is a checkpoints table (below); otherwise an
   ``agent_messages`` table means ``openai-agents``, a ``message_store`` table
   ``langchain``, an ``events`` table beside a ``sessions`` table, with ``id``,
   ``app_name``, ``user_id``, ``session_id``, ``timestamp`` and either ``event_data``
   (ADK schema v1) or ``author`` and ``content`` (v0) columns, ``adk``; a ``chat``
   table with those four columns (Open WebUI's ``webui.db``) ``open-webui``; a
   ``checkpoints`` table with ``thread_id``, ``checkpoint_ns``, ``checkpoint_id``,
   ``parent_checkpoint_id``, ``type`` and ``checkpoint`` columns (LangGraph's savers),
   ``langgraph``; any other database is refused.
3. A text file, by its first records (the first 50 lines of JSONL, or the first 50
   elements of a ``.json`` list: the first of them that says more than Chat
   Completions):

   - one of Open WebUI's chats (``{"id", "title", "chat": {"history": {"messages":
     {...}}}}``, or a chat's bare body ``{"history": ...}``): ``open-webui``;
   - ``"format": "chatledger"``: ``jsonl``; a session carrying chatledger's record
     (``"chatledger": {"format": ...}``, an export): the format it names;
   - a Claude Code transcript entry (a ``user``, ``assistant``, ``system``,
     ``progress`` or ``attachment`` entry with a ``uuid`` and a ``parentUuid``, or a
     record Claude Code writes beside them, such as ``summary``, ``custom-title`` or
     ``queue-operation``, with a ``sessionId``, ``leafUuid`` or ``messageId``):
     ``claude-code``;
   - a Codex rollout line (``{"timestamp", "type", "payload": {...}}``, ``type`` one of
     ``session_meta``, ``response_item``, ``compacted``, ``turn_context``,
     ``event_msg``): ``codex``;
   - a Pydantic AI message (``{"kind": "request"`` or ``"response", "parts": [...]}``),
     or ``{"messages": [...]}`` of them: ``pydantic-ai``;
   - a UI message (a ``role`` and a list of ``parts`` tagged by ``type``), or
     ``{"messages": [...]}`` of them: ``vercel-ai``;
   - ``"type": "session"``, or a message with ``contents``: ``agent-framework``;
   - messages of ``{"type": ..., "data": {...}}`` (``message_to_dict``): ``langchain``;
   - a request body or a message whose content has ``tool_use``, ``tool_result`` or
     ``thinking`` blocks, or a top-level ``max_tokens`` or ``system``: ``anthropic``;
   - ``{"input": [...]}``, an item with a ``type`` other than ``message``
     (``function_call``, ``reasoning``, ...), or content parts ``input_text`` /
     ``output_text``: ``openai-responses``;
   - ``{"messages": [...]}`` or a message with a ``role``: ``openai-chat``.
"""

from __future__ import annotations

import itertools
import zipfile
from pathlib import Path
from typing import Any

from store.errors import InvalidSource
from store.formats.documents import DOCUMENT_FORMATS, RECORD_KEY
from store.formats.open_webui import is_open_webui_chat
from store.formats.pydantic_ai import is_pydantic_ai_message
from store.formats.vercel_ai import is_ui_message
from store.importing.readers._database import Database, open_database
from store.importing.readers._exports import export_format
from store.importing.readers._records import records
from store.importing.readers._sqlite import is_sqlite
from store.importing.readers.adk import EVENTS_TABLE as ADK_EVENTS
from store.importing.readers.adk import SESSIONS_TABLE as ADK_SESSIONS
from store.importing.readers.adk import is_events_table
from store.importing.readers.claude_code import is_entry as is_claude_code_entry
from store.importing.readers.codex import is_line as is_codex_line
from store.importing.readers.langchain import MESSAGES_TABLE as LANGCHAIN_TABLE
from store.importing.readers.langgraph import CHECKPOINTS_TABLE as LANGGRAPH_TABLE
from store.importing.readers.langgraph import is_checkpoints_table
from store.importing.readers.open_webui import CHAT_TABLE as WEBUI_CHATS
from store.importing.readers.open_webui import is_chat_table
from store.importing.readers.openai_agents import MESSAGES_TABLE as AGENTS_TABLE
from store.importing.source import DatabaseUrl, Location, shown_source, source_location

__all__ = ["detect_format", "detect_path"]

_ANTHROPIC_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking"})
_RESPONSES_PARTS = frozenset({"input_text", "output_text", "input_image", "input_file"})
_SCAN = 50
"""Elements of a JSON list looked at to place it."""
_CHAT_FOLDER_FORMATS = frozenset({"pydantic-ai", "vercel-ai"})
"""The formats whose folders hold one chat a ``.json`` file."""
_TRANSCRIPT_FORMATS = frozenset({"claude-code", "codex"})
"""The formats whose folders hold ``.jsonl`` transcripts, in subfolders too."""


def _block_types(message: Any) -> set[str]:
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return set()
    return {b["type"] for b in content if isinstance(b, dict) and isinstance(b.get("type"), str)}


def _first_message(record: Any) -> Any:
    if isinstance(record, dict) and isinstance(record.get("messages"), list):
        return record["messages"][0] if record["messages"] else None
    return record


def _of_messages(record: dict[str, Any]) -> str | None:
    listed = record.get("messages")
    messages: list[Any] = listed if isinstance(listed, list) else [record]
    for message in messages:
        blocks = _block_types(message)
        if blocks & _ANTHROPIC_BLOCKS:
            return "anthropic"
        if blocks & _RESPONSES_PARTS:
            return "openai-responses"
    first = _first_message(record)
    if isinstance(first, dict) and first.get("type") not in (None, "message"):
        return "openai-responses"
    if "messages" in record or "role" in record:
        return "openai-chat"
    return None


def _of_list(records: list[Any]) -> str | None:
    """The first specific verdict among a list's first elements (a list of messages is
    Chat Completions only when nothing in it says otherwise)."""
    verdicts = [_of_record(item) for item in records[:_SCAN]]
    specific = [v for v in verdicts if v not in (None, "openai-chat")]
    if specific:
        return specific[0]
    return "openai-chat" if "openai-chat" in verdicts else None


def _of_transcript(record: dict[str, Any]) -> str | None:
    """A coding agent's transcript line: ``claude-code`` or ``codex``."""
    if is_claude_code_entry(record):
        return "claude-code"
    return "codex" if is_codex_line(record) else None


def _of_document(record: dict[str, Any]) -> str | None:
    """A record that names its format (chatledger's own, an export of chatledger's) or
    is a whole chat of a format (Open WebUI's)."""
    if is_open_webui_chat(record):
        return "open-webui"
    if record.get("format") == "chatledger":
        return "jsonl"
    exported = record.get(RECORD_KEY)
    if isinstance(exported, dict) and exported.get("format") in DOCUMENT_FORMATS:
        return str(exported["format"])
    return None


def _of_record(record: Any) -> str | None:
    if isinstance(record, list):
        return _of_list(record)
    if not isinstance(record, dict):
        return None
    named = _of_document(record)
    if named is not None:
        return named
    transcript = _of_transcript(record)
    if transcript is not None:
        return transcript
    first = _first_message(record)
    if is_pydantic_ai_message(first):
        return "pydantic-ai"
    if is_ui_message(first):
        return "vercel-ai"
    if record.get("type") == "session" or "contents" in record:
        return "agent-framework"
    if isinstance(first, dict) and isinstance(first.get("data"), dict) and "type" in first:
        return "langchain"
    if "max_tokens" in record or ("messages" in record and "system" in record):
        return "anthropic"
    if isinstance(record.get("input"), list):
        return "openai-responses"
    return _of_messages(record)


def _database(database: Database, source: str, table: str | None) -> str:
    found = database.tables()
    if table is not None and table in found:
        names = database.columns(table)
        if "message_data" in names:
            return "openai-agents"
        if "message" in names:
            return "langchain"
        if is_events_table(names):
            return "adk"
        if is_chat_table(names):
            return "open-webui"
        if is_checkpoints_table(names):
            return "langgraph"
    if AGENTS_TABLE in found:
        return "openai-agents"
    if LANGCHAIN_TABLE in found:
        return "langchain"
    if {ADK_EVENTS, ADK_SESSIONS} <= found and is_events_table(database.columns(ADK_EVENTS)):
        return "adk"
    if WEBUI_CHATS in found and is_chat_table(database.columns(WEBUI_CHATS)):
        return "open-webui"
    if LANGGRAPH_TABLE in found and is_checkpoints_table(database.columns(LANGGRAPH_TABLE)):
        return "langgraph"
    raise InvalidSource(source, None, "a database of none of the known formats")


def _transcripts(path: Path, source: str) -> str | None:
    """A folder's format when its first ``.jsonl`` file the rules place (its own files
    first, then those beneath it) is a transcript of a coding agent; when none of them
    can be placed, why the first cannot."""
    own = sorted(path.glob("*.jsonl"))
    files = own + sorted(set(path.rglob("*.jsonl")) - set(own))
    failure: InvalidSource | None = None
    for file in itertools.islice(files, _SCAN):
        relative = file.relative_to(path).as_posix()
        try:
            found = detect_path(file, f"{source.rstrip('/')}/{relative}")
        except InvalidSource as error:
            failure = failure or error
            continue
        return found if found in _TRANSCRIPT_FORMATS else None
    if failure is not None:
        raise failure  # no file placed: the first one's fault says what is wrong
    return None


def _folder(path: Path, source: str) -> str:
    """A folder's format: that of its first ``.json`` file the rules place (a damaged
    file is left to the reader, which names it)."""
    transcripts = _transcripts(path, source)
    if transcripts is not None:
        return transcripts
    if any(path.glob("*.jsonl")):
        return "agent-framework"
    for file in itertools.islice(sorted(path.glob("*.json")), _SCAN):
        try:
            found = detect_path(file, f"{source.rstrip('/')}/{file.name}")
        except InvalidSource:
            continue
        return found if found in _CHAT_FOLDER_FORMATS else "agent-framework"
    return "agent-framework"


def detect_path(path: Location, source: str, table: str | None = None) -> str:
    """The format id of the file, folder or database at ``path`` (a PostgreSQL
    database's by its tables, as a SQLite file's)."""
    if isinstance(path, DatabaseUrl):
        return _database(open_database(path, source), source, table)
    if not path.exists():
        raise InvalidSource(source, None, "no such file or folder")
    exported = export_format(path, source)
    if exported is not None:
        return exported
    if path.is_dir():
        return _folder(path, source)
    if is_sqlite(path):
        return _database(open_database(path, source), source, table)
    if zipfile.is_zipfile(path):
        raise InvalidSource(
            source, None, "a zip archive that is not a ChatGPT or Claude.ai data export"
        )
    found = list(itertools.islice(records(path, source), _SCAN))
    if found and isinstance(found[0][1], InvalidSource):
        raise found[0][1]
    values = [value for _, value in found if not isinstance(value, InvalidSource)]
    if found:
        kind = _of_record(values[0]) if found[0][0] == "document" else _of_list(values)
        if kind is None:
            raise InvalidSource(source, found[0][0], "not a chat log of any known format")
        return kind
    raise InvalidSource(source, None, "the file is empty")


def detect_format(source: str | Path) -> str:
    """The format id of ``source`` (a file, a folder, a SQLite database or its
    ``sqlite:///`` URL, a PostgreSQL database's ``postgresql://`` URL), told from its
    content by the rules above; :class:`~store.errors.InvalidSource` when none fits."""
    location = source_location(source)
    return detect_path(location, shown_source(source, location))
