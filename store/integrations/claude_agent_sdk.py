"""The Claude Agent SDK: :class:`ChatledgerSessionStore`, a ``SessionStore`` kept in chatledger.

``ClaudeAgentOptions(session_store=ChatledgerSessionStore())`` makes the SDK mirror
every Claude Code transcript it writes into chatledger, and resume from it. The store
is a *mirror*: Claude Code compacts its own transcript (its ``compact_boundary`` and
summary entries arrive like any other), and chatledger keeps every entry so that
``chatledger show``, ``audit``, ``search``, ``usage`` and ``export`` work on Claude Code
sessions.

- A key is the session ``<project_key>/<session_id>``, and a subagent transcript
  (``subpath``) the session ``<project_key>/<session_id>/<subpath>``. A project key or
  session id holding ``/``, an empty subpath, or a name longer than the store's ids
  (255 characters) is :class:`~store.errors.InvalidInput`.
- :meth:`~ChatledgerSessionStore.append` turns each ``user`` and ``assistant`` entry
  into chatledger messages as ``chatledger import`` reads a Claude Code transcript
  (:mod:`store.importing.readers.claude_code`: tool results become ``tool`` messages,
  the message id is the entry's ``uuid``, the later ones ``<uuid>.<n>``). Each message
  keeps its own part of the raw ``message.content`` (:data:`PART_KEY`: the only raw
  copy of it), the entry's other fields and its ``message`` less the content
  (:data:`MESSAGE_KEY`); ``toolUseResult``, which repeats a tool's output, only on the
  message of the entry's first tool result. Every other entry (summaries, system
  entries, file-history snapshots, titles, and any entry the conversion cannot read) is
  stored whole as a ``system`` message holding one ``other`` content whose payload is
  the entry, excluded by an ``import`` event as it is stored: kept, never projected.
- :meth:`~ChatledgerSessionStore.load` returns exactly the entries appended, in order
  (each rebuilt from the messages it became); None for a key never written. Redaction
  erases: a redacted message of an entry reads back as placeholder blocks (a
  ``tool_result`` keeping its ``tool_use_id``, any other block a text, both reading
  ``[redacted]``) among the entry's other blocks; an entry none of whose messages is
  left (a one-message entry redacted) is gone from load.
- An entry's ``uuid`` is its idempotency key: appended again (in the same batch or a
  later one) it is stored once, the first one kept. Entries without a ``uuid`` (titles,
  tags, mode markers) are appended as they come, under a fresh id each time, never
  deduplicated.
- Each model response's usage goes to the usage ledger once, under the ``call_id``
  ``claude:<message.id>`` (the API response id its entries share), tied to its first
  message: when its entry with a ``stop_reason`` comes, with that entry's usage (the
  final counts); else when the session's next user entry or another response comes,
  or at :meth:`~ChatledgerSessionStore.aclose`, with the usage of its newest entry.
- :meth:`~ChatledgerSessionStore.list_sessions`,
  :meth:`~ChatledgerSessionStore.list_subkeys` and
  :meth:`~ChatledgerSessionStore.delete` (a main key deletes its subkeys too) read and
  delete the sessions by name; :meth:`~ChatledgerSessionStore.list_session_summaries`
  folds each session's entries with the SDK's own ``fold_session_summary`` when asked,
  the only place this module uses the SDK (which is then installed: it is what asks).

The SDK checks no types, so the adapter imports nothing of it otherwise; install the
extra (``pip install 'chatledger[claude-agent-sdk]'``) for the SDK itself.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

from store.contract import DEFAULT_TENANT, HistoryBackend, is_bulk_import_backend
from store.errors import InvalidInput, InvalidSource, SessionNotFound
from store.formats._common import SOURCE_FORMAT_KEY
from store.importing.readers._claude_chain import Entry, response_id
from store.importing.readers._compaction import kept_aside
from store.importing.readers.claude_code import CLAUDE_CODE_KEY, spoken_messages
from store.importing.usage import UnusableUsage, call_id_of, usage_of
from store.integrations._shared import StoreLease
from store.models import Provenance, SessionInfo
from store.rules.erasure import REDACTED_TEXT
from store.rules.identity import REDACTION_KEY, hashing_of
from store.rules.limits import SQL_KEY_LENGTH
from store.usage.models import Usage
from strategies.messages import FunctionResultContent, Message, OtherContent

if TYPE_CHECKING:
    from claude_agent_sdk.types import (
        SessionKey,
        SessionListSubkeysKey,
        SessionStoreEntry,
        SessionStoreListEntry,
        SessionSummaryEntry,
    )

__all__ = [
    "MESSAGE_KEY",
    "PART_KEY",
    "SOURCE",
    "ChatledgerSessionStore",
    "entries_of",
    "entry_messages",
]

logger = logging.getLogger("chatledger.integrations")

SOURCE = "claude_agent_sdk"
"""The provenance of every message the store writes, and its import events' source."""
MESSAGE_KEY = "claude_agent_sdk_message"
"""Metadata key holding, on each message a ``user`` or ``assistant`` entry became, the
entry's ``message`` less its ``content`` (the entry's other fields are under
:data:`~store.importing.readers.claude_code.CLAUDE_CODE_KEY`)."""
PART_KEY = "claude_agent_sdk_part"
"""Metadata key holding, on each message a ``user`` or ``assistant`` entry became, its
own part of the entry's ``message.content`` as it came: the whole content when the entry
is one message, else the list of blocks the message was read from. The only raw copy
of that part: redacting the message erases it."""
RECORD_FORMAT = "claude_code"
"""The :data:`~store.formats.SOURCE_FORMAT_KEY` of an entry stored whole (as the
``claude-code`` import stores the entries it has no message for)."""
CALL_ID_PREFIX = "claude:"
"""A model response's usage is recorded under this prefix and its API ``message.id``."""

_SPOKEN = frozenset({"user", "assistant"})
_BESIDE_RESULT = ("toolUseResult",)
"""An entry's fields that repeat its tool result (Claude Code's ``toolUseResult``, the
tool's output): kept only on the message of the entry's first ``tool_result``."""
_SEPARATOR = "/"
_PAGE = 1_000
"""Sessions read a page when listing."""


def _name_part(value: object, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidInput(f"{what} must be a non-empty string, got {value!r}")
    if _SEPARATOR in value:
        raise InvalidInput(f"{what} must not hold '/', got {value!r}")
    return value


def _main_name(key: SessionKey | SessionListSubkeysKey) -> str:
    """``<project_key>/<session_id>`` of a key (its subpath left aside)."""
    if not isinstance(key, dict):
        raise InvalidInput(f"a session key must be a dict, got {type(key).__name__}")
    project = _name_part(key.get("project_key"), "project_key")
    return f"{project}{_SEPARATOR}{_name_part(key.get('session_id'), 'session_id')}"


def _session_name(key: SessionKey) -> str:
    """The chatledger session of a key: ``<project_key>/<session_id>[/<subpath>]``."""
    main = _main_name(key)
    if "subpath" not in key:
        return main
    subpath = key["subpath"]
    if not isinstance(subpath, str) or not subpath:
        raise InvalidInput(f"subpath must be a non-empty string when given, got {subpath!r}")
    return f"{main}{_SEPARATOR}{subpath}"


def _own_id(entry: dict[str, Any]) -> str | None:
    """The entry's ``uuid`` when it can be a message id (else the entry has none)."""
    found = entry.get("uuid")
    if not isinstance(found, str) or not found or "\x00" in found:
        return None
    return found if len(found) <= SQL_KEY_LENGTH - 8 else None  # room for a split's ".<n>"


def _moment(entry: dict[str, Any]) -> datetime | None:
    """The entry's ``timestamp`` (None when it has none that reads as a time)."""
    stamp = entry.get("timestamp")
    try:
        moment = datetime.fromisoformat(stamp) if isinstance(stamp, str) else None
    except ValueError:
        return None
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)


def _record(entry: dict[str, Any], message_id: str) -> Message:
    """An entry chatledger has no message for: stored whole, never projected."""
    kind = entry.get("type")
    message = Message(
        role="system",
        contents=[OtherContent(kind=kind if isinstance(kind, str) else "entry", payload=entry)],
        message_id=message_id,
        created_at=_moment(entry),
        metadata={SOURCE_FORMAT_KEY: RECORD_FORMAT},
    )
    return kept_aside(message, f"claude-code {kind}")


def _runs(message: dict[str, Any]) -> list[Any]:
    """The raw content of each message a Messages API ``message`` becomes, in order (as
    :func:`~store.formats.from_anthropic` cuts a user turn: each ``tool_result`` block
    alone, the blocks between them together; any other message whole)."""
    content = message.get("content")
    if message.get("role") != "user" or not isinstance(content, list) or not content:
        return [content]
    runs: list[list[Any]] = []
    joined = False
    for block in content:
        result = isinstance(block, dict) and block.get("type") == "tool_result"
        if joined and not result:
            runs[-1].append(block)
        else:
            runs.append([block])
        joined = not result
    return list(runs)


def _is_result(part: Any) -> bool:
    return (
        isinstance(part, list)
        and len(part) == 1
        and isinstance(part[0], dict)
        and part[0].get("type") == "tool_result"
    )


def _spoken(value: dict[str, Any], position: int) -> list[Message]:
    """A ``user`` or ``assistant`` entry's messages, each keeping its own part of the
    entry (empty when the conversion cannot read it)."""
    try:
        messages = spoken_messages(SOURCE, Entry(position, value))
    except InvalidSource:
        return []
    raw: dict[str, Any] = value["message"]
    parts = _runs(raw)
    if len(parts) != len(messages):
        return []  # cut otherwise than expected: kept whole instead
    own = {k: v for k, v in value.items() if k != "message"}
    envelope = {k: v for k, v in raw.items() if k != "content"}
    beside = {k: own.pop(k) for k in _BESIDE_RESULT if k in own}
    holder = next((i for i, part in enumerate(parts) if _is_result(part)), 0)
    out = []
    for index, (message, part) in enumerate(zip(messages, parts, strict=True)):
        fields = {**own, **beside} if index == holder else own
        metadata = {
            **message.metadata,
            CLAUDE_CODE_KEY: fields,
            MESSAGE_KEY: envelope,
            PART_KEY: part,
        }
        out.append(message.model_copy(update={"metadata": metadata}))
    return out


def entry_messages(entry: SessionStoreEntry, *, position: int = 1) -> list[Message]:
    """The messages an entry becomes (see the module docstring): a ``user`` or
    ``assistant`` entry its messages, each keeping its own part of the entry; any other
    entry one message kept aside. ``position`` names the entry in an error (its place
    in its batch). An entry without a usable ``uuid`` gets a fresh id."""
    value = cast(dict[str, Any], entry)
    if not isinstance(value, dict):
        raise InvalidInput(f"entry {position} is not a JSON object")
    own = _own_id(value)
    if value.get("type") in _SPOKEN and own is not None and isinstance(value.get("message"), dict):
        messages = _spoken(value, position)
        if messages:
            return messages
    kind = value.get("type")
    prefix = kind[:40] if isinstance(kind, str) and kind else "entry"
    return [_record(value, own or f"{prefix}-{uuid.uuid4().hex}")]


def _grave_part(message: Message) -> list[Any]:
    """The raw blocks a redacted part reads back as: its tombstone's, a tool result
    keeping its ``tool_use_id``, every other block one text."""
    blocks: list[Any] = []
    for content in message.contents:
        if isinstance(content, FunctionResultContent):
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": content.call_id}
            block["content"] = REDACTED_TEXT
            if content.is_error:
                block["is_error"] = True
            blocks.append(block)
        else:
            blocks.append({"type": "text", "text": REDACTED_TEXT})
    return blocks


def _part_of(message: Message) -> tuple[str, int] | None:
    """The entry (its ``uuid``) and place of a message that keeps a part of one."""
    own = message.metadata.get(CLAUDE_CODE_KEY)
    if PART_KEY not in message.metadata or not isinstance(own, dict):
        return None
    found = own.get("uuid")
    if not isinstance(found, str):
        return None
    place = _place(message.message_id, found)
    return None if place is None else (found, place)


def _place(message_id: str, entry_id: str) -> int | None:
    """The place in entry ``entry_id`` of the message ``message_id`` (None when it
    is none of its messages)."""
    if message_id == entry_id:
        return 0
    head, dot, tail = message_id.rpartition(".")
    if head != entry_id or not dot or not tail.isdigit() or tail.startswith("0"):
        return None
    return int(tail)


@dataclass(slots=True)
class _Parts:
    """The stored messages of one spoken entry, by place (a redacted one by its blocks)."""

    entry_id: str
    kept: dict[int, Message] = field(default_factory=dict)
    graves: dict[int, Message] = field(default_factory=dict)

    def entry(self) -> SessionStoreEntry:
        own: dict[str, Any] = {}
        envelope: dict[str, Any] = {}
        for message in self.kept.values():
            own.update(cast(dict[str, Any], message.metadata[CLAUDE_CODE_KEY]))
            found = message.metadata.get(MESSAGE_KEY)
            if isinstance(found, dict):
                envelope = found
        parts: list[Any] = [
            self.kept[i].metadata[PART_KEY] if i in self.kept else _grave_part(self.graves[i])
            for i in sorted({*self.kept, *self.graves})
        ]
        content: Any = parts[0]
        if len(parts) > 1:
            content = [b for p in parts for b in (p if isinstance(p, list) else [p])]
        return cast("SessionStoreEntry", {**own, "message": {**envelope, "content": content}})


class _Entries:
    """Folds a session's stored messages, in order, into the entries they keep: a
    spoken entry's messages are stored together, a redacted one among them read back
    as its tombstone's blocks; an entry none of whose messages is left is gone."""

    def __init__(self) -> None:
        self.out: list[SessionStoreEntry] = []
        self._open: _Parts | None = None
        self._graves: list[Message] = []
        """The tombstones since the last kept message, not yet known to be parts."""

    def feed(self, message: Message) -> None:
        part = _part_of(message)
        if part is not None:
            entry_id, place = part
            if self._open is None or self._open.entry_id != entry_id:
                self._close()
                self._open = _Parts(entry_id)
                for grave in self._graves:
                    at = _place(grave.message_id, entry_id)
                    if at is not None:
                        self._open.graves[at] = grave
            self._graves = []
            self._open.kept[place] = message
            return
        if REDACTION_KEY in message.metadata:
            at = None if self._open is None else _place(message.message_id, self._open.entry_id)
            if self._open is not None and at is not None:
                self._open.graves[at] = message
            else:
                self._graves.append(message)
            return
        self._graves = []
        entry = _whole(message)
        if entry is not None:
            self._close()
            self.out.append(entry)

    def _close(self) -> None:
        if self._open is not None:
            self.out.append(self._open.entry())
            self._open = None

    def done(self) -> list[SessionStoreEntry]:
        self._close()
        return self.out


def _whole(message: Message) -> SessionStoreEntry | None:
    """The entry a message kept aside holds whole (None for any other message)."""
    if message.metadata.get(SOURCE_FORMAT_KEY) != RECORD_FORMAT or len(message.contents) != 1:
        return None
    content = message.contents[0]
    if isinstance(content, OtherContent) and isinstance(content.payload, dict):
        return cast("SessionStoreEntry", content.payload)
    return None


def entries_of(messages: Iterable[Message]) -> list[SessionStoreEntry]:
    """The entries a session's stored ``messages`` (in storage order) keep, as
    :meth:`ChatledgerSessionStore.load` gives them: messages of other writers and
    chatledger's summaries keep none."""
    entries = _Entries()
    for message in messages:
        entries.feed(message)
    return entries.done()


def _is_record(message: Message) -> bool:
    return message.metadata.get(SOURCE_FORMAT_KEY) == RECORD_FORMAT


@dataclass(frozen=True, slots=True)
class _Said:
    """A ``user`` or ``assistant`` entry of a batch, by the first message it became."""

    message: Message
    call_id: str | None
    """An assistant entry's model response (its usage's ``call_id``)."""
    final: bool
    """Whether the entry ends its response (its ``stop_reason`` is set)."""


def _said(entry: dict[str, Any], message: Message) -> _Said | None:
    if message.metadata.get(MESSAGE_KEY) is None:
        return None
    if message.role != "assistant":
        return _Said(message, None, final=False)
    response = response_id(Entry(0, entry))
    call_id = (
        f"{CALL_ID_PREFIX}{response}"
        if response is not None and len(response) <= SQL_KEY_LENGTH - len(CALL_ID_PREFIX)
        else call_id_of(message.message_id)
    )
    final = entry["message"].get("stop_reason") is not None
    return _Said(message, call_id, final=final)


@dataclass(slots=True)
class _Batch:
    """One append's messages, entries deduplicated by ``uuid`` (the first kept)."""

    messages: list[Message] = field(default_factory=list)
    said: list[_Said] = field(default_factory=list)
    """Its user and assistant entries, in order."""

    @classmethod
    def of(cls, entries: Sequence[SessionStoreEntry]) -> _Batch:
        batch = cls()
        seen: set[str] = set()
        for position, entry in enumerate(entries, start=1):
            made = entry_messages(entry, position=position)
            if made[0].message_id in seen:
                continue
            seen.update(m.message_id for m in made)
            batch.messages.extend(made)
            said = _said(cast(dict[str, Any], entry), made[0])
            if said is not None:
                batch.said.append(said)
        return batch

    def without(self, stored: set[str]) -> list[Message]:
        """The batch less the messages whose id is in ``stored``."""
        return [m for m in self.messages if m.message_id not in stored]


@dataclass(slots=True)
class _Response:
    """A model response of a session whose usage is not recorded yet: its call id,
    its first message's id, and its newest message (whose usage is the latest)."""

    call_id: str
    first: str
    last: Message


class ChatledgerSessionStore:
    """A Claude Agent SDK ``SessionStore`` kept in chatledger (see the module docstring).

    Give a ``store`` (used, never closed; its tenant is the adapter's), or a ``url``
    (default ``$CHATLEDGER_URL``, then ``./chatledger.db``) and a ``tenant``: adapters
    with the same URL and tenant share one store, opened on first use and closed when
    the last of them calls :meth:`aclose`, or at exit.
    """

    def __init__(
        self,
        store: HistoryBackend | None = None,
        *,
        url: str | None = None,
        tenant: str = DEFAULT_TENANT,
    ) -> None:
        self._lease = StoreLease.of(store, url=url, tenant=tenant)
        self._open: dict[str, _Response] = {}
        """Each session's model response whose usage waits for its last entry."""

    async def store(self) -> HistoryBackend:
        """The chatledger store (opened now when this adapter opens its own)."""
        return await self._lease.get()

    async def aclose(self) -> None:
        """Record the usage still waiting for a response's last entry, and release the
        store this adapter opened (a given store stays open)."""
        if self._open:
            store = await self.store()
            opened, self._open = self._open, {}
            for session_id, response in opened.items():
                await _record_usage(store, session_id, response)
        await self._lease.release()

    # -- the SDK's SessionStore -------------------------------------------------------

    async def append(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        """Mirror a batch of transcript entries, in one write (see the module
        docstring), then record the usage of the model responses among them."""
        session_id = _session_name(key)
        if not isinstance(entries, list):
            raise InvalidInput(f"entries must be a list, got {type(entries).__name__}")
        if not entries:
            return
        store = await self.store()
        with hashing_of(store):  # ids made of texts keyed as the store keys its hashes
            batch = _Batch.of(entries)
        try:
            await self._write(store, session_id, batch.messages)
        except InvalidInput:
            # an entry whose uuid is stored with other content: the stored one is kept
            stored = await _stored_ids(store, session_id, batch.messages)
            if not stored:
                raise
            await self._write(store, session_id, batch.without(stored))
        await self._account(store, session_id, batch.said)

    async def _write(self, store: HistoryBackend, session_id: str, batch: list[Message]) -> None:
        if not batch:
            return
        if any(_is_record(m) for m in batch):
            await store.import_messages(session_id, batch, source=SOURCE)
        else:
            await store.append(session_id, batch, provenance=Provenance(system=SOURCE))

    async def _account(self, store: HistoryBackend, session_id: str, said: Sequence[_Said]) -> None:
        """Record the usage of each model response the batch ends: at its entry with a
        ``stop_reason``, else at the session's next user entry or other response (a
        response whose last entry is not seen yet waits, in this adapter, for it)."""
        response = self._open.pop(session_id, None)
        for one in said:
            if response is not None and one.call_id != response.call_id:
                await _record_usage(store, session_id, response)
                response = None
            if one.call_id is None:
                continue
            if response is None:
                response = _Response(one.call_id, one.message.message_id, one.message)
            response.last = one.message
            if one.final:
                await _record_usage(store, session_id, response)
                response = None
        if response is not None:
            self._open[session_id] = response

    async def load(self, key: SessionKey) -> list[SessionStoreEntry] | None:
        """The entries appended under ``key``, in order; None when it was never written."""
        session_id = _session_name(key)
        store = await self.store()
        entries = _Entries()
        try:
            async for stored in store.aiter_history(session_id, include_excluded=True):
                entries.feed(stored.message)
        except SessionNotFound:
            return None
        return entries.done()

    async def list_sessions(self, project_key: str) -> list[SessionStoreListEntry]:
        """The project's main sessions (no subkeys), each with its last write time in
        Unix epoch milliseconds."""
        prefix = _name_part(project_key, "project_key") + _SEPARATOR
        return [
            {"session_id": info.session_id[len(prefix) :], "mtime": _mtime(info)}
            for info in await _named(await self.store(), prefix)
            if _SEPARATOR not in info.session_id[len(prefix) :]
        ]

    async def list_session_summaries(self, project_key: str) -> list[SessionSummaryEntry]:
        """The SDK's summary of each of the project's main sessions, folded from its
        entries now by the SDK's ``fold_session_summary``; ``mtime`` is the one
        :meth:`list_sessions` gives."""
        try:
            from claude_agent_sdk import fold_session_summary
        except ImportError as exc:
            raise ImportError(
                "list_session_summaries folds with the Claude Agent SDK: "
                "pip install 'chatledger[claude-agent-sdk]'"
            ) from exc

        summaries: list[SessionSummaryEntry] = []
        for listed in await self.list_sessions(project_key):
            key: SessionKey = {"project_key": project_key, "session_id": listed["session_id"]}
            entries = await self.load(key)
            if entries is None:
                continue
            summary = fold_session_summary(None, key, entries)
            summaries.append({**summary, "mtime": listed["mtime"]})
        return summaries

    async def delete(self, key: SessionKey) -> None:
        """Delete the session; a main key (no ``subpath``) deletes its subkeys too."""
        session_id = _session_name(key)
        store = await self.store()
        doomed = [session_id]
        if "subpath" not in key:
            doomed += [i.session_id for i in await _named(store, session_id + _SEPARATOR)]
        for name in doomed:
            try:
                await store.delete_session(name)
            except SessionNotFound:
                continue

    async def list_subkeys(self, key: SessionListSubkeysKey) -> list[str]:
        """The subpaths written under the session (subagent transcripts)."""
        prefix = _main_name(key) + _SEPARATOR
        return [i.session_id[len(prefix) :] for i in await _named(await self.store(), prefix)]


def _mtime(info: SessionInfo) -> int:
    return int(info.updated_at.timestamp() * 1000)


async def _named(store: HistoryBackend, prefix: str) -> list[SessionInfo]:
    """The tenant's sessions whose id starts with ``prefix``. Read from the prefix on to
    the last session: a database collation may sort ``/`` between other names, so the
    sessions of a prefix need not be together."""
    found: list[SessionInfo] = []
    after: str | None = prefix
    while True:
        page = await store.sessions(limit=_PAGE, after=after)
        found += [i for i in page if i.session_id.startswith(prefix)]
        if len(page) < _PAGE:
            return found
        after = page[-1].session_id


async def _stored_ids(store: HistoryBackend, session_id: str, batch: Sequence[Message]) -> set[str]:
    """The ids of ``batch`` the session holds already: read from the session's ids
    alone where the backend gives them (the SQL one), else from its history."""
    wanted = {m.message_id for m in batch}
    if is_bulk_import_backend(store):
        return wanted & (await store.stored_hashes([session_id])).get(session_id, {}).keys()
    found: set[str] = set()
    try:
        async for stored in store.aiter_history(session_id, include_excluded=True):
            if stored.message.message_id in wanted:
                found.add(stored.message.message_id)
    except SessionNotFound:
        return set()
    return found


async def _record_usage(store: HistoryBackend, session_id: str, response: _Response) -> None:
    """Record a model response's usage, that of its newest entry (a refused one is
    logged and skipped: bookkeeping never fails the mirror)."""
    try:
        usage: Usage | None = usage_of(response.last)
        if usage is not None:
            await store.record_usage(
                session_id, usage, message_id=response.first, call_id=response.call_id
            )
    except (UnusableUsage, InvalidInput) as error:
        logger.warning(
            "usage of %s not recorded (session %s): %s", response.call_id, session_id, error
        )
