"""What pass one of an import learns, what pass two follows, and the report made of it.

Every read (:mod:`store.importing.reads`) has a row of counts: the messages it holds,
those it counts (a message a source repeats counts once), their calls, results and
tokens, how many of them are new and how many stored already, and how many messages its
session held before. A refused read (a message that does not check, a session another
system's source claims, a message stored with other content) is listed with its reason
and counts nothing; a source that cannot be read to its end is listed once and none of
its reads count. So the report counts what pass two stores, and nothing else.

Rows are kept in one array of integers (a few dozen bytes a read), so that the memory
of an import grows with its sessions by little more than their ids.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field

from store.errors import InvalidSource
from store.importing.reads import Plan
from store.importing.report import ImportReport, SkippedSource
from store.importing.source import ForkOrigin
from store.rules.import_mark import ImportMark

__all__ = ["Ledger", "Refork", "Row"]


@dataclass(slots=True)
class Row:
    """The counts of one read (see the module docstring)."""

    size: int = 0
    """Messages the read holds (what pass two sends)."""
    messages: int = 0
    calls: int = 0
    results: int = 0
    tokens: int = 0
    new: int = 0
    already: int = 0
    held: int = 0
    """Messages its session held before the import."""

    def values(self) -> tuple[int, ...]:
        """The counts in the ledger's order."""
        return (
            self.size,
            self.messages,
            self.calls,
            self.results,
            self.tokens,
            self.new,
            self.already,
            self.held,
        )


@dataclass(frozen=True, slots=True)
class Refork:
    """A read that pass two makes a fork of its parent again (see
    :mod:`store.importing.lineage`)."""

    parent_session_id: str
    """The parent, as imported."""
    fork_message_id: str
    cut: int
    """The position of the fork message in the read: the read's own messages follow."""
    level: int = 0
    """0 for a fork of a session written as a root, else one more than its parent's."""


_WIDTH = 9  # the counts of a Row, then the session's index (-1: none)
_SIZE, _MESSAGES, _CALLS, _RESULTS, _TOKENS, _NEW, _ALREADY, _HELD, _SESSION = range(_WIDTH)


@dataclass(slots=True)
class Ledger:
    """The reads of an import and what was decided about each."""

    batch: int
    """Messages pass two writes in one transaction: a session larger than that, or
    written from several reads, is written in parts, and marked."""
    rows: array[int] = field(default_factory=lambda: array("q"))
    session_ids: list[str] = field(default_factory=list)
    """Every session read, in the order read (by index)."""
    index: dict[str, int] = field(default_factory=dict)
    claims: list[tuple[str, str] | None] = field(default_factory=list)
    """By session: the format and source of the first read that gave it (reads of
    chatledger's own export claim nothing)."""
    refused: set[int] = field(default_factory=set)
    void: set[int] = field(default_factory=set)
    """Reads of sources that could not be read to their end."""
    skipped: list[tuple[int, SkippedSource]] = field(default_factory=list)
    """What was left out, each with the read it starts at (to list them in the order
    the sources were given)."""
    legacy: dict[int, str] = field(default_factory=dict)
    """Reads whose session is stored under the earlier id scheme: its session id."""
    recurring: set[str] = field(default_factory=set)
    """Sessions with more than one read."""
    split: dict[str, ImportMark] = field(default_factory=dict)
    """Sessions written in parts, with their mark."""
    parts: dict[str, int] = field(default_factory=dict)
    """Reads left to write of each split session."""
    marked: list[str] = field(default_factory=list)
    """Sessions an earlier, interrupted run may have left marked, with nothing left to
    write: their mark is taken off when they hold what it expects."""
    warnings: list[str] = field(default_factory=list)
    origins: dict[int, ForkOrigin] = field(default_factory=dict)
    """Reads that say they are forks, with their origin (the parent as imported)."""
    forks: dict[int, Refork] = field(default_factory=dict)
    """Reads pass two makes forks of their parents again (written after the others)."""

    @property
    def reads(self) -> int:
        """The reads so far."""
        return len(self.rows) // _WIDTH

    def open(self, read: int, session_id: str | None) -> bool:
        """Start the row of ``read``, of session ``session_id`` (None for a read that
        gives none); returns whether the session was read before."""
        if read != self.reads:
            raise AssertionError(f"read {read} opened out of order")
        index = -1
        again = False
        if session_id is not None:
            again = session_id in self.index
            index = self.index.setdefault(session_id, len(self.session_ids))
            if not again:
                self.session_ids.append(session_id)
                self.claims.append(None)
            else:
                self.recurring.add(session_id)
        self.rows.extend((0,) * (_WIDTH - 1) + (index,))
        return again

    def claim(self, session_id: str, fmt: str, source: str) -> tuple[str, str] | None:
        """Record that ``source`` (of format ``fmt``) gives the session; returns the
        format and source of an earlier read of another format that gave it."""
        index = self.index[session_id]
        first = self.claims[index]
        if first is None:
            self.claims[index] = (fmt, source)
            return None
        return first if first[0] != fmt else None

    def settle(self, read: int, row: Row) -> None:
        """Write the counts of ``read`` (nothing for a refused read)."""
        if read in self.refused or read in self.void:
            return
        start = read * _WIDTH
        self.rows[start : start + _WIDTH - 1] = array("q", row.values())

    def row(self, read: int) -> Row:
        """The counts of ``read``."""
        start = read * _WIDTH
        return Row(*self.rows[start : start + _WIDTH - 1])

    def session_of(self, read: int) -> str | None:
        """The session ``read`` gives."""
        index = self.rows[read * _WIDTH + _SESSION]
        return None if index < 0 else self.session_ids[index]

    def refuse(self, read: int, session_id: str | None, where: str, error: InvalidSource) -> None:
        """Leave ``read`` (which starts at ``where``) out, listed with why; its counts are
        dropped."""
        if read in self.refused:
            return
        self.refused.add(read)
        self._zero(read)
        skipped = SkippedSource(
            source=error.source, session_id=session_id, reason=str(error), where=where
        )
        self.skipped.append((read, skipped))

    def fail(self, plan: Plan, error: InvalidSource) -> None:
        """Leave out every read of ``plan`` (a source that cannot be read to its end),
        listed once."""
        for read in range(plan.first_read, self.reads):
            self.void.add(read)
            self._zero(read)
        skipped = SkippedSource(source=plan.source, session_id=None, reason=str(error))
        self.skipped.append((plan.first_read, skipped))

    def refuse_source(self, error: InvalidSource) -> None:
        """List a source left out before any of it was read."""
        skipped = SkippedSource(source=error.source, session_id=None, reason=str(error))
        self.skipped.append((-1, skipped))

    def accepted(self, read: int) -> bool:
        """Whether ``read`` is imported."""
        return read not in self.refused and read not in self.void

    def source_of(self, plans: Sequence[Plan], read: int) -> str:
        """The source ``read`` is of."""
        found = plans[0].source if plans else ""
        for plan in plans:
            if plan.first_read > read:
                break
            found = plan.source
        return found

    def _zero(self, read: int) -> None:
        start = read * _WIDTH
        self.rows[start : start + _WIDTH - 1] = array("q", (0,) * (_WIDTH - 1))

    # -- after pass one -----------------------------------------------------------

    def plan_parts(self, plans: Sequence[Plan]) -> None:
        """Decide which sessions pass two writes in parts (and marks), and which may
        hold a mark an earlier run left."""
        sources = _sources_by_read(plans, self.reads)
        grouped: dict[str, list[int]] = {}
        for read in range(self.reads):
            session_id = self.session_of(read)
            if session_id is None or not self.accepted(read) or read in self.forks:
                continue
            if session_id in self.recurring:
                grouped.setdefault(session_id, []).append(read)
            else:
                self._one_read(session_id, read, sources)
        for session_id, reads in grouped.items():
            self._many_reads(session_id, reads, sources)

    def _one_read(self, session_id: str, read: int, sources: list[tuple[str, str]]) -> None:
        row = self.row(read)
        if row.size <= self.batch:
            return
        if row.new:
            fmt, source = sources[read]
            self.split[session_id] = ImportMark(
                system=fmt, sources=(source,), expected=row.held + row.new, held=row.held
            )
            self.parts[session_id] = 1
        elif row.held:
            self.marked.append(session_id)

    def _many_reads(
        self, session_id: str, reads: list[int], sources: list[tuple[str, str]]
    ) -> None:
        rows = [self.row(read) for read in reads]
        writes = [(read, row) for read, row in zip(reads, rows, strict=True) if row.new]
        held = rows[0].held
        if len(writes) < 2 and all(row.size <= self.batch for _, row in writes):
            if held:  # one write, or none: whole; a mark an earlier run left may go
                self.marked.append(session_id)
            return
        self.split[session_id] = ImportMark(
            system=sources[writes[0][0]][0],
            sources=tuple(dict.fromkeys(sources[read][1] for read, _ in writes)),
            expected=held + sum(row.new for row in rows),
            held=held,
        )
        self.parts[session_id] = len(writes)

    # -- the report ---------------------------------------------------------------

    def imported(self) -> list[str]:
        """The sessions with a read imported, in the order read."""
        found: set[int] = set()
        for read in range(self.reads):
            index = self.rows[read * _WIDTH + _SESSION]
            if index >= 0 and self.accepted(read):
                found.add(index)
        return [self.session_ids[index] for index in sorted(found)]

    def report(self, formats: dict[str, str], dry_run: bool) -> ImportReport:
        """The counts of the accepted reads, and what was left out."""
        totals = Row()
        imported: set[int] = set()
        for read in range(self.reads):
            start = read * _WIDTH
            index = self.rows[start + _SESSION]
            if index < 0 or not self.accepted(read):
                continue
            imported.add(index)
            totals.messages += self.rows[start + _MESSAGES]
            totals.calls += self.rows[start + _CALLS]
            totals.results += self.rows[start + _RESULTS]
            totals.tokens += self.rows[start + _TOKENS]
            totals.new += self.rows[start + _NEW]
            totals.already += self.rows[start + _ALREADY]
        session_ids = [self.session_ids[index] for index in sorted(imported)]
        return ImportReport(
            formats=formats,
            sessions=len(session_ids),
            messages=totals.messages,
            tool_calls=totals.calls,
            tool_results=totals.results,
            tokens=totals.tokens,
            new=totals.new,
            already_stored=totals.already,
            skipped=[skipped for _, skipped in sorted(self.skipped, key=lambda s: s[0])],
            warnings=list(self.warnings),
            session_ids=session_ids,
            dry_run=dry_run,
        )


def _sources_by_read(plans: Sequence[Plan], reads: int) -> list[tuple[str, str]]:
    """The format and source of every read (a list a read: called once per import)."""
    found: list[tuple[str, str]] = []
    for number, plan in enumerate(plans):
        end = plans[number + 1].first_read if number + 1 < len(plans) else reads
        found.extend([(plan.fmt, plan.source)] * (end - plan.first_read))
    return found
