"""The import: every source validated completely, then written, both passes streaming.

Pass one reads every source, converts and checks every message, gives it its stable
ids, compares it with what the store holds already, and counts. If anything is wrong
(and ``skip_invalid`` is off), it raises before anything is written. Pass two reads the
sources again and appends what is new, in batches, with its provenance. Running the
same import again adds nothing; an interrupted write pass is completed by running it
again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from store.contract import HistoryBackend
from store.errors import InvalidInput, InvalidSource
from store.formats import ORIGINAL_ID_KEY
from store.importing.detect import detect_path
from store.importing.readers import READERS
from store.importing.report import ImportReport, SkippedSource
from store.importing.source import Conversation, Located, source_path
from store.importing.stored import Batch, append_sessions, stored_calls, stored_hashes
from store.models import Provenance
from store.rules.checks import check_message, check_session_id
from store.rules.identity import content_hash
from store.rules.limits import DEFAULT_LIMITS, Limits
from strategies.groups import call_links
from strategies.messages import Message

__all__ = ["BATCH", "WINDOW", "Progress", "import_sources", "message_id_for", "session_id_for"]

BATCH = 2000
"""Messages appended in one write (of one session or many)."""

WINDOW = 2000
"""Messages checked together by pass one, the stored messages of their sessions read
at once."""

Progress = Callable[[str, int], None]
"""Called with the pass (``validate``, ``write``) and the messages done so far."""

_SOURCE_ID_LENGTH = 255


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()


def session_id_for(fmt: str, source: str, conversation: Conversation, prefix: str) -> str:
    """The session's id: the prefix and the source's own id, or, without one, the prefix
    and a hash of (format, the source's absolute path, where the conversation starts)."""
    if conversation.source_session is not None:
        return prefix + conversation.source_session
    path = str(Path(source).resolve())
    return f"{prefix}imp-{_digest(fmt, path, conversation.where)[:24]}"


def message_id_for(fmt: str, session_key: str, where: str) -> str:
    """A message id for a message the source gave none: a hash of (format, source
    session, line or row), never of the content."""
    return f"imp-{_digest(fmt, session_key, where)[:32]}"


@dataclass(slots=True)
class _Plan:
    fmt: str
    source: str
    path: Path


@dataclass(slots=True)
class _Session:
    """What pass one knows of the session being read."""

    session_id: str
    stored: dict[str, str]
    calls: set[str]
    calls_read: bool
    """Whether ``calls`` holds the stored messages' calls too (read at the first result
    that answers no call of the source, when the store holds the session)."""
    given: dict[str, str] = field(default_factory=dict)
    """The content hash of each id the source gave (rather than the importer) so far in
    this run of the session: one id given to two contents is refused in pass one."""


@dataclass(slots=True)
class _Tally:
    sessions: list[str] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    """The ids of :attr:`sessions`."""
    messages: int = 0
    tool_calls: int = 0
    tool_results: int = 0
    tokens: int = 0
    new: int = 0
    already: int = 0
    skipped: dict[str, SkippedSource] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Part:
    """Consecutive messages of one session read by pass two, with their source ids."""

    session_id: str
    fmt: str
    messages: list[Message]
    source_ids: dict[str, str]


@dataclass(slots=True)
class _Pending:
    """Messages read by pass two and not written yet, by session, in source order."""

    parts: list[_Part] = field(default_factory=list)
    size: int = 0
    finished: list[str] = field(default_factory=list)
    """Sessions read to their end, compacted once written (with ``compact``)."""

    def add(
        self, fmt: str, session_id: str, conversation: Conversation, part: list[Located]
    ) -> None:
        last = self.parts[-1] if self.parts else None
        if last is None or last.session_id != session_id or last.fmt != fmt:
            last = _Part(session_id, fmt, [], {})
            self.parts.append(last)
        for located in part:
            last.messages.append(located.message)
            last.source_ids[located.message.message_id] = _source_id(conversation, located)
        self.size += len(part)

    def batches(self) -> list[Batch]:
        return [
            (p.session_id, p.messages, Provenance(system=p.fmt, source_ids=p.source_ids))
            for p in self.parts
        ]


class _Importer:
    def __init__(
        self,
        store: HistoryBackend,
        plans: list[_Plan],
        *,
        prefix: str,
        strict: bool,
        skip_invalid: bool,
        table: str | None,
        progress: Progress | None,
    ) -> None:
        self.store = store
        self.plans = plans
        self.prefix = prefix
        self.strict = strict
        self.skip_invalid = skip_invalid
        self.table = table
        self.progress = progress
        self.limits: Limits = getattr(store, "limits", DEFAULT_LIMITS)
        """What the store accepts: pass one refuses what pass two's appends would."""
        self.tally = _Tally()
        self.recurring: set[str] = set()
        """Sessions read in more than one run (a session continued in another source or
        further on): checked again at the end of pass one for ids given twice."""
        self.bad_sources: set[str] = set()
        self.current: _Session | None = None
        """The session pass one is reading."""
        self.done = 0
        """Messages read by the pass, for the progress."""

    # -- reading, shared by both passes -------------------------------------------

    def conversations(self, plan: _Plan) -> Generator[tuple[str, Conversation]]:
        """The plan's conversations with their session ids, messages given stable ids."""
        for conversation in READERS[plan.fmt](plan.path, plan.source, self.table):
            session_id = session_id_for(plan.fmt, plan.source, conversation, self.prefix)
            if conversation.error is None and not conversation.stored_ids:
                key = conversation.source_session or session_id
                conversation.messages = [
                    _stable(plan.fmt, key, located) for located in conversation.messages
                ]
            yield session_id, conversation

    # -- pass one -----------------------------------------------------------------

    def _skip(self, source: str, session_id: str | None, error: InvalidSource) -> None:
        if not self.skip_invalid:
            raise error
        key = session_id or source
        self.tally.skipped.setdefault(
            key, SkippedSource(source=source, session_id=session_id, reason=str(error))
        )

    async def validate(self) -> None:
        self.done = 0
        for plan in self.plans:
            self.current = None
            try:
                await self._validate(plan)
            except InvalidSource as error:
                self._skip(plan.source, None, error)
                self.bad_sources.add(plan.source)
        if self.recurring:
            await self._check_recurring()

    async def _validate(self, plan: _Plan) -> None:
        """Check the plan's conversations a window at a time: the stored messages of
        every session of a window are read at once."""
        window: list[tuple[str, Conversation]] = []
        size = 0
        reading = self.conversations(plan)
        try:
            while True:
                try:
                    item = next(reading, None)
                except InvalidSource as error:
                    await self._check_window(plan, window)  # what came before fails first
                    raise _released(error) from None
                if item is None:
                    break
                window.append(item)
                size += len(item[1].messages)
                if size >= WINDOW:
                    await self._check_window(plan, window)
                    window, size = [], 0
            await self._check_window(plan, window)
        finally:
            reading.close()

    async def _check_window(self, plan: _Plan, window: list[tuple[str, Conversation]]) -> None:
        begun: list[str] = []  # the sessions the window starts, in order
        previous = self.current.session_id if self.current is not None else None
        for session_id, conversation in window:
            if conversation.error is None and session_id != previous:
                begun.append(session_id)
                previous = session_id
        wanted = [s for s in begun if _valid_id(s, self.limits)]
        stored = await stored_hashes(self.store, wanted) if wanted else {}
        for session_id, conversation in window:
            if conversation.error is not None:
                self._skip(plan.source, session_id, conversation.error)
                continue
            if self.current is None or self.current.session_id != session_id:
                self.current = self._begin(plan, conversation, session_id, stored.get(session_id))
            await self._check(plan, self.current, conversation)
            self.done += len(conversation.messages)
            if self.progress is not None:
                self.progress("validate", self.done)

    def _begin(
        self,
        plan: _Plan,
        conversation: Conversation,
        session_id: str,
        stored: dict[str, str] | None,
    ) -> _Session:
        try:
            check_session_id(session_id, self.limits)
        except InvalidInput as error:
            raise InvalidSource(plan.source, conversation.where, str(error)) from None
        if session_id in self.tally.seen:
            self.recurring.add(session_id)
        else:
            self.tally.seen.add(session_id)
            self.tally.sessions.append(session_id)
        return _Session(session_id, stored or {}, set(), calls_read=not stored)

    async def _check(self, plan: _Plan, session: _Session, conversation: Conversation) -> None:
        tally = self.tally
        for located in conversation.messages:
            message = located.message
            try:
                check_message(message, self.limits)
            except InvalidInput as error:
                self._skip(plan.source, session.session_id, _at(plan, located, str(error)))
                return
            stored = session.stored.get(message.message_id)
            digest = None if stored is None else content_hash(message)
            if stored is not None and stored != digest:
                reason = "changed since it was imported: the stored message has other content"
                self._skip(plan.source, session.session_id, _at(plan, located, reason))
                return
            if _id_given(conversation, message):  # the importer's own ids never repeat
                digest = digest or content_hash(message)
                if session.given.setdefault(message.message_id, digest) != digest:
                    reason = f"message id {message.message_id!r} is given to other content earlier"
                    self._skip(plan.source, session.session_id, _at(plan, located, reason))
                    return
            calls, results = call_links(message)
            session.calls.update(c for c in calls if c)
            for call_id in results:
                if call_id not in session.calls and not session.calls_read:
                    session.calls.update(await stored_calls(self.store, session.session_id))
                    session.calls_read = True
                if call_id not in session.calls:
                    self._orphan(plan, session, located, call_id)
            tally.messages += 1
            tally.tool_calls += len(calls)
            tally.tool_results += len(results)
            tally.tokens += self.store.count_tokens(message)
            if stored is None:
                tally.new += 1
            else:
                tally.already += 1

    async def _check_recurring(self) -> None:
        """Read the sources again for the sessions read in more than one run, and refuse
        a message id given to two contents: two files of one session whose messages have
        no ids, say, at the same lines. Only those sessions' ids are held."""
        seen: dict[str, dict[str, tuple[str, str, str]]] = {}
        for plan in self.plans:
            if plan.source in self.bad_sources:
                continue
            reading = self.conversations(plan)
            try:
                for session_id, conversation in reading:
                    if session_id not in self.recurring or conversation.error is not None:
                        continue
                    if session_id in self.tally.skipped:
                        continue
                    ids = seen.setdefault(session_id, {})
                    for located in conversation.messages:
                        message = located.message
                        digest = content_hash(message)
                        first = ids.setdefault(
                            message.message_id, (digest, plan.source, located.where)
                        )
                        if first[0] != digest:
                            reason = (
                                f"message id {message.message_id!r} of session {session_id!r} "
                                f"is given to other content at {first[1]}: {first[2]}"
                            )
                            self._skip(plan.source, session_id, _at(plan, located, reason))
                            break
            finally:
                reading.close()

    def _orphan(self, plan: _Plan, session: _Session, located: Located, call_id: str) -> None:
        problem = f"a result for call {call_id!r}, which no earlier message makes"
        if self.strict:
            self._skip(plan.source, session.session_id, _at(plan, located, problem))
            return
        self.tally.warnings.append(
            f"{plan.source}: {located.where}: {problem} (imported as an orphan group)"
        )

    # -- pass two -----------------------------------------------------------------

    async def write(self, compact: str | None) -> None:
        """Append what pass one accepted, many sessions a transaction (the store dedupes
        what an earlier, interrupted run wrote already)."""
        self.done = 0
        skipped = set(self.tally.skipped)
        pending = _Pending()
        for plan in self.plans:
            if plan.source in self.bad_sources:
                continue
            previous: str | None = None
            for session_id, conversation in self.conversations(plan):
                if session_id in skipped or conversation.error is not None:
                    continue
                if previous is not None and previous != session_id:
                    pending.finished.append(previous)
                previous = session_id
                if conversation.compacted:  # another system's compaction: imported whole
                    await self._flush(pending, compact)
                    await self.store.import_messages(
                        session_id, [located.message for located in conversation.messages]
                    )
                else:
                    await self._add(plan, pending, session_id, conversation, compact)
                self.done += len(conversation.messages)
                if self.progress is not None:
                    self.progress("write", self.done)
            if previous is not None:
                pending.finished.append(previous)
        await self._flush(pending, compact)

    async def _add(
        self,
        plan: _Plan,
        pending: _Pending,
        session_id: str,
        conversation: Conversation,
        compact: str | None,
    ) -> None:
        messages = conversation.messages
        start = 0
        while start < len(messages):
            stop = start + max(1, BATCH - pending.size)
            pending.add(plan.fmt, session_id, conversation, messages[start:stop])
            start = stop
            if pending.size >= BATCH:
                await self._flush(pending, compact)

    async def _flush(self, pending: _Pending, compact: str | None) -> None:
        """Write the pending messages in one go, then compact the sessions finished."""
        if pending.parts:
            await append_sessions(self.store, pending.batches())
        pending.parts, pending.size = [], 0
        if compact is not None:
            for session_id in pending.finished:
                await self.store.compact(session_id, compact, phase="import")
        pending.finished = []

    def report(self, formats: dict[str, str], dry_run: bool) -> ImportReport:
        tally = self.tally
        skipped_ids = {s.session_id for s in tally.skipped.values()}
        return ImportReport(
            formats=formats,
            sessions=len([s for s in tally.sessions if s not in skipped_ids]),
            messages=tally.messages,
            tool_calls=tally.tool_calls,
            tool_results=tally.tool_results,
            tokens=tally.tokens,
            new=tally.new,
            already_stored=tally.already,
            skipped=list(tally.skipped.values()),
            warnings=tally.warnings,
            session_ids=[s for s in tally.sessions if s not in skipped_ids],
            dry_run=dry_run,
        )


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


def _id_given(conversation: Conversation, message: Message) -> bool:
    """Whether the message keeps the id its source gave (else :func:`_stable` made it)."""
    return conversation.stored_ids or ORIGINAL_ID_KEY not in message.metadata


def _at(plan: _Plan, located: Located, reason: str) -> InvalidSource:
    return InvalidSource(plan.source, located.where, reason)


def _source_id(conversation: Conversation, located: Located) -> str:
    original = located.message.metadata.get(ORIGINAL_ID_KEY, located.message.message_id)
    own = original if isinstance(original, str) and original else None
    if own is not None and not own.startswith("imp-"):
        return own[:_SOURCE_ID_LENGTH]
    session = conversation.source_session or ""
    return f"{session} {located.where}".strip()[:_SOURCE_ID_LENGTH]


def _stable(fmt: str, session_key: str, located: Located) -> Located:
    message = located.message
    if ORIGINAL_ID_KEY not in message.metadata:
        return located
    message_id = message_id_for(fmt, session_key, located.where)
    return Located(message.model_copy(update={"message_id": message_id}), located.where)


def _plan(given: str | Path, fmt: str | None, table: str | None) -> _Plan:
    source, path = str(given), source_path(given)
    if fmt is None:
        return _Plan(detect_path(path, source, table), source, path)
    if fmt not in READERS:
        known = ", ".join(sorted(READERS))
        raise InvalidInput(f"unknown format {fmt!r} (known: {known})")
    if not path.exists():
        raise InvalidSource(source, None, "no such file or folder")
    try:
        found = detect_path(path, source, table)
    except InvalidSource:
        found = fmt  # content the rules do not place: the reader decides
    if found != fmt:
        raise InvalidSource(source, None, f"this is {found}, not {fmt} (the format given)")
    return _Plan(fmt, source, path)


async def import_sources(
    store: HistoryBackend,
    sources: Sequence[str | Path],
    *,
    format: str | None = None,
    session_prefix: str = "",
    compact: str | None = None,
    dry_run: bool = False,
    skip_invalid: bool = False,
    strict: bool = False,
    table: str | None = None,
    progress: Progress | None = None,
) -> ImportReport:
    """Import chat logs of other systems (files, folders, SQLite databases) into ``store``.

    ``format`` is a format id (:data:`~store.importing.FORMATS`); None detects each
    source's (:func:`~store.importing.detect_format`). Session ids are
    ``session_prefix`` plus the source's own id, or a hash of (format, path, line or row)
    when it has none; a message without an id of its own gets a hash of (format, source
    session, line or row). So importing the same sources again stores nothing and counts
    every message as already stored; a session whose stored messages have other content
    now is skipped and reported.

    Every source is validated completely before anything is written: any problem raises
    :class:`~store.errors.InvalidSource` (source, line or row, reason) and nothing is
    written, unless ``skip_invalid``, which imports the valid sessions and lists the
    others in :attr:`ImportReport.skipped`. A result that answers no call is imported as
    an orphan group with a warning, or refused with ``strict``. ``compact`` (a strategy
    spec) compacts each imported session afterwards, as an ``import`` event. ``table``
    names the messages table of a database source. ``dry_run`` writes nothing.
    """
    plans: list[_Plan] = []
    refused: list[SkippedSource] = []
    for given in sources:
        try:
            plans.append(_plan(given, format, table))
        except InvalidSource as error:
            if not skip_invalid:
                raise
            refused.append(SkippedSource(source=error.source, session_id=None, reason=str(error)))
    importer = _Importer(
        store,
        plans,
        prefix=session_prefix,
        strict=strict,
        skip_invalid=skip_invalid,
        table=table,
        progress=progress,
    )
    importer.tally.skipped.update((s.source, s) for s in refused)
    await importer.validate()
    if not dry_run:
        await importer.write(compact)
    return importer.report({plan.source: plan.fmt for plan in plans}, dry_run)
