"""Pydantic AI: :class:`ChatledgerConversationStore`, a ``ConversationStore`` kept in chatledger.

``await store.load(conversation_id)``, ``agent.run(prompt, conversation=...)`` and
``await store.save(result)`` work as with Pydantic AI's own stores; ``branch``, ``fork``,
``update``, ``delete``, ``list_conversations`` and ``load(limit=...)`` too. This module
implements the store's primitives; Pydantic AI's base class decides which messages are
new, where a history branches and what a fork shares.

How a conversation maps onto chatledger (``docs/pydantic_ai.md``):

- **One session a conversation**, its id the ``conversation_id``. The session's history
  is the conversation's current history (its ``head_id`` and every entry before it), in
  order; chatledger's compaction, search, audit and usage work on it as on any session.
- **An entry is one or more messages** (:mod:`store.formats.pydantic_ai`: a request one
  message a part, a response one message). The first message's id is the entry's id,
  the next ones ``<entry id>:<n>``. Each message carries the parts it holds as Pydantic
  AI serializes them (:data:`PARTS_KEY`), the first one also the entry's envelope (its
  id, its parent, the message without its parts: :data:`ENTRY_KEY`), so an entry reads
  back equal whatever the converter keeps, and a part is stored once: redacting its
  message erases it, and it reads back as the part its tombstone keeps.
- **The record** (head, usage, scope, fork origin, title, metadata, branches, revision)
  is the session's record (:meth:`~store.contract.HistoryBackend.append_if`), written in
  the same transaction as the entries it adds, only over the revision it replaces: a
  stale save raises ``ConversationConflict``. Each write stores a token of its own as
  the revision ``append_if`` compares (an update of the title or metadata too, which
  keeps Pydantic AI's revision), so every write lands only over the record it read.
- **Head moves are branches.** A save that extends the history appends. When the head
  moves elsewhere (``branch``, a save of a rewritten history), the session is
  :meth:`~store.contract.HistoryBackend.rewind`-ed to the last entry the two histories
  share (the history it leaves becomes a superseded tail, still readable), a tail that
  holds the new head is :meth:`~store.contract.HistoryBackend.restore`-d, and the
  entries still missing are appended again under their own ids. A ``fork`` is a
  chatledger :meth:`~store.contract.HistoryBackend.fork` of the session holding the
  fork's head (no message copied), taken at once with a record marked as moving, so a
  fork stopped half way loads and the next save (or, stopped before its record, the
  next fork) finishes it. Where chatledger refuses a cut (one that separates a tool
  call from its result), the session is cut at the entry before and the rest appended
  again. A session of the id that holds no conversation (the ``ChatledgerHistory``
  capability's) is refused, never taken over.
- **Entries are found by id**: :meth:`~store.contract.HistoryBackend.locate` names the
  session holding an entry (its own, a superseded tail, a fork), whose history up to it
  is the entry's history: one indexed lookup and a backward read, not one call per entry,
  from the entry's end where this store read it before (checked), else the session's.
- **Usage**: every new response's usage is recorded in chatledger's usage ledger
  (:meth:`~store.contract.HistoryBackend.record_usage`), tied to its entry, once (the
  entry id is the call id). The record keeps Pydantic AI's running totals.
- **Delete** deletes the session and its superseded tails; a message a fork still reads
  stays until the fork is deleted too, as chatledger keeps rows its forks read.

The module also re-exports the capability that sends the model chatledger's projection
and compacts on request, :class:`~store.integrations.pydantic_ai_history.ChatledgerHistory`
(with :func:`~store.integrations.usage.usage_from_pydantic_ai`); it keeps
its own sessions, which this store does not take over.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, cast

from pydantic import JsonValue, TypeAdapter

from store.contract import DEFAULT_TENANT, RECORD_KEY, HistoryBackend
from store.errors import InvalidInput, RecordConflict, SessionNotFound
from store.formats.pydantic_ai import from_pydantic_ai
from store.integrations._shared import StoreLease
from store.integrations.pydantic_ai_history import ChatledgerHistory
from store.integrations.usage import usage_from_pydantic_ai
from store.models import StoredMessage
from store.rules.erasure import REDACTED_TEXT
from store.rules.identity import is_tombstone
from strategies.messages import (
    FunctionCallContent,
    FunctionResultContent,
    Message,
    OtherContent,
    ReasoningContent,
    TextContent,
)
from strategies.tokenizers import Tokenizer

try:
    from pydantic_ai._uuid import uuid7
    from pydantic_ai.conversation_store import (
        ConversationConflict,
        ConversationDetails,
        ConversationEntry,
        ConversationRecord,
        ConversationStore,
    )
    from pydantic_ai.messages import (
        ModelMessagesTypeAdapter,
        ModelRequest,
        ModelResponse,
        ModelResponsePart,
        SystemPromptPart,
        TextPart,
        ThinkingPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "store.integrations.pydantic_ai needs Pydantic AI: pip install 'chatledger[pydantic-ai]'"
    ) from exc

__all__ = [
    "ENTRY_KEY",
    "PARTS_KEY",
    "ChatledgerConversationStore",
    "ChatledgerHistory",
    "entry_messages",
    "read_entries",
    "usage_from_pydantic_ai",
]

ENTRY_KEY = "pydantic_ai_entry"
"""The metadata key of an entry's first message: ``{"id", "parent_id", "messages",
"message"}``, ``messages`` how many chatledger messages hold the entry and ``message``
the Pydantic AI message as ``ModelMessagesTypeAdapter`` writes it, without its parts
(each message holds its own under :data:`PARTS_KEY`)."""

PARTS_KEY = "pydantic_ai_parts"
"""The metadata key of each message of an entry: the entry's parts that message holds,
as ``ModelMessagesTypeAdapter`` writes them (a request's message one part, a response's
message all of them). A part is stored nowhere else, so redacting its message erases it."""

_RECORDS: TypeAdapter[ConversationRecord] = TypeAdapter(ConversationRecord)
_MOVING = "moving"
"""Set in a stored record while a head move is under way (see :meth:`_claim`)."""
_REVISION = "conversation_revision"
"""The key of the stored record's Pydantic AI revision. Its ``revision`` (the one
:meth:`~store.contract.HistoryBackend.append_if` compares) is a token each write
replaces, an update of the title or metadata too, so that every write checks, under the
session's lock, that nothing was written since the record it merges was read."""
_NOT_A_CONVERSATION = (
    "{!r} is a chatledger session holding no conversation (such as the ChatledgerHistory"
    " capability's): ChatledgerConversationStore does not take it over; use another id"
)
_ATTEMPTS = 16
"""How many times a save is tried again when only the title or metadata changed since
it read the record (a concurrent ``update``, which must not make a save conflict)."""
_END = 2**62
"""A ``before`` bound past every ``seq``: a backward read from a session's end."""
_PAGE = 64
_REMEMBERED = 100_000
"""How many entries' ends a store remembers (:meth:`ChatledgerConversationStore._learn`)."""
_CONTINUES = re.compile(r":(\d+)$")
"""How the id of an entry's second and later messages ends."""
_TOOLS = "tools"
"""The key, in an entry's first message's :data:`ENTRY_KEY`, of its results' tool names
by call id (what a tombstone keeps of a call: its id and tool name)."""
_RESULTS = frozenset({"tool-return", "retry-prompt"})
_UNPLACED = "unplaced"
"""Marks a tombstone entry whose parent is not known yet (the entry before it)."""


# -- entries and messages ---------------------------------------------------------------


def _message_id(entry_id: str, n: int) -> str:
    return entry_id if n == 0 else f"{entry_id}:{n}"


def entry_messages(entry: ConversationEntry) -> list[Message]:
    """The chatledger messages that hold ``entry``: what the model sees of it, through
    :func:`store.formats.pydantic_ai.from_pydantic_ai`, each carrying the parts it holds
    under :data:`PARTS_KEY`, the first one the entry's envelope under :data:`ENTRY_KEY`."""
    [dumped] = ModelMessagesTypeAdapter.dump_python([entry.message], mode="json")
    converted = from_pydantic_ai([dumped], allow_custom_roles=True)
    if not converted:  # a request without parts: still one message, so it has an id
        role = "assistant" if isinstance(entry.message, ModelResponse) else "user"
        converted = [Message(role=role, contents=[OtherContent(kind=f"empty-{dumped['kind']}")])]
    parts: list[JsonValue] = dumped["parts"]
    if isinstance(entry.message, ModelRequest) and len(parts) == len(converted):
        held: list[list[JsonValue]] = [[part] for part in parts]  # a message a part
    else:
        held = [parts, *([] for _ in converted[1:])]
    envelope: dict[str, JsonValue] = {k: v for k, v in dumped.items() if k != "parts"}
    carried: dict[str, JsonValue] = {
        "id": entry.id,
        "parent_id": entry.parent_id,
        "messages": len(converted),
        "message": envelope,
    }
    tools = {
        part["tool_call_id"]: part["tool_name"]
        for part in cast(list[dict[str, Any]], parts)
        if part.get("part_kind") in _RESULTS and part.get("tool_call_id")
    }
    if tools:  # a redacted result keeps its call id, and reads back under its tool's name
        carried[_TOOLS] = tools
    return [
        message.model_copy(
            update={
                "message_id": _message_id(entry.id, n),
                "metadata": {
                    **message.metadata,
                    **({ENTRY_KEY: carried} if n == 0 else {}),
                    PARTS_KEY: held[n],
                },
            }
        )
        for n, message in enumerate(converted)
    ]


def _carried(message: Message) -> dict[str, Any] | None:
    carried = message.metadata.get(ENTRY_KEY)
    if isinstance(carried, dict) and carried.get("id") == message.message_id:
        return carried
    return None


def _dumped_parts(message: ModelRequest | ModelResponse) -> list[dict[str, Any]]:
    [dumped] = ModelMessagesTypeAdapter.dump_python([message], mode="json")
    return cast(list[dict[str, Any]], dumped["parts"])


def _redacted_text(message: Message) -> str:
    return "".join(c.text for c in message.contents if isinstance(c, TextContent)) or REDACTED_TEXT


def _redacted_parts(message: Message) -> list[dict[str, Any]]:
    """The parts a redacted message (a tombstone) stands for: what the tombstone keeps
    (its role, a call's id and tool name, a result's call id), every text the
    tombstone's. A result's tool name is left empty (:func:`_placed` finds it)."""
    at = message.created_at or datetime.now(UTC)
    text = _redacted_text(message)
    if message.role == "assistant":
        parts: list[ModelResponsePart] = [
            ToolCallPart(c.name, {}, tool_call_id=c.call_id)
            if isinstance(c, FunctionCallContent)
            else ThinkingPart(text)
            if isinstance(c, ReasoningContent)
            else TextPart(text)
            for c in message.contents
            if not isinstance(c, OtherContent)  # a hosted call and its result, dropped
        ]
        return _dumped_parts(ModelResponse(parts=parts or [TextPart(text)], timestamp=at))
    results = [c for c in message.contents if isinstance(c, FunctionResultContent)]
    if message.role == "tool" and results:
        return _dumped_parts(
            ModelRequest(
                parts=[
                    ToolReturnPart(
                        "",
                        text,
                        tool_call_id=c.call_id,
                        outcome="failed" if c.is_error else "success",
                        timestamp=at,
                    )
                    for c in results
                ]
            )
        )
    part = (
        SystemPromptPart(text, timestamp=at)
        if message.role == "system"
        else UserPromptPart(text, timestamp=at)
    )
    return _dumped_parts(ModelRequest(parts=[part]))


def _parts_of(message: Message) -> list[dict[str, Any]]:
    """The parts ``message`` holds: its own, or a tombstone's."""
    if is_tombstone(message):
        return _redacted_parts(message)
    held = message.metadata.get(PARTS_KEY)
    return cast(list[dict[str, Any]], held) if isinstance(held, list) else []


def _built(first: Message, rest: dict[int, Message]) -> dict[str, Any] | None:
    """The entry an entry's first message and its next ones (by position) hold, as
    carried (``{"id", "parent_id", "messages", "message"}``, the message whole; a
    redacted first message makes an entry whose parent is found from its place), or
    None for a message that starts no entry."""
    carried = _carried(first)
    if carried is not None:
        envelope = cast(dict[str, Any], carried["message"])
        if "parts" in envelope:  # written before each message held its own parts
            return carried
        count = int(carried["messages"])
        parts = [p for n in range(count) for p in _message_parts(n, first, rest)]
        tools = carried.get(_TOOLS) or {}
        for part in parts:
            if part.get("part_kind") in _RESULTS and part.get("tool_name") == "":
                part["tool_name"] = tools.get(part.get("tool_call_id"), "")
        return {**carried, "message": {**envelope, "parts": parts}}
    if not is_tombstone(first) or _CONTINUES.search(first.message_id):
        return None
    count = max(rest, default=0) + 1
    at = first.created_at or datetime.now(UTC)
    empty = ModelResponse(parts=[], timestamp=at) if first.role == "assistant" else None
    [dumped] = ModelMessagesTypeAdapter.dump_python(
        [empty or ModelRequest(parts=[], timestamp=at)], mode="json"
    )
    dumped["parts"] = [p for n in range(count) for p in _message_parts(n, first, rest)]
    return {"id": first.message_id, _UNPLACED: True, "messages": count, "message": dumped}


def _message_parts(n: int, first: Message, rest: dict[int, Message]) -> list[dict[str, Any]]:
    if n == 0:
        return _parts_of(first)
    return _parts_of(rest[n]) if n in rest else []


def _continued(message_id: str) -> tuple[str, int] | None:
    """The entry and the position of a message after an entry's first."""
    found = _CONTINUES.search(message_id)
    return None if found is None else (message_id[: found.start()], int(found.group(1)))


def _entries_in(messages: Sequence[StoredMessage | Message]) -> list[dict[str, Any]]:
    """The entries of consecutive messages, oldest first, as carried (a redacted one
    rebuilt from its tombstone after the entry before it)."""
    found: list[dict[str, Any]] = []
    first: Message | None = None
    rest: dict[int, Message] = {}

    def close() -> None:
        if first is not None:
            built = _built(first, rest)
            if built is not None:
                found.append(built)

    for stored in messages:
        message = stored.message if isinstance(stored, StoredMessage) else stored
        continued = _continued(message.message_id)
        if continued is not None and first is not None and continued[0] == first.message_id:
            rest[continued[1]] = message
            continue
        if continued is not None:
            continue  # a part of no entry started here
        close()
        first, rest = message, {}
    close()
    return _placed(found)


def _placed(line: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``line`` with each tombstone's parent set to the entry before it, and a redacted
    tool result's tool name found from its call."""
    names: dict[str, str] = {}
    for index, carried in enumerate(line):
        if carried.pop(_UNPLACED, False):
            carried["parent_id"] = line[index - 1]["id"] if index else None
        for part in carried["message"]["parts"]:
            kind = part.get("part_kind")
            if kind == "tool-call":
                names[str(part.get("tool_call_id"))] = str(part.get("tool_name", ""))
            elif kind in _RESULTS and part.get("tool_name") == "":
                part["tool_name"] = names.get(part.get("tool_call_id", ""), "")
    return line


def _entry_of(carried: dict[str, Any]) -> ConversationEntry:
    [message] = ModelMessagesTypeAdapter.validate_python([carried["message"]])
    return ConversationEntry(id=carried["id"], parent_id=carried["parent_id"], message=message)


def _last_message_id(carried: dict[str, Any]) -> str:
    return _message_id(str(carried["id"]), int(carried["messages"]) - 1)


def read_entries(messages: Sequence[StoredMessage | Message]) -> list[ConversationEntry]:
    """The entries consecutive chatledger ``messages`` hold, in order (messages that
    start no entry, such as a compaction's summaries, are skipped; a redacted message
    reads as the parts its tombstone keeps, holding the tombstone's text)."""
    return [_entry_of(carried) for carried in _entries_in(messages)]


class _Backwards:
    """Follows an entry's parents back through a session's pages, newest first."""

    def __init__(self, head_id: str, limit: int | None) -> None:
        self.want: str | None = head_id
        """The entry looked for next (None: the history's start was reached)."""
        self.any = False
        """Whether the next entry found is the one wanted (after a tombstone, whose
        parent is the entry before it)."""
        self.limit = limit
        self.line: list[dict[str, Any]] = []
        """The entries found, newest first."""
        self._rest: dict[str, dict[int, Message]] = {}
        """The messages after an entry's first, by entry, read before the first."""

    @property
    def done(self) -> bool:
        if self.any:  # the entry before the newest tombstone found is still to be read
            return False
        return self.want is None or (self.limit is not None and len(self.line) >= self.limit)

    def read(self, page: Sequence[StoredMessage]) -> None:
        """Take what ``page`` (the messages before the last page read) holds."""
        for stored in reversed(page):
            message = stored.message
            continued = _continued(message.message_id)
            if continued is not None:
                entry_id, n = continued
                self._rest.setdefault(entry_id, {})[n] = message
                continue
            rest = self._rest.pop(message.message_id, {})
            wanted = self.any or message.message_id == self.want
            carried = _built(message, rest) if wanted else None
            if carried is None:
                continue
            if self.limit is not None and len(self.line) >= self.limit:
                del self.line[-1][_UNPLACED]  # the line is full: this is only its parent
                self.line[-1]["parent_id"] = carried["id"]
                self.any, self.want = False, None
                return
            self.line.append(carried)
            self.any = bool(carried.get(_UNPLACED))
            self.want = None if self.any else carried["parent_id"]
            if self.done:
                return
        if self.any and len(page) < _PAGE:  # a tombstone first in the session
            self.any = False

    def entries(self) -> list[dict[str, Any]]:
        """The entries found, oldest first, tombstones placed."""
        return _placed(list(reversed(self.line)))


# -- records ----------------------------------------------------------------------------


def _record_value(
    record: ConversationRecord, *, token: str, moving: bool = False
) -> dict[str, JsonValue]:
    """The stored form of ``record``: its revision under :data:`_REVISION`, and under
    ``revision`` (what :meth:`~store.contract.HistoryBackend.append_if` compares) the
    write's own ``token``."""
    value = cast(dict[str, JsonValue], _RECORDS.dump_python(record, mode="json"))
    return {**value, "revision": token, _REVISION: record.revision, _MOVING: moving}


@dataclasses.dataclass(frozen=True)
class _Stored:
    """A conversation's stored record, whether a head move is under way, and the token
    of the write that stored it (what the next write expects)."""

    record: ConversationRecord
    moving: bool
    token: str


def _record_of(session_id: str, metadata: dict[str, JsonValue]) -> _Stored | None:
    """The conversation record a session's metadata holds; None when it holds none, or
    one of another conversation (a fork's copy)."""
    value = metadata.get(RECORD_KEY)
    if not isinstance(value, dict) or value.get("conversation_id") != session_id:
        return None
    token = value.get("revision")
    fields = {k: v for k, v in value.items() if k not in (_MOVING, _REVISION)}
    fields["revision"] = value.get(_REVISION, token)
    record = _RECORDS.validate_python(fields)
    return _Stored(record, value.get(_MOVING) is True, str(token))


# -- the store --------------------------------------------------------------------------


class ChatledgerConversationStore(ConversationStore):
    """A Pydantic AI ``ConversationStore`` whose conversations are chatledger sessions
    (see the module docstring for the mapping).

    Give it a store (borrowed: never closed here), or let it open one on first use from
    ``url`` (else ``$CHATLEDGER_URL``, then ``./chatledger.db``), shared with the other
    adapters of that URL, tenant and tokenizer and let go of by :meth:`aclose`. Nothing
    is opened by the constructor.
    """

    def __init__(
        self,
        store: HistoryBackend | None = None,
        *,
        url: str | None = None,
        tenant: str = DEFAULT_TENANT,
        tokenizer: Tokenizer | None = None,
    ) -> None:
        self._lease = StoreLease.of(store, url=url, tenant=tenant, tokenizer=tokenizer)
        self._ends: dict[str, tuple[str, int]] = {}
        """Where entries read end: their session and last message's ``seq``."""

    async def aclose(self) -> None:
        """Let go of an owned store (the last adapter holding it closes it); a borrowed
        one stays open."""
        await self._lease.release()

    async def _store(self) -> HistoryBackend:
        return await self._lease.get()

    # -- records --------------------------------------------------------------------

    async def _stored(self, conversation_id: str) -> _Stored | None:
        store = await self._store()
        try:
            metadata = await store.get_metadata(conversation_id)
        except SessionNotFound:
            return None
        return _record_of(conversation_id, metadata)

    async def read_record(self, conversation_id: str) -> ConversationRecord | None:
        stored = await self._stored(conversation_id)
        return None if stored is None else stored.record

    async def read_records(
        self, *, scope: str | None = None, limit: int | None = None
    ) -> Sequence[ConversationRecord]:
        """Every session of the tenant holding a record is read (its metadata comes with
        the listing): O(sessions)."""
        store = await self._store()
        found: list[ConversationRecord] = []
        after: str | None = None
        while page := await store.sessions(limit=500, after=after):
            for info in page:
                stored = _record_of(info.session_id, info.metadata)
                if stored is not None and (scope is None or stored.record.scope == scope):
                    found.append(stored.record)
            after = page[-1].session_id
        found.sort(key=lambda record: record.updated_at, reverse=True)
        return found[:limit]

    async def write_record(
        self,
        record: ConversationRecord,
        *,
        new_entries: Sequence[ConversationEntry] = (),
        expected_revision: str | None,
    ) -> None:
        """Write the record over ``expected_revision``, with the stored title and metadata.
        A write that finds the record written since it was read, by an update of the
        title or metadata alone (or of this save's own head move), reads it again and
        tries again, so an update never makes a save conflict and a save never undoes it."""
        conversation_id = record.conversation_id
        base = new_entries[0].parent_id if new_entries else record.head_id
        known = {entry.id for entry in new_entries}
        if record.head_id is not None and record.head_id not in known:
            if await (await self._store()).locate(record.head_id) is None:
                raise ConversationConflict(conversation_id)
        mine = {expected_revision}  # what it writes over: the one read, its own claims
        for _ in range(_ATTEMPTS):
            stored = await self._stored(conversation_id)
            if (None if stored is None else stored.record.revision) not in mine:
                raise ConversationConflict(conversation_id)
            try:
                if stored is None:
                    started = await self._start(record, base)
                    expected = None
                    if started is not None:
                        claimed, expected = started
                        mine.add(claimed)
                    await self._append(record, new_entries, expected)
                    return
                current = stored.record
                written = dataclasses.replace(
                    record, title=current.title, metadata=current.metadata
                )
                expected = stored.token
                if stored.moving or current.head_id != base:
                    claimed, expected = await self._claim(stored)
                    mine.add(claimed)
                    await self._move(conversation_id, base)
                await self._append(written, new_entries, expected)
                return
            except RecordConflict:
                continue  # written since it was read: read it again
        raise ConversationConflict(conversation_id)

    async def _append(
        self, record: ConversationRecord, entries: Sequence[ConversationEntry], expected: str | None
    ) -> None:
        """Append the entries and write the record over the stored token ``expected``;
        ``RecordConflict`` when another was stored since."""
        store = await self._store()
        messages = [m for entry in entries for m in entry_messages(entry)]
        await store.append_if(
            record.conversation_id,
            messages,
            record=_record_value(record, token=str(uuid7())),
            expected=expected,
        )
        for entry in entries:
            if isinstance(entry.message, ModelResponse):
                response = entry.message
                usage = usage_from_pydantic_ai(
                    response.usage, model=response.model_name, at=response.timestamp
                )
                if usage is not None:
                    await store.record_usage(
                        record.conversation_id, usage, message_id=entry.id, call_id=entry.id
                    )

    async def _claim(self, stored: _Stored) -> tuple[str, str]:
        """Take the conversation for a head move: its record, marked as moving, gets a
        revision of this writer's own, so a concurrent save conflicts instead of
        appending to a history being moved. The revision, and the token the final write
        expects; a writer that stops half way leaves a record that still loads (its head
        is still stored) and a move the next save finishes. ``RecordConflict`` when the
        record was written since it was read."""
        claimed = dataclasses.replace(stored.record, revision=str(uuid7()))
        token = str(uuid7())
        await (await self._store()).append_if(
            claimed.conversation_id,
            [],
            record=_record_value(claimed, token=token, moving=True),
            expected=stored.token,
        )
        return claimed.revision, token

    async def _start(self, record: ConversationRecord, base: str | None) -> tuple[str, str] | None:
        """Start a new conversation: nothing to do for an empty one (its first write
        creates its session), a fork of the session holding ``base`` up to it for a fork,
        taken at once with a moving record (:meth:`_taken`). The revision and the token
        the record write expects (None: no record stored yet).

        A session of that id holding the record its source's fork copied (a fork left
        half made) is taken and its history moved to ``base``; any other session of that
        id holds no conversation and is refused."""
        conversation_id = record.conversation_id
        store = await self._store()
        try:
            metadata = await store.get_metadata(conversation_id)
        except SessionNotFound:
            if base is None:
                return None
            return await self._fork_into(record, base, await self._line(base))
        copied = metadata.get(RECORD_KEY)
        token = copied.get("revision") if isinstance(copied, dict) else None
        if base is None or not isinstance(token, str):
            raise ConversationConflict(
                conversation_id, message=_NOT_A_CONVERSATION.format(conversation_id)
            )
        taken = await self._taken(record, base, token)
        await self._move(conversation_id, base)
        return taken

    async def _taken(
        self,
        record: ConversationRecord,
        base: str,
        expected: str | None,
        messages: Sequence[Message] = (),
    ) -> tuple[str, str]:
        """Write a new conversation's record, at ``base`` and marked as moving, over the
        stored token ``expected`` (with ``messages``): from then on the conversation
        loads, and a save that finds it finishes the move. Its revision and token."""
        taken = dataclasses.replace(record, head_id=base, revision=str(uuid7()))
        token = str(uuid7())
        await (await self._store()).append_if(
            record.conversation_id,
            messages,
            record=_record_value(taken, token=token, moving=True),
            expected=expected,
        )
        return taken.revision, token

    async def _fork_into(
        self, record: ConversationRecord, base: str, line: _Line
    ) -> tuple[str, str]:
        """Make the conversation a fork holding ``line`` (up to ``base``): a chatledger
        fork at its last entry, else at the latest entry chatledger can cut at, taken
        (:meth:`_taken`) before the rest is appended. The revision and token taken."""
        conversation_id = record.conversation_id
        store = await self._store()
        sources = [line.session_id]
        info = await store.session(line.session_id)
        if info.parent_session_id is not None:
            sources.append(info.parent_session_id)  # a tail is forked through its session
        for keep in range(len(line.carried), 0, -1):
            at = _last_message_id(line.carried[keep - 1])
            for source in sources:
                try:
                    await store.fork(source, at=at, new_session_id=conversation_id)
                except InvalidInput:
                    if await self._exists(conversation_id):
                        raise ConversationConflict(conversation_id) from None
                    continue
                copied = (await store.get_metadata(conversation_id)).get(RECORD_KEY)
                token = copied.get("revision") if isinstance(copied, dict) else None
                taken = await self._taken(record, base, token if isinstance(token, str) else None)
                await self._append_entries(conversation_id, line.carried[keep:])
                return taken
        messages = [m for c in line.carried for m in entry_messages(_entry_of(c))]
        return await self._taken(record, base, None, messages)

    async def _exists(self, session_id: str) -> bool:
        try:
            await (await self._store()).session(session_id)
        except SessionNotFound:
            return False
        return True

    async def _append_entries(self, session_id: str, carried: Sequence[dict[str, Any]]) -> None:
        if carried:
            store = await self._store()
            entries = [_entry_of(c) for c in carried]
            await store.append(session_id, [m for e in entries for m in entry_messages(e)])

    async def _move(self, conversation_id: str, base: str | None) -> None:
        """Make the session's history end at entry ``base`` (None: empty): restore the
        tail holding it when it was left, rewind past what follows it, append again what
        is missing."""
        store = await self._store()
        active = await self._active(conversation_id)
        if base is not None and base not in {c["id"] for c in active}:
            holder = await store.locate(base)
            tails = {
                b.session_id: b.event_id
                for b in await store.branches(conversation_id)
                if b.relation == "tail" and b.event_id is not None
            }
            if holder in tails:
                try:
                    await store.restore(conversation_id, event_id=tails[holder])
                except InvalidInput:
                    pass  # restored or deleted meanwhile: the entries are appended again
                else:
                    active = await self._active(conversation_id)
        target = [] if base is None else (await self._line(base)).carried
        shared = 0
        for have, want in zip(active, target, strict=False):
            if have["id"] != want["id"]:
                break
            shared += 1
        if shared < len(active):
            shared = await self._rewind(conversation_id, active, shared)
        await self._append_entries(conversation_id, target[shared:])

    async def _rewind(self, session_id: str, active: list[dict[str, Any]], keep: int) -> int:
        """Rewind the session to its first ``keep`` entries, or fewer where chatledger
        refuses the cut; how many it kept."""
        store = await self._store()
        for kept in range(keep, -1, -1):
            to = _last_message_id(active[kept - 1]) if kept else None
            try:
                await store.rewind(session_id, to=to)
            except InvalidInput:
                if kept == 0:
                    raise
                continue
            return kept
        return 0  # pragma: no cover - the loop returns or raises

    async def _active(self, session_id: str) -> list[dict[str, Any]]:
        """The entries of the session's history, as their first messages carry them."""
        store = await self._store()
        return _entries_in(
            [m async for m in store.aiter_history(session_id, include_excluded=True)]
        )

    async def write_details(
        self,
        conversation_id: str,
        details: ConversationDetails,
        *,
        expected_revision: str,
        expected: ConversationDetails | None = None,
    ) -> ConversationRecord:
        """Checked on the record read, written only over that very record (its token):
        anything written since, an update included, conflicts, and Pydantic AI's
        ``update`` reads the record again."""
        stored = await self._stored(conversation_id)
        if stored is None or stored.record.revision != expected_revision:
            raise ConversationConflict(conversation_id)
        record = stored.record
        if expected and any(getattr(record, key) != value for key, value in expected.items()):
            raise ConversationConflict(conversation_id)
        if "title" in details:
            record.title = details["title"]
        if "metadata" in details:
            record.metadata = details["metadata"]
        try:
            await (await self._store()).append_if(
                conversation_id,
                [],
                record=_record_value(record, token=str(uuid7()), moving=stored.moving),
                expected=stored.token,
            )
        except RecordConflict as error:
            raise ConversationConflict(conversation_id) from error
        return record

    async def delete_record(self, conversation_id: str, *, expected_revision: str) -> None:
        stored = await self._stored(conversation_id)
        if stored is None or stored.record.revision != expected_revision:
            raise ConversationConflict(conversation_id)
        try:
            await self._claim(stored)
        except RecordConflict as error:
            raise ConversationConflict(conversation_id) from error
        await (await self._store()).delete_session(conversation_id)

    # -- entries --------------------------------------------------------------------

    async def read_entry(self, entry_id: str) -> ConversationEntry:
        line = await self._line(entry_id, limit=1)
        return _entry_of(line.carried[-1])

    async def read_history(
        self, head_id: str | None, *, limit: int | None = None
    ) -> list[ConversationEntry]:
        """The entries up to ``head_id`` (the last ``limit``): an indexed lookup of the
        session holding it, then its history read backwards a page at a time."""
        if head_id is None or limit == 0:
            return []
        return [_entry_of(c) for c in (await self._line(head_id, limit=limit)).carried]

    def _learn(self, session_id: str, page: Sequence[StoredMessage]) -> None:
        """Remember where the entries of ``page`` (read backwards from an entry's end)
        end, so that a later read of one starts there."""
        if len(self._ends) > _REMEMBERED:
            self._ends.clear()
        for stored in page:
            message_id = stored.message.message_id
            entry_id = (_continued(message_id) or (message_id, 0))[0]
            known = self._ends.get(entry_id)
            if known is None or known[0] != session_id or known[1] < stored.seq:
                self._ends[entry_id] = (session_id, stored.seq)

    async def _line(self, head_id: str, *, limit: int | None = None) -> _Line:
        """Entry ``head_id`` with the entries before it (the last ``limit``), read from
        the session holding it, backwards a page at a time from the entry's end where an
        earlier read saw it (checked), else from the session's end; ``KeyError`` when no
        session holds it."""
        store = await self._store()
        holder = await store.locate(head_id)
        if holder is None:
            raise KeyError(head_id)
        reader = _Backwards(head_id, limit)
        hint = self._ends.get(head_id)
        hinted = hint is not None and hint[0] == holder
        before = hint[1] + 1 if hint is not None and hinted else _END
        while not reader.done:
            page = await store.history(holder, include_excluded=True, before=before, limit=_PAGE)
            if hinted:  # the entry's end, as last read: still there?
                hinted = False
                last = page[-1].message.message_id if page else None
                if last is None or (_continued(last) or (last, 0))[0] != head_id:
                    del self._ends[head_id]  # moved since: read from the end
                    before = _END
                    continue
            self._learn(holder, page)
            reader.read(page)
            if reader.done:
                break
            if len(page) < _PAGE:  # the session's start: the rest, if any, is elsewhere
                if reader.want is None or not reader.line:
                    raise KeyError(head_id)
                left = None if limit is None else limit - len(reader.line)
                rest = await self._line(reader.want, limit=left)
                reader.line.extend(reversed(rest.carried))
                break
            before = page[0].seq
        return _Line(holder, reader.entries())


@dataclasses.dataclass(frozen=True)
class _Line:
    """An entry with the entries before it, as carried by their first messages, and the
    session that holds the last one."""

    session_id: str
    carried: list[dict[str, Any]]
