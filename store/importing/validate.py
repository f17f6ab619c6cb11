"""Pass one of an import: every source read, every message checked and counted, before
anything is written.

A window of about :data:`WINDOW` messages is checked at a time, the stored messages of
all the sessions it starts read in one query. Each read (:mod:`store.importing.reads`)
is checked against the store and against itself, then the sessions read more than once
against their other reads (:class:`_Recount`). Whatever is wrong refuses the read (or
the whole source, when it cannot be read to its end): with ``skip_invalid`` it is
listed in the :class:`~store.importing.ledger.Ledger`, otherwise it raises before
anything is written.

The refusals that keep two conversations apart:

- a session another system's source gives in the same import (two systems' sessions
  never merge: each needs its own ``--session-prefix``, or ``--prefix-by-source``);
- new messages for a session the store holds from another system, or written through
  the API rather than imported;
- a message at a place of a session that the store, or another read, holds with other
  content (the source changed, or two conversations share an id).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from store.contract import HistoryBackend
from store.errors import InvalidInput, InvalidSource
from store.importing.ids import (
    is_made,
    legacy_message_id,
    legacy_session_id,
    message_id_for,
    place_of,
)
from store.importing.ledger import Ledger, Row
from store.importing.lineage import Lineage
from store.importing.reads import Chunk, Plan, chunks, identified, made_by_importer
from store.importing.source import Conversation, Located, advised
from store.importing.stored import stored_calls, stored_hashes
from store.rules.checks import check_message, check_session_id
from store.rules.identity import content_hash, is_replay
from store.rules.limits import DEFAULT_LIMITS, Limits
from strategies.groups import call_links
from strategies.messages import Message

__all__ = ["WINDOW", "Validation"]

WINDOW = 2000
"""Messages checked together, the stored messages of their sessions read at once."""

_ALIASES = {"agent_framework": "agent-framework"}
"""Systems earlier releases recorded under another name."""

_KEEP_BOTH = "to keep both, import one of them under another --session-prefix"


def _stored_system(system: str | None) -> str | None:
    """The format id a stored message's provenance names."""
    return None if system is None else _ALIASES.get(system, system)


@dataclass(slots=True)
class _Read:
    """What pass one knows of the read it is checking."""

    number: int
    session_id: str
    where: str
    """Where the read starts in its source."""
    plan: Plan
    stored: dict[str, str]
    """The content hash of each message id its session holds."""
    legacy: bool
    row: Row
    refused: bool = False
    calls: set[str] = field(default_factory=set)
    calls_read: bool = False
    """Whether ``calls`` holds the stored messages' calls too."""
    given: dict[str, str] = field(default_factory=dict)
    """The content hash of each id the source gave, so far."""
    system_checked: bool = False
    _places: dict[str, str] | None = None

    def places(self) -> dict[str, str]:
        """The stored ids the importer made, by their place (built when first asked)."""
        if self._places is None:
            self._places = {place_of(i): i for i in self.stored if is_made(i)}
        return self._places


class Validation:
    """Pass one over ``plans``, recorded in ``ledger``."""

    def __init__(
        self,
        store: HistoryBackend,
        plans: list[Plan],
        ledger: Ledger,
        *,
        prefix: Callable[[Plan], str],
        strict: bool,
        skip_invalid: bool,
        table: str | None,
        progress: Callable[[str, int], None] | None,
    ) -> None:
        self.store = store
        self.plans = plans
        self.ledger = ledger
        self.prefix = prefix
        self.strict = strict
        self.skip_invalid = skip_invalid
        self.table = table
        self.progress = progress
        self.limits: Limits = getattr(store, "limits", DEFAULT_LIMITS)
        """What the store accepts: pass one refuses what pass two's appends would."""
        self.failed: set[str] = set()
        """The sources that could not be read to their end."""
        self.current: _Read | None = None
        self.done = 0

    async def run(self) -> None:
        """Check every plan, then the sessions read more than once."""
        for plan in self.plans:
            plan.first_read = self.ledger.reads
            self.current = None
            try:
                await self._read_plan(plan)
            except InvalidSource as error:
                self.current = None
                if not self.skip_invalid:
                    raise advised(error) from None
                self.ledger.fail(plan, advised(error))
                self.failed.add(plan.source)
            self._close()
        if self.ledger.recurring:
            await _Recount(self).run()
        if self.ledger.origins:
            lineage = Lineage(
                self.store, self.plans, self.ledger, prefix=self.prefix, table=self.table
            )
            await lineage.run(self.failed)
        self.ledger.plan_parts(self.plans)

    def refuse(self, read: int, session_id: str | None, where: str, error: InvalidSource) -> None:
        """Refuse ``read`` (which starts at ``where``): raise, or with ``skip_invalid``
        list it and go on."""
        if not self.skip_invalid:
            raise advised(error)
        self.ledger.refuse(read, session_id, where, advised(error))

    # -- reading ------------------------------------------------------------------

    async def _read_plan(self, plan: Plan) -> None:
        window: list[Chunk] = []
        size = 0
        reading = chunks(plan, self.prefix(plan), self.table)
        try:
            while True:
                try:
                    chunk = next(reading, None)
                except InvalidSource as error:
                    await self._check_window(plan, window)  # what came before fails first
                    raise _released(error) from None
                if chunk is None:
                    break
                window.append(chunk)
                size += len(chunk.conversation.messages)
                if size >= WINDOW:
                    await self._check_window(plan, window)
                    window, size = [], 0
            await self._check_window(plan, window)
        finally:
            reading.close()

    async def _check_window(self, plan: Plan, window: list[Chunk]) -> None:
        wanted: list[str] = []
        for chunk in window:
            if chunk.begins and chunk.conversation.error is None:
                wanted.append(chunk.session_id)
                if _nameless(chunk.conversation):
                    where = chunk.conversation.where
                    wanted.append(
                        legacy_session_id(plan.fmt, plan.source, where, self.prefix(plan))
                    )
        wanted = [s for s in wanted if _valid_id(s, self.limits)]
        stored = await stored_hashes(self.store, wanted) if wanted else {}
        for chunk in window:
            if chunk.begins:
                self._begin(plan, chunk, stored)
            current = self.current
            if current is not None and not current.refused:
                await self._check(current, chunk)
            self.done += len(chunk.conversation.messages)
            if self.progress is not None:
                self.progress("validate", self.done)

    # -- a read -------------------------------------------------------------------

    def _close(self) -> None:
        if self.current is not None and not self.current.refused:
            self.ledger.settle(self.current.number, self.current.row)
        self.current = None

    def _begin(self, plan: Plan, chunk: Chunk, stored: dict[str, dict[str, str]]) -> None:
        self._close()
        conversation = chunk.conversation
        session_id, legacy = chunk.session_id, False
        if conversation.error is not None:
            named = not _nameless(conversation) and _valid_id(session_id, self.limits)
            self._refused_at_start(plan, chunk, session_id if named else None, conversation.error)
            return
        if _nameless(conversation):
            old = legacy_session_id(plan.fmt, plan.source, conversation.where, self.prefix(plan))
            if session_id not in stored and old in stored:
                session_id, legacy = old, True
        try:
            check_session_id(session_id, self.limits)
        except InvalidInput as error:
            failure = InvalidSource(plan.source, conversation.where, str(error))
            self._refused_at_start(plan, chunk, None, failure)
            return
        hashes = stored.get(session_id, {})
        legacy = legacy or _stored_by_legacy(plan.fmt, chunk, session_id, hashes)
        if legacy:
            self.ledger.legacy[chunk.read] = session_id
        self.ledger.open(chunk.read, session_id)
        self.ledger.warnings.extend(f"{conversation.source}: {note}" for note in conversation.notes)
        if conversation.origin is not None:
            parent = self.prefix(plan) + conversation.origin.parent_session_id
            self.ledger.origins[chunk.read] = replace(conversation.origin, parent_session_id=parent)
        self.current = _Read(
            number=chunk.read,
            session_id=session_id,
            where=conversation.where,
            plan=plan,
            stored=hashes,
            legacy=legacy,
            row=Row(held=len(hashes)),
            calls_read=not hashes,
        )
        if not conversation.stored_ids:
            other = self.ledger.claim(session_id, plan.fmt, plan.source)
            if other is not None:
                reason = (
                    f"session {session_id!r} is also given by {other[1]} ({other[0]}), another "
                    "system: two systems' sessions are never merged; import one of them under "
                    "another --session-prefix, or both with --prefix-by-source"
                )
                self._refuse_current(InvalidSource(plan.source, conversation.where, reason))

    def _refused_at_start(
        self, plan: Plan, chunk: Chunk, session_id: str | None, error: InvalidSource
    ) -> None:
        self.ledger.open(chunk.read, session_id)
        where = chunk.conversation.where
        self.current = _Read(
            chunk.read, chunk.session_id, where, plan, {}, False, Row(), refused=True
        )
        self.refuse(chunk.read, session_id, where, error)

    def _refuse_current(self, error: InvalidSource) -> None:
        current = self.current
        if current is None:
            raise AssertionError("no read to refuse")
        current.refused = True
        self.refuse(current.number, current.session_id, current.where, error)

    async def _check(self, current: _Read, chunk: Chunk) -> None:
        conversation = chunk.conversation
        fmt = current.plan.fmt
        for located in identified(fmt, chunk, current.session_id, legacy=current.legacy):
            problem = await self._problem(current, conversation, located)
            if problem is not None:
                self._refuse_current(InvalidSource(current.plan.source, located.where, problem))
                return

    async def _problem(
        self, current: _Read, conversation: Conversation, located: Located
    ) -> str | None:
        """What is wrong with the next message of the read (None: nothing), counting it."""
        message = located.message
        current.row.size += 1
        try:
            check_message(message, self.limits)
        except InvalidInput as error:
            return str(error)
        made = made_by_importer(conversation, message)
        digest: str | None = None
        stored = current.stored.get(message.message_id)
        if stored is not None:
            digest = content_hash(message)
            if not is_replay(stored, digest):
                return (
                    "changed since it was imported: the session's stored message here has "
                    f"other content; {_KEEP_BOTH}"
                )
        elif current.stored:
            problem = await self._new_in_stored(current, conversation, message, made)
            if problem is not None:
                return problem
        if not made:
            digest = digest or content_hash(message)
            first = current.given.get(message.message_id)
            if first is None:
                current.given[message.message_id] = digest
            elif first != digest:
                return f"message id {message.message_id!r} is given to other content earlier"
            else:
                return None  # the source repeats the message: it counts once
        return await self._count(current, located, stored is not None)

    async def _new_in_stored(
        self, current: _Read, conversation: Conversation, message: Message, made: bool
    ) -> str | None:
        """What forbids storing ``message``, new, in a session the store holds."""
        if made and not current.legacy and place_of(message.message_id) in current.places():
            return (
                "changed since it was imported: the session's stored message at this place "
                f"has other content; {_KEEP_BOTH}"
            )
        if conversation.stored_ids or current.system_checked:
            return None
        current.system_checked = True
        first = await self.store.history(current.session_id, include_excluded=True, limit=1)
        system = _stored_system(first[0].source_system) if first else current.plan.fmt
        if system == current.plan.fmt:
            return None
        holder = f"imported from {system}" if system else "written through the API, not imported"
        return (
            f"session {current.session_id!r} is stored already, {holder}: another system's "
            "session is never merged into it; import this source under another "
            "--session-prefix, or with --prefix-by-source"
        )

    async def _count(self, current: _Read, located: Located, stored: bool) -> str | None:
        message = located.message
        row = current.row
        calls, results = call_links(message)
        current.calls.update(c for c in calls if c)
        for call_id in results:
            if call_id not in current.calls and not current.calls_read:
                current.calls.update(await stored_calls(self.store, current.session_id))
                current.calls_read = True
            if call_id not in current.calls:
                problem = f"a result for call {call_id!r}, which no earlier message makes"
                if self.strict:
                    return problem
                self.ledger.warnings.append(
                    f"{current.plan.source}: {located.where}: {problem} "
                    "(imported as an orphan group)"
                )
        row.messages += 1
        row.calls += len(calls)
        row.results += len(results)
        row.tokens += self.store.count_tokens(message)
        if stored:
            row.already += 1
        else:
            row.new += 1
        return None


class _Recount:
    """The sessions read more than once, read again: a read whose message has other
    content than another read's at the same id or place is refused, and the messages a
    read repeats from an earlier one are counted once. Only those sessions' ids are
    held."""

    def __init__(self, validation: Validation) -> None:
        self.v = validation
        self.ledger = validation.ledger
        self.stored: dict[str, dict[str, str]] = {}
        self.seen: dict[str, dict[str, tuple[str, str, str]]] = {}
        """By session: each id's content hash, source and place."""
        self.places: dict[str, dict[str, tuple[str, str, str]]] = {}
        """By session: each place of an id the importer made, with the id, source and
        where."""
        self.read: _Recounted | None = None

    async def run(self) -> None:
        recurring = self.ledger.recurring
        self.stored = await stored_hashes(self.v.store, sorted(recurring))
        for plan in self.v.plans:
            if plan.source in self.v.failed:
                continue
            reading = chunks(plan, self.v.prefix(plan), self.v.table)
            try:
                for chunk in reading:
                    session_id = self.ledger.session_of(chunk.read)
                    if session_id not in recurring or not self.ledger.accepted(chunk.read):
                        continue
                    if chunk.begins:
                        self._end()
                        where = chunk.conversation.where
                        self.read = _Recounted(chunk.read, session_id, where, plan)
                    if self.read is not None and not self.read.conflict:
                        self._scan(self.read, chunk)
                self._end()
            finally:
                reading.close()

    def _scan(self, read: _Recounted, chunk: Chunk) -> None:
        legacy = read.number in self.ledger.legacy
        seen = self.seen.setdefault(read.session_id, {})
        places = self.places.setdefault(read.session_id, {})
        stored = self.stored.get(read.session_id, {})
        conversation = chunk.conversation
        for located in identified(read.plan.fmt, chunk, read.session_id, legacy=legacy):
            message = located.message
            digest = content_hash(message)
            first = seen.get(message.message_id)
            place = (
                place_of(message.message_id)
                if made_by_importer(conversation, message) and not legacy
                else None
            )
            other = places.get(place) if place is not None else None
            if first is not None and first[0] != digest:
                self._conflict(read, located, first[1], first[2])
                return
            if other is not None and other[0] != message.message_id:
                self._conflict(read, located, other[1], other[2])
                return
            if first is not None or message.message_id in read.ids:
                continue
            read.ids[message.message_id] = (digest, read.plan.source, located.where)
            if place is not None:
                read.places[place] = (message.message_id, read.plan.source, located.where)
            _add(read.row, message, self.v.store.count_tokens(message), stored)

    def _conflict(self, read: _Recounted, located: Located, source: str, where: str) -> None:
        read.conflict = True
        reason = (
            f"session {read.session_id!r} has other content here than at {source}: {where}; "
            f"two sources of one session must agree where both have a message: {_KEEP_BOTH}"
        )
        failure = InvalidSource(read.plan.source, located.where, reason)
        self.v.refuse(read.number, read.session_id, read.where, failure)

    def _end(self) -> None:
        read, self.read = self.read, None
        if read is None or read.conflict:
            return
        self.seen.setdefault(read.session_id, {}).update(read.ids)
        self.places.setdefault(read.session_id, {}).update(read.places)
        before = self.ledger.row(read.number)
        read.row.size, read.row.held = before.size, before.held
        self.ledger.settle(read.number, read.row)


@dataclass(slots=True)
class _Recounted:
    number: int
    session_id: str
    where: str
    plan: Plan
    row: Row = field(default_factory=Row)
    ids: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    places: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    conflict: bool = False


def _add(row: Row, message: Message, tokens: int, stored: dict[str, str]) -> None:
    calls, results = call_links(message)
    row.messages += 1
    row.calls += len(calls)
    row.results += len(results)
    row.tokens += tokens
    if message.message_id in stored:
        row.already += 1
    else:
        row.new += 1


def _nameless(conversation: Conversation) -> bool:
    """Whether the conversation's session has no id of its own (the importer names it)."""
    return conversation.source_session is None and not conversation.stored_ids


def _stored_by_legacy(fmt: str, chunk: Chunk, session_id: str, hashes: dict[str, str]) -> bool:
    """Whether the store holds the read's session under the earlier scheme's message
    ids: its first message the importer names is stored under that id, not this one."""
    if not hashes or chunk.conversation.stored_ids:
        return False
    key = chunk.conversation.source_session or session_id
    for offset, located in enumerate(chunk.conversation.messages):
        if made_by_importer(chunk.conversation, located.message):
            new = message_id_for(fmt, key, chunk.start + offset, located.message)
            old = legacy_message_id(fmt, key, located.where)
            return new not in hashes and old in hashes
    return False


def _released(error: InvalidSource) -> InvalidSource:
    """``error`` without the reader's frames (its traceback and the error it replaced),
    so that the reader's generators close now, in this thread: a database reader's
    connection may only be closed by the thread that opened it."""
    error.__context__ = None
    return error.with_traceback(None)


def _valid_id(session_id: str, limits: Limits) -> bool:
    try:
        check_session_id(session_id, limits)
    except InvalidInput:
        return False
    return True
