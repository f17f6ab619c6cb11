"""Pass two of an import: the sources read again, and what pass one accepted appended.

Messages go out :data:`BATCH` at a time, many sessions' in one transaction, and every
session whole in one transaction: a session that does not fit in what is left of a
batch waits for the next. A session pass one found larger than a batch, or read from
more than one source, cannot be; it is marked in its metadata before its first part
(:mod:`store.rules.import_mark`) and the mark taken off after its last, so that an
interrupted import leaves a session whole, absent, or marked. A read whose messages are
all stored already is not sent again. Progress reports ``sessions`` and ``stored``, the
sessions written whole so far and their new messages, as each transaction commits.

The reads pass one found to be forks (:mod:`store.importing.lineage`) are written last,
parents before their forks: each forks its parent at its fork message, then appends its
own messages (those after the fork message), so that it shares its parent's rows.

The usage a model call reported, kept on the assistant message it produced
(:mod:`store.importing.usage`), is recorded in the usage ledger once the message is
stored, tied to it, under a ``call_id`` made of its id (``import:<message id>``): a
repeated one records nothing, so running the import again adds only the calls of new
messages. The reads whose messages are all stored already are read for their usage too,
so that a run interrupted between a write and its usage, or an import made before the
ledger existed, gains the calls it lacks. No call is recorded before its message is
stored.

Titles a source gives its conversations (:attr:`Conversation.title`) are set last, on
every session of an accepted read whose stored title differs, whether or not it had new
messages (an import made before sessions had titles gains them when run again).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from store.contract import HistoryBackend, UsageRecord, is_bulk_usage_backend
from store.errors import SessionNotFound
from store.formats import ORIGINAL_ID_KEY
from store.importing.ledger import Ledger
from store.importing.reads import Chunk, Plan, chunks, identified
from store.importing.source import Conversation, Located
from store.importing.stored import Batch, append_sessions
from store.importing.usage import UsageScan, call_id_of
from store.models import Provenance
from store.rules.checks import title_of_source
from store.rules.import_mark import IMPORT_MARK_KEY, mark_of, verdict, with_mark
from store.usage.models import Usage
from strategies.messages import Message

__all__ = ["BATCH", "Writing"]

BATCH = 2000
"""Messages appended in one transaction (of one session or many)."""

_SOURCE_ID_LENGTH = 255

_UNKNOWN = object()
"""Not known yet (the fork message of a read's session is asked when it matters)."""


@dataclass(slots=True)
class _Part:
    """Consecutive messages of one session, with their source ids."""

    session_id: str
    fmt: str
    messages: list[Message] = field(default_factory=list)
    source_ids: dict[str, str] = field(default_factory=dict)
    usages: list[tuple[str, Usage]] = field(default_factory=list)
    """The usage of the model calls among the messages, by message id."""


@dataclass(slots=True)
class _Pending:
    """What is read and not written yet, by session, in source order."""

    parts: list[_Part] = field(default_factory=list)
    size: int = 0
    finished: list[tuple[str, int]] = field(default_factory=list)
    """Sessions whose last part is among the parts, with their new messages."""

    def add(
        self,
        fmt: str,
        session_id: str,
        conversation: Conversation,
        part: list[Located],
        usages: dict[str, Usage],
    ) -> None:
        last = self.parts[-1] if self.parts else None
        if last is None or last.session_id != session_id or last.fmt != fmt:
            last = _Part(session_id, fmt)
            self.parts.append(last)
        for located in part:
            last.messages.append(located.message)
            last.source_ids[located.message.message_id] = _source_id(conversation, located)
            usage = usages.get(located.message.message_id)
            if usage is not None:
                last.usages.append((located.message.message_id, usage))
        self.size += len(part)

    def batches(self) -> list[Batch]:
        return [
            (p.session_id, p.messages, Provenance(system=p.fmt, source_ids=p.source_ids))
            for p in self.parts
        ]


@dataclass(slots=True)
class _Held:
    """The read being written when its session is written whole: held until its end."""

    number: int
    session_id: str
    plan: Plan
    parts: list[tuple[Conversation, list[Located], dict[str, Usage]]] = field(default_factory=list)
    size: int = 0


class Writing:
    """Pass two over ``plans``, following ``ledger``."""

    def __init__(
        self,
        store: HistoryBackend,
        plans: list[Plan],
        ledger: Ledger,
        *,
        prefix: Callable[[Plan], str],
        failed: set[str],
        table: str | None,
        progress: Callable[[str, int], None] | None,
    ) -> None:
        self.store = store
        self.plans = plans
        self.ledger = ledger
        self.prefix = prefix
        self.failed = failed
        self.table = table
        self.progress = progress
        self.pending = _Pending()
        self.held: _Held | None = None
        self.marked: set[str] = set()
        self.sessions = 0
        """Sessions written whole so far."""
        self.stored = 0
        """Their new messages."""
        self.done = 0
        self.titles: dict[str, str] = {}
        """The title each session's source gives it (the last one read)."""
        self.scan = UsageScan()
        """The usage of the read being written, message by message."""
        self.shared: str | object | None = None
        """The read's session's fork message while the read is before it (its messages
        the parent's); :data:`_UNKNOWN` until asked."""
        self.usage_calls = 0
        """Model calls whose usage this run recorded."""
        self.usage_refused: dict[str, int] = {}
        """Usages refused (not counts), by source."""

    async def run(self, compact: str | None) -> None:
        """Write every accepted read, then take off the marks left by an earlier run and
        compact the imported sessions (with ``compact``)."""
        for plan in self.plans:
            if plan.source not in self.failed:
                await self._write_plan(plan)
        await self._flush()
        await self._write_forks()
        for session_id in self.ledger.marked:
            await self._unmark(session_id, only_when_done=True)
        await self._set_titles()
        if compact is not None:
            for session_id in self.ledger.imported():
                await self.store.compact(session_id, compact, phase="import")

    async def _write_plan(self, plan: Plan) -> None:
        for chunk in chunks(plan, self.prefix(plan), self.table):
            if chunk.begins:
                await self._end_read()
            self.done += len(chunk.conversation.messages)
            if self.progress is not None:
                self.progress("write", self.done)
            if not self.ledger.accepted(chunk.read) or chunk.read in self.ledger.forks:
                continue
            session_id = self.ledger.session_of(chunk.read)
            if session_id is None:
                continue
            self._title(chunk.conversation, session_id)
            if self.ledger.row(chunk.read).new == 0:
                await self._stored_usage(plan, chunk, session_id)
                continue
            await self._add(plan, chunk, session_id)
        await self._end_read()

    async def _usages(
        self,
        plan: Plan,
        chunk: Chunk,
        session_id: str,
        located: list[Located] | None = None,
        *,
        after: int = -1,
    ) -> dict[str, Usage]:
        """The usage the chunk's own messages carry, by their ids as stored
        (``located``: the chunk's messages as :func:`identified` names them; None:
        named here when needed). The scan starts again with each read; a session stored
        already as a fork owns only the messages after its fork message (those before
        are its parent's, and so are their calls: the read's chunks are walked until
        it), and one written as a fork now those after position ``after`` of the read.
        Refused usages are counted against the source."""
        if chunk.begins:
            self.scan = UsageScan()
            stored = self.ledger.row(chunk.read).already > 0
            self.shared = _UNKNOWN if after < 0 and stored else None
        found: list[tuple[int, Usage]] = []
        for position, item in enumerate(chunk.conversation.messages):
            usage = self.scan.usage(item.message)
            if chunk.start + position <= after:
                continue
            if usage is not None:
                found.append((position, usage))
            elif self.scan.refused:
                self.usage_refused[plan.source] = self.usage_refused.get(plan.source, 0) + 1
        if self.shared is _UNKNOWN:
            self.shared = await self._fork_message(session_id)
        if not found and self.shared is None:
            return {}
        if located is None:
            legacy = chunk.read in self.ledger.legacy
            located = identified(plan.fmt, chunk, session_id, legacy=legacy)
        return self._owned(located, dict(found))

    def _owned(self, located: list[Located], found: dict[int, Usage]) -> dict[str, Usage]:
        """The usages ``found`` (by position) of the messages after the fork message
        while the read is before it, by message id."""
        usages: dict[str, Usage] = {}
        for position, item in enumerate(located):
            message_id = item.message.message_id
            if isinstance(self.shared, str):
                if message_id == self.shared:
                    self.shared = None
                continue
            if position in found:
                usages[message_id] = found[position]
        return usages

    async def _fork_message(self, session_id: str) -> str | None:
        """The message a stored fork took last from its parent (None: the session is
        not stored, or is a root)."""
        try:
            return (await self.store.session(session_id)).fork_message_id
        except SessionNotFound:
            return None

    async def _stored_usage(self, plan: Plan, chunk: Chunk, session_id: str) -> None:
        """Record the usage of a chunk whose messages are all stored already (what an
        earlier run did not record)."""
        usages = await self._usages(plan, chunk, session_id)
        await self._record(session_id, list(usages.items()))

    async def _add(self, plan: Plan, chunk: Chunk, session_id: str) -> None:
        legacy = chunk.read in self.ledger.legacy
        located = identified(plan.fmt, chunk, session_id, legacy=legacy)
        usages = await self._usages(plan, chunk, session_id, located)
        conversation = chunk.conversation
        if chunk.begins:
            self.held = _Held(chunk.read, session_id, plan)
        split = session_id in self.ledger.split
        if split and session_id not in self.marked:
            await self._mark(session_id)
        if conversation.compacted:  # another system's compaction: imported whole
            await self._flush()
            await self.store.import_messages(
                session_id, [item.message for item in located], source=plan.fmt
            )
            await self._record(session_id, list(usages.items()))
            return
        if not split:
            held = self.held
            if held is not None:
                held.parts.append((conversation, located, usages))
                held.size += len(located)
            return
        start = 0
        while start < len(located):
            stop = start + max(1, BATCH - self.pending.size)
            self.pending.add(plan.fmt, session_id, conversation, located[start:stop], usages)
            start = stop
            if self.pending.size >= BATCH:
                await self._flush()

    async def _write_forks(self) -> None:
        """Write the forks, a level at a time (a fork's parent is written before it),
        each source read once a level."""
        forks = self.ledger.forks
        levels = max((fork.level for fork in forks.values()), default=-1) + 1
        for level in range(levels):
            for number, plan in enumerate(self.plans):
                end = (
                    self.plans[number + 1].first_read
                    if number + 1 < len(self.plans)
                    else self.ledger.reads
                )
                reads = {
                    read
                    for read, fork in forks.items()
                    if fork.level == level and plan.first_read <= read < end
                }
                if reads and plan.source not in self.failed:
                    await self._write_forks_of(plan, reads)

    async def _write_forks_of(self, plan: Plan, reads: set[int]) -> None:
        """Write the forks ``reads`` of ``plan``: each forks its parent at its start,
        then appends its own messages, a chunk at a time."""
        written: int | None = None
        for chunk in chunks(plan, self.prefix(plan), self.table):
            if chunk.begins and written is not None:
                self._written(written)
                written = None
            if chunk.read not in reads:
                continue
            session_id = self.ledger.session_of(chunk.read)
            if session_id is None:
                continue
            self._title(chunk.conversation, session_id)
            fork = self.ledger.forks[chunk.read]
            if chunk.begins:
                await self.store.fork(
                    fork.parent_session_id, at=fork.fork_message_id, new_session_id=session_id
                )
                written = chunk.read
            legacy = chunk.read in self.ledger.legacy
            located = identified(plan.fmt, chunk, session_id, legacy=legacy)
            usages = await self._usages(plan, chunk, session_id, located, after=fork.cut)
            own = [item for offset, item in enumerate(located) if chunk.start + offset > fork.cut]
            if own:
                source_ids = {
                    item.message.message_id: _source_id(chunk.conversation, item) for item in own
                }
                provenance = Provenance(system=plan.fmt, source_ids=source_ids)
                messages = [item.message for item in own]
                await self.store.append(session_id, messages, provenance=provenance)
                await self._record(
                    session_id,
                    [
                        (m.message_id, usages[m.message_id])
                        for m in messages
                        if m.message_id in usages
                    ],
                )
        if written is not None:
            self._written(written)

    async def _record(self, session_id: str, usages: list[tuple[str, Usage]]) -> None:
        """Record the usage of stored messages of the session (see :meth:`_record_many`)."""
        await self._record_many([(session_id, usages)])

    async def _record_many(self, parts: list[tuple[str, list[tuple[str, Usage]]]]) -> None:
        """Record the usage of stored messages of several sessions, each call under the
        call id its message's id makes, those recorded already left out: in one write
        when the store has the bulk path, else one transaction a call (the recorded call
        ids read once a session)."""
        if is_bulk_usage_backend(self.store):
            calls: list[UsageRecord] = [
                (session_id, usage, message_id, call_id_of(message_id))
                for session_id, usages in parts
                for message_id, usage in usages
            ]
            if calls:
                self.usage_calls += await self.store.record_usages(calls)
            return
        for session_id, usages in parts:
            if usages:
                await self._record_each(session_id, usages)

    async def _record_each(self, session_id: str, usages: list[tuple[str, Usage]]) -> None:
        recorded = {call.call_id for call in await self.store.usage_calls(session_id)}
        for message_id, usage in usages:
            call_id = call_id_of(message_id)
            if call_id in recorded:
                continue
            await self.store.record_usage(session_id, usage, message_id=message_id, call_id=call_id)
            recorded.add(call_id)
            self.usage_calls += 1

    def _title(self, conversation: Conversation, session_id: str) -> None:
        title = title_of_source(conversation.title)
        if title is not None:
            self.titles[session_id] = title

    async def _set_titles(self) -> None:
        """Set each session's title from its source where the stored one differs (a
        session that holds nothing, never written, is left absent)."""
        for session_id, title in self.titles.items():
            try:
                stored = (await self.store.session(session_id)).title
            except SessionNotFound:
                continue
            if stored != title:
                await self.store.set_title(session_id, title)

    def _written(self, read: int) -> None:
        """A fork is written whole: count it."""
        self.sessions += 1
        self.stored += self.ledger.row(read).new
        if self.progress is not None:
            self.progress("sessions", self.sessions)
            self.progress("stored", self.stored)

    async def _end_read(self) -> None:
        """The read is at its end: a session written whole goes into the batch, or the
        next one when it does not fit; the session is finished with its last read."""
        held, self.held = self.held, None
        if held is None:
            return
        if held.parts:
            if self.pending.size + held.size > BATCH:
                await self._flush()
            for conversation, located, usages in held.parts:
                self.pending.add(held.plan.fmt, held.session_id, conversation, located, usages)
        new = self.ledger.row(held.number).new
        left = self.ledger.parts.get(held.session_id, 1) - 1
        if held.session_id in self.ledger.parts:
            self.ledger.parts[held.session_id] = left
        if left <= 0:
            self.pending.finished.append((held.session_id, new))

    async def _flush(self) -> None:
        """Write the pending messages in one go; then report the sessions finished (as
        soon as the write returns: an interrupt after it finds them counted), take
        their marks off, and record the usage of the messages written."""
        written = self.pending.parts
        if written:
            await append_sessions(self.store, self.pending.batches())
        self.pending.parts, self.pending.size = [], 0
        finished, self.pending.finished = self.pending.finished, []
        for session_id, new in finished:
            mark = self.ledger.split.get(session_id)
            self.sessions += 1
            self.stored += new if mark is None else mark.expected - mark.held
        if finished and self.progress is not None:
            self.progress("sessions", self.sessions)
            self.progress("stored", self.stored)
        for session_id, _ in finished:
            if session_id in self.ledger.split:
                await self._unmark(session_id, only_when_done=False)
        await self._record_many([(part.session_id, part.usages) for part in written])

    async def _mark(self, session_id: str) -> None:
        self.marked.add(session_id)
        try:
            metadata = await self.store.get_metadata(session_id)
        except SessionNotFound:
            metadata = {}
        mark = self.ledger.split[session_id]
        await self.store.set_metadata(session_id, with_mark(metadata, mark))

    async def _unmark(self, session_id: str, *, only_when_done: bool) -> None:
        try:
            metadata = await self.store.get_metadata(session_id)
        except SessionNotFound:
            return
        mark = mark_of(metadata)
        if IMPORT_MARK_KEY not in metadata or mark is None:
            return
        if only_when_done:
            stored = (await self.store.session(session_id)).stored_messages
            if verdict(mark, stored) != "done":
                return
        await self.store.set_metadata(session_id, with_mark(metadata, None))


def _source_id(conversation: Conversation, located: Located) -> str:
    """The message's id in its source: the source's own, else where it is."""
    original = located.message.metadata.get(ORIGINAL_ID_KEY, located.message.message_id)
    own = original if isinstance(original, str) and original else None
    if own is not None and not own.startswith("imp-"):
        return own[:_SOURCE_ID_LENGTH]
    session = conversation.source_session or ""
    return f"{session} {located.where}".strip()[:_SOURCE_ID_LENGTH]
