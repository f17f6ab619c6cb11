"""``codex``: Codex CLI rollouts (``rollout-<time>-<id>.jsonl``), a file or a folder.

A folder is read with every ``rollout-*.jsonl`` file beneath it (Codex keeps them as
``~/.codex/sessions/YYYY/MM/DD/``), one session a file. Each line is
``{"timestamp", "type", "payload"}`` (Codex's ``RolloutLine``). How they map:

- ``response_item``: the payload is an OpenAI Responses item, read as the
  ``openai-responses`` format reads one (one message an item: ``developer`` messages
  are system messages, ``function_call_output`` and ``custom_tool_call_output`` tool
  results; Codex has no error flag). Its time is the line's ``timestamp``, its id the
  item's own ``id`` when it has one, else ``<session>#<line>`` (a rollout is only ever
  appended to).
- ``compacted``: a ``user`` message holding its ``message`` (the summary Codex wrote)
  that replaces every message before it since the previous summary (that one included);
  its ``replacement_history`` is kept under :data:`REPLACEMENT_KEY`.
- ``event_msg`` ``token_count``: its ``info`` (``last_token_usage``,
  ``total_token_usage``, ``model_context_window``) is kept under :data:`USAGE_KEY` on the
  newest assistant message before it that has none, the model call it reports.
- ``session_meta`` gives the session id (``payload.id``; else the file's name) and its
  start; ``event_msg`` ``thread_name_updated`` the title (the last one).
- ``session_meta``, ``turn_context`` and every ``event_msg`` are kept verbatim, in
  order, as ``system`` messages holding one ``other`` content (``kind`` the line's type,
  ``payload`` the whole line), excluded by the import event: stored, never projected.
- Lines of other types are skipped and counted in the report's warnings.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from store.errors import InvalidSource
from store.formats import FormatError, from_openai_responses
from store.formats._common import ORIGINAL_ID_KEY, SOURCE_FORMAT_KEY
from store.importing.readers._compaction import kept_aside, summary_over
from store.importing.readers._convert import named_after_file, own_id
from store.importing.readers._folders import each_file
from store.importing.source import Conversation, Located, iter_lines, parse_line, reading
from strategies.messages import Message, OtherContent, TextContent

__all__ = ["LINE_TYPES", "REPLACEMENT_KEY", "USAGE_KEY", "is_line", "read"]

LINE_TYPES = frozenset({"session_meta", "response_item", "compacted", "turn_context", "event_msg"})
"""The types of a rollout line (Codex's ``RolloutItem``)."""
USAGE_KEY = "codex_token_count"
"""Metadata key holding the ``info`` of the ``token_count`` event a model call reported."""
REPLACEMENT_KEY = "codex_replacement_history"
"""Metadata key holding a compaction's ``replacement_history``, as Codex wrote it."""
LINE_KEY = "codex_line"
"""Metadata key holding a line's fields other than its payload (``timestamp``)."""
SOURCE_CODEX = "codex"
"""The :data:`SOURCE_FORMAT_KEY` of the lines kept verbatim and of summaries."""

_KEPT = frozenset({"session_meta", "turn_context", "event_msg"})


def is_line(record: Any) -> bool:
    """Whether ``record`` is a rollout line (detection)."""
    return (
        isinstance(record, dict)
        and record.get("type") in LINE_TYPES
        and isinstance(record.get("payload"), dict)
    )


def _moment(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


@dataclass(slots=True)
class _Rollout:
    """One rollout's messages as they are made, with what its lines say of the session."""

    source: str
    session: str
    located: list[Located] = field(default_factory=list)
    projected: list[str] = field(default_factory=list)
    """Messages since the last summary (it included)."""
    unpaid: int | None = None
    """The newest assistant message not given a model call's usage yet."""
    title: str | None = None
    unknown: Counter[str] = field(default_factory=Counter)

    def add(self, message: Message, where: str, *, projected: bool = True) -> None:
        self.located.append(Located(message, where))
        if projected:
            self.projected.append(message.message_id)

    def item(self, number: int, line: dict[str, Any]) -> None:
        payload = line["payload"]
        try:
            (message,) = from_openai_responses(
                [payload], allow_custom_roles=reading().allow_custom_roles
            )
        except FormatError as error:
            raise InvalidSource(self.source, f"line {number}", error.problem) from None
        metadata = {k: v for k, v in message.metadata.items() if k != ORIGINAL_ID_KEY}
        metadata[LINE_KEY] = {k: v for k, v in line.items() if k != "payload"}
        own = own_id(payload.get("id"))
        update = {
            "message_id": own or f"{self.session}#{number}",
            "created_at": message.created_at or _moment(line.get("timestamp")),
            "metadata": metadata,
        }
        self.add(message.model_copy(update=update), f"line {number}")
        if message.role == "assistant":
            self.unpaid = len(self.located) - 1

    def compacted(self, number: int, line: dict[str, Any]) -> None:
        payload = line["payload"]
        text = payload.get("message")
        if not isinstance(text, str):
            raise InvalidSource(self.source, f"line {number}", "compacted has no message text")
        metadata: dict[str, Any] = {SOURCE_FORMAT_KEY: SOURCE_CODEX}
        if payload.get("replacement_history") is not None:
            metadata[REPLACEMENT_KEY] = payload["replacement_history"]
        summary = Message(
            role="user",
            contents=[TextContent(text=text)],
            message_id=f"{self.session}#{number}",
            created_at=_moment(line.get("timestamp")),
            metadata=metadata,
        )
        self.add(summary_over(summary, self.projected), f"line {number}", projected=False)
        self.projected = [summary.message_id]
        self.unpaid = None

    def kept(self, number: int, line: dict[str, Any]) -> None:
        kind = str(line["type"])
        payload = line["payload"]
        if kind == "event_msg":
            self._event(payload)
        message = Message(
            role="system",
            contents=[OtherContent(kind=kind, payload=line)],
            message_id=f"{self.session}#{number}",
            created_at=_moment(line.get("timestamp")),
            metadata={SOURCE_FORMAT_KEY: SOURCE_CODEX},
        )
        self.add(kept_aside(message, f"codex {kind}"), f"line {number}", projected=False)

    def _event(self, payload: dict[str, Any]) -> None:
        kind = payload.get("type")
        if kind == "thread_name_updated" and isinstance(payload.get("thread_name"), str):
            self.title = payload["thread_name"] or self.title
        if kind == "token_count" and isinstance(payload.get("info"), dict):
            if self.unpaid is not None:
                at = self.unpaid
                message = self.located[at].message
                metadata = {**message.metadata, USAGE_KEY: payload["info"]}
                paid = message.model_copy(update={"metadata": metadata})
                self.located[at] = Located(paid, self.located[at].where)
                self.unpaid = None


def _lines(path: Path, source: str) -> list[tuple[int, dict[str, Any]]]:
    found = []
    for number, text in iter_lines(path, source):
        value = parse_line(source, number, text)
        if not isinstance(value, dict) or not isinstance(value.get("type"), str):
            raise InvalidSource(source, f"line {number}", "not a rollout line (type, payload)")
        if value["type"] in LINE_TYPES and not isinstance(value.get("payload"), dict):
            raise InvalidSource(source, f"line {number}", f"{value['type']} has no payload object")
        found.append((number, value))
    return found


def _own_session(lines: list[tuple[int, dict[str, Any]]]) -> str | None:
    for _, line in lines:
        if line["type"] == "session_meta":
            found = own_id(line["payload"].get("id"))
            if found is not None:
                return found
    return None


def _rollout(path: Path, source: str) -> Conversation:
    lines = _lines(path, source)
    own = _own_session(lines)
    made = _Rollout(source, own or path.stem)
    for number, line in lines:
        kind = line["type"]
        if kind == "response_item":
            made.item(number, line)
        elif kind == "compacted":
            made.compacted(number, line)
        elif kind in _KEPT:
            made.kept(number, line)
        else:
            made.unknown[kind] += 1
    conversation = Conversation(source, "line 1", made.session, made.located, compacted=True)
    conversation.title = made.title
    if made.unknown:
        count = sum(made.unknown.values())
        kinds = ", ".join(sorted(made.unknown))
        noun = "line" if count == 1 else "lines"
        conversation.notes = [f"{count} {noun} of unknown types skipped ({kinds})"]
    if own is None:
        conversation.notes.append(named_after_file("line 1", made.session))
    return conversation


def _file(path: Path, source: str) -> Iterator[Conversation]:
    try:
        found = _rollout(path, source)
    except InvalidSource as error:
        yield Conversation(source, "line 1", None, error=error)
        return
    if found.messages:
        yield found


def read(path: Path, source: str) -> Iterator[Conversation]:
    """The session of a rollout file, or of every rollout beneath a folder (in path
    order)."""
    return each_file(path, source, "rollout-*.jsonl", _file)
