"""``claude-code``: Claude Code and Claude Agent SDK transcripts.

A source is one session file (``<session id>.jsonl``), or a folder of them such as
``~/.claude/projects/<project>/``, read with every ``.jsonl`` file beneath it. Each
line is one entry. How they map:

- The conversation is the chain of entries :mod:`~store.importing.readers._claude_chain`
  finds (the SDK's own walk, across compaction boundaries, parallel tool calls put
  back). Entries on no chain (a rewound or edited branch) are not imported, and counted
  in the report's warnings.
- A ``user`` or ``assistant`` entry's ``message`` is an Anthropic Messages API message,
  read as the ``anthropic`` format reads one (``tool_result`` blocks become ``tool``
  messages with their ``is_error``). The message id is the entry's ``uuid`` (a user
  entry that splits into several messages numbers the others ``<uuid>.1``, ...), its
  time the entry's ``timestamp``, the entry's other fields are kept under
  :data:`CLAUDE_CODE_KEY`.
- Claude Code writes one entry per content block of one model response, every one with
  the response's ``message.id`` and usage. Consecutive entries of one response become
  one assistant message, as Claude Code rejoins them before sending the conversation
  again; the response's fields (``model``, ``usage``...) are the last entry's, the
  merged entries' own fields listed under :data:`MERGED_KEY`. A response whose entries
  are apart keeps its usage on its first message only.
- A ``compact_boundary`` system entry and the ``isCompactSummary`` user entry after it:
  the summary replaces every message imported before it since the previous summary
  (that one included), except those the boundary's ``compactMetadata`` preserves, so
  that the projection is what Claude Code sends next.
- Every other entry a transcript documents (``system``, ``progress`` and ``attachment``
  entries of the chain, and the session's records: ``summary``, ``custom-title``,
  ``file-history-snapshot``, ``queue-operation``...) is kept verbatim as a ``system``
  message holding one ``other`` content (``kind`` its type, ``payload`` the entry),
  excluded by the import event: stored, never projected. A record without a ``uuid``
  is named ``<type>-<hash of its content>``.
- Entries of unknown types are skipped and counted in the report's warnings.
- The session id is the entries' ``sessionId`` (else the file's name); its title the
  last ``customTitle``, else the last ``aiTitle``, else the last ``summary`` record's.
- Sidechains are sessions of their own, named ``<session>/<subpath>``: a subagent
  transcript ``<session>/subagents/agent-<id>.jsonl`` is ``<session>/subagents/agent-<id>``,
  and sidechain entries inside a session file ``<session>/agent-<agentId>``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from store.errors import InvalidSource
from store.formats import FormatError, from_anthropic
from store.formats._common import ORIGINAL_ID_KEY, SOURCE_FORMAT_KEY
from store.formats.anthropic import ANTHROPIC_EXTRA_KEY
from store.importing.readers._claude_chain import (
    CHAINED_TYPES,
    Entry,
    conversation_chain,
    response_id,
)
from store.importing.readers._compaction import kept_aside, summary_over
from store.importing.readers._convert import named_after_file, own_id
from store.importing.readers._folders import each_file
from store.importing.source import Conversation, Located, iter_lines, parse_line, reading
from store.rules.identity import digest_bytes
from strategies.messages import Message, OtherContent

__all__ = ["CLAUDE_CODE_KEY", "MERGED_KEY", "RECORD_TYPES", "is_entry", "read", "spoken_messages"]

CLAUDE_CODE_KEY = "claude_code"
"""Metadata key holding an entry's own fields (all but its ``message``)."""
MERGED_KEY = "claude_code_merged"
"""Metadata key listing the own fields of the entries merged into the message after
its first (one model response written as several entries)."""
SOURCE_CLAUDE_CODE = "claude_code"
"""The :data:`SOURCE_FORMAT_KEY` of the entries kept verbatim."""

RECORD_TYPES = frozenset(
    {
        "summary", "custom-title", "ai-title", "tag", "agent-name", "agent-color",
        "agent-setting", "pr-link", "file-history-snapshot", "file-history-delta",
        "last-prompt", "queue-operation", "content-replacement", "mode", "permission-mode",
        "worktree-state", "attribution-snapshot", "cost-state", "tools-used",
        "relocated", "continued-in", "derived-from", "ended-by-model", "fork-context-ref",
        "frame-link", "memory-mode", "session-owner", "bridge-session", "denial-counts",
        "history-suppression", "isolation-latch", "observer-ref", "repl-mode",
        "data-flow-records", "data-flow-incomplete", "api-request", "api-request-shape",
        "api-request-blob", "api-request-resumed", "resume-head-vouch", "host-row",
        "artifact-comment-monitor", "artifact-autoreact-ledger", "dev-mods", "atis-latch",
        "hybrid-organization",
    }
)  # fmt: skip
"""The entry types Claude Code writes beside the chain (as its own transcript loader
lists them): kept verbatim."""

_TITLES = (("custom-title", "customTitle"), ("ai-title", "aiTitle"), ("summary", "summary"))
"""Where a session's title is, the first found winning (the last of its kind)."""
_SUBAGENTS = "subagents"


def is_entry(record: Any) -> bool:
    """Whether ``record`` is a Claude Code transcript entry (detection)."""
    if not isinstance(record, dict):
        return False
    kind = record.get("type")
    if kind in CHAINED_TYPES:
        return "parentUuid" in record and isinstance(record.get("uuid"), str)
    return kind in RECORD_TYPES and any(
        key in record for key in ("sessionId", "leafUuid", "messageId")
    )


def _moment(entry: Entry) -> datetime | None:
    try:
        moment = datetime.fromisoformat(entry.timestamp)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _own_fields(entry: Entry) -> dict[str, Any]:
    return {key: value for key, value in entry.value.items() if key != "message"}


def _record_id(entry: Entry) -> str:
    if isinstance(entry.value.get("uuid"), str) and entry.value["uuid"]:
        return entry.uuid
    text = json.dumps(entry.value, sort_keys=True, ensure_ascii=False)
    return f"{entry.kind}-{digest_bytes(text.encode()).hex()[:24]}"


def _verbatim(entry: Entry) -> Message:
    """An entry chatledger has no message for: stored whole, never projected."""
    message = Message(
        role="system",
        contents=[OtherContent(kind=entry.kind, payload=entry.value)],
        message_id=_record_id(entry),
        created_at=_moment(entry),
        metadata={SOURCE_FORMAT_KEY: SOURCE_CLAUDE_CODE},
    )
    return kept_aside(message, f"claude-code {entry.kind}")


def spoken_messages(source: str, entry: Entry) -> list[Message]:
    """The messages of a user or assistant entry (a user entry with tool results gives
    a ``tool`` message for each)."""
    where = f"line {entry.line}"
    message = entry.value.get("message")
    if not isinstance(message, dict):
        raise InvalidSource(source, where, f"a {entry.kind} entry without a message object")
    try:
        converted = from_anthropic([message], allow_custom_roles=reading().allow_custom_roles)
    except FormatError as error:
        raise InvalidSource(source, where, f"message: {error.problem}") from None
    out = []
    for index, item in enumerate(converted):
        metadata = {k: v for k, v in item.metadata.items() if k != ORIGINAL_ID_KEY}
        metadata[CLAUDE_CODE_KEY] = _own_fields(entry)
        message_id = entry.uuid if index == 0 else f"{entry.uuid}.{index}"
        update = {"message_id": message_id, "created_at": _moment(entry), "metadata": metadata}
        out.append(item.model_copy(update=update))
    return out


def _without_usage(message: Message) -> Message:
    extra = message.metadata.get(ANTHROPIC_EXTRA_KEY)
    if not isinstance(extra, dict) or "usage" not in extra:
        return message
    metadata = dict(message.metadata)
    metadata[ANTHROPIC_EXTRA_KEY] = {k: v for k, v in extra.items() if k != "usage"}
    return message.model_copy(update={"metadata": metadata})


def _merged(first: Message, later: Message, entry: Entry) -> Message:
    """``first`` with the contents of a later entry of the same response."""
    metadata = dict(first.metadata)
    if ANTHROPIC_EXTRA_KEY in later.metadata:
        metadata[ANTHROPIC_EXTRA_KEY] = later.metadata[ANTHROPIC_EXTRA_KEY]
    merged = metadata.get(MERGED_KEY)
    metadata[MERGED_KEY] = [*(merged if isinstance(merged, list) else []), _own_fields(entry)]
    contents = [*first.contents, *later.contents]
    return first.model_copy(update={"contents": contents, "metadata": metadata})


def _preserved(boundary: Entry, by_uuid: dict[str, Entry]) -> set[str]:
    """The entries a partial compaction keeps after its summary (``compactMetadata``'s
    ``preservedMessages`` ids, or the ``preservedSegment`` from its tail to its head)."""
    meta = boundary.value.get("compactMetadata")
    if not isinstance(meta, dict):
        return set()
    listed = meta.get("preservedMessages")
    if isinstance(listed, dict):
        ids = listed.get("allUuids") or listed.get("uuids")
        return {i for i in ids if isinstance(i, str)} if isinstance(ids, list) else set()
    segment = meta.get("preservedSegment")
    if not isinstance(segment, dict):
        return set()
    found: set[str] = set()
    current = by_uuid.get(str(segment.get("tailUuid")))
    while current is not None and current.uuid not in found:
        found.add(current.uuid)
        if current.uuid == segment.get("headUuid"):
            break
        current = by_uuid.get(current.parent) if current.parent else None
    return found


@dataclass(slots=True)
class _Messages:
    """The messages of one conversation as they are made, with what compaction needs."""

    source: str
    by_uuid: dict[str, Entry]
    located: list[Located] = field(default_factory=list)
    projected: list[str] = field(default_factory=list)
    """Messages since the last summary (it included), by source id."""
    preserved: set[str] = field(default_factory=set)
    response: str | None = None
    """The response the last message holds (entries of it that follow merge in)."""
    responses: set[str] = field(default_factory=set)

    def keep(self, entry: Entry) -> None:
        self.located.append(Located(_verbatim(entry), f"line {entry.line}"))
        self.response = None
        if entry.value.get("subtype") == "compact_boundary":
            self.preserved = _preserved(entry, self.by_uuid)

    def speak(self, entry: Entry) -> None:
        where = f"line {entry.line}"
        messages = spoken_messages(self.source, entry)
        response = response_id(entry)
        if response is not None and response == self.response and len(messages) == 1:
            last = self.located[-1]
            self.located[-1] = Located(_merged(last.message, messages[0], entry), last.where)
            return
        if response is not None and response in self.responses:
            messages = [_without_usage(m) for m in messages]
        self.response = response
        if response is not None:
            self.responses.add(response)
        if entry.value.get("isCompactSummary") is True and messages:
            replaced = [i for i in self.projected if i not in self.preserved]
            messages[0] = summary_over(messages[0], replaced)
            self.projected, self.preserved = [], set()
        for message in messages:
            self.located.append(Located(message, where))
            self.projected.append(message.message_id)


def _messages(source: str, chain: list[Entry], records: list[Entry]) -> list[Located]:
    """The chain's messages, the records kept verbatim among them by line."""
    made = _Messages(source, {e.uuid: e for e in chain})
    pending = iter(sorted(records, key=lambda e: e.line))
    record = next(pending, None)
    for entry in chain:
        while record is not None and record.line < entry.line:
            made.keep(record)
            record = next(pending, None)
        if entry.kind in ("user", "assistant"):
            made.speak(entry)
        else:
            made.keep(entry)
    while record is not None:
        made.keep(record)
        record = next(pending, None)
    return made.located


@dataclass(slots=True)
class _Transcript:
    """One file's entries, sorted by what becomes of them."""

    chained: dict[str, list[Entry]] = field(default_factory=dict)
    """By writer: ``""`` the session, else a sidechain's agent."""
    records: list[Entry] = field(default_factory=list)
    unknown: Counter[str] = field(default_factory=Counter)
    session: str | None = None
    titles: dict[str, str] = field(default_factory=dict)


def _writer(value: dict[str, Any]) -> str:
    if value.get("isSidechain") is not True:
        return ""
    agent = own_id(value.get("agentId"))
    return f"agent-{agent}" if agent else "sidechain"


def _add(found: _Transcript, source: str, number: int, value: Any) -> None:
    where = f"line {number}"
    if not isinstance(value, dict):
        raise InvalidSource(source, where, "an entry that is not a JSON object")
    kind = value.get("type")
    if not isinstance(kind, str):
        raise InvalidSource(source, where, "an entry without a type")
    if found.session is None:
        found.session = own_id(value.get("sessionId"))
    entry = Entry(number, value)
    if kind in CHAINED_TYPES:
        if not isinstance(value.get("uuid"), str) or not value["uuid"]:
            raise InvalidSource(source, where, f"a {kind} entry without a uuid")
        found.chained.setdefault(_writer(value), []).append(entry)
    elif kind in RECORD_TYPES:
        found.records.append(entry)
        for titled, key in _TITLES:
            if kind == titled and isinstance(value.get(key), str) and value[key]:
                found.titles[kind] = value[key]
    else:
        found.unknown[kind] += 1


def _transcript(path: Path, source: str) -> _Transcript:
    found = _Transcript()
    for number, line in iter_lines(path, source):
        _add(found, source, number, parse_line(source, number, line))
    return found


def _subagent_name(path: Path, session: str | None) -> str | None:
    """``<session>/<subpath>`` of a file under a session's ``subagents`` folder."""
    parts = path.with_suffix("").parts
    if _SUBAGENTS not in parts[:-1]:
        return None
    at = len(parts) - 1 - parts[:-1][::-1].index(_SUBAGENTS) - 1
    if at < 1:
        return None
    return "/".join([session or parts[at - 1], *parts[at:]])


def _entries(count: int) -> str:
    return f"{count} entry" if count == 1 else f"{count} entries"


def _notes(found: _Transcript, chains: dict[str, list[Entry]]) -> list[str]:
    """What the report says was left out: entries off the chain, and of unknown types."""
    notes = []
    left = sum(len(e) for e in found.chained.values()) - sum(len(c) for c in chains.values())
    if left:
        notes.append(
            f"{_entries(left)} on no conversation chain (a rewound or edited branch) not imported"
        )
    if found.unknown:
        kinds = ", ".join(sorted(found.unknown))
        notes.append(f"{_entries(sum(found.unknown.values()))} of unknown types skipped ({kinds})")
    return notes


def _conversations(path: Path, source: str) -> Iterator[Conversation]:
    found = _transcript(path, source)
    session = found.session or path.stem
    own = _subagent_name(path, found.session)
    chains = {writer: conversation_chain(entries) for writer, entries in found.chained.items()}
    if found.records:
        chains.setdefault("", [])
    for writer in sorted(chains, key=lambda w: (w != "", w)):
        records = found.records if writer == "" else []
        name = own or (f"{session}/{writer}" if writer else session)
        made = Conversation(source, "line 1", name, _messages(source, chains[writer], records))
        made.compacted = True
        if writer == "":
            made.notes = _notes(found, chains)
            if found.session is None and own is None:
                made.notes.append(named_after_file("line 1", session))
            if own is None:
                made.title = next((found.titles[k] for k, _ in _TITLES if k in found.titles), None)
        if made.messages:
            yield made


def _file(path: Path, source: str) -> Iterator[Conversation]:
    try:
        yield from _conversations(path, source)
    except InvalidSource as error:
        yield Conversation(source, "line 1", None, error=error)


def read(path: Path, source: str) -> Iterator[Conversation]:
    """The sessions of a transcript file, or of every ``.jsonl`` file in a folder and
    beneath it (in path order)."""
    return each_file(path, source, "*.jsonl", _file)
