"""The import: every source validated completely, then written, both passes streaming.

Pass one (:mod:`store.importing.validate`) reads every source, converts and checks every
message, names what the source left without an id (:mod:`store.importing.ids`),
compares it with what the store holds and with the import's other sources, and counts
(:mod:`store.importing.ledger`). If anything is wrong (and ``skip_invalid`` is off), it
raises before anything is written. Pass two (:mod:`store.importing.write`) reads the
sources again and appends what is new, every session whole in one transaction, or
marked while it is written in parts. Running the same import again adds nothing; an
interrupted write pass is completed by running it again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from store.contract import HistoryBackend
from store.errors import InvalidInput, InvalidSource
from store.importing import write
from store.importing.detect import detect_path
from store.importing.ids import message_id_for, session_id_for
from store.importing.ledger import Ledger
from store.importing.readers import DATABASE_FORMATS, READERS
from store.importing.reads import Plan
from store.importing.report import ImportReport
from store.importing.source import (
    DEFAULT_READ_TIMEOUT,
    DatabaseUrl,
    Reading,
    read_with,
    shown_source,
    source_location,
)
from store.importing.validate import Validation
from store.rules.identity import hashing_of
from store.rules.limits import DEFAULT_LIMITS

__all__ = ["Progress", "import_sources", "message_id_for", "session_id_for"]

Progress = Callable[[str, int], None]
"""Called with what is counted and how many so far: ``validate`` and ``write``, the
messages each pass has read; ``sessions`` and ``stored``, as pass two commits, the
sessions written whole and their new messages."""


def _plan(given: str | Path, fmt: str | None, table: str | None) -> Plan:
    path = source_location(given)
    source = shown_source(given, path)
    if fmt is None:
        return Plan(detect_path(path, source, table), source, path)
    if fmt not in READERS:
        known = ", ".join(sorted(READERS))
        raise InvalidInput(f"unknown format {fmt!r} (known: {known})")
    if isinstance(path, DatabaseUrl):
        if fmt not in DATABASE_FORMATS:
            raise InvalidSource(source, None, f"a database URL, but {fmt} reads files")
    elif not path.exists():
        raise InvalidSource(source, None, "no such file or folder")
    try:
        found = detect_path(path, source, table)
    except InvalidSource:
        found = fmt  # content the rules do not place: the reader decides
    if found != fmt:
        raise InvalidSource(source, None, f"this is {found}, not {fmt} (the format given)")
    return Plan(fmt, source, path)


def _prefixer(session_prefix: str, by_source: bool) -> Callable[[Plan], str]:
    def prefix(plan: Plan) -> str:
        return f"{session_prefix}{plan.fmt}/" if by_source else session_prefix

    return prefix


async def import_sources(
    store: HistoryBackend,
    sources: Sequence[str | Path],
    *,
    format: str | None = None,
    session_prefix: str = "",
    prefix_by_source: bool = False,
    compact: str | None = None,
    dry_run: bool = False,
    skip_invalid: bool = False,
    strict: bool = False,
    table: str | None = None,
    encoding: str | None = None,
    allow_custom_roles: bool = False,
    channel: str | None = None,
    progress: Progress | None = None,
) -> ImportReport:
    """Import chat logs of other systems (files, folders, SQLite databases, PostgreSQL
    databases by their URLs) into ``store``.

    ``format`` is a format id (:data:`~store.importing.FORMATS`); None detects each
    source's (:func:`~store.importing.detect_format`). A session's identity is its
    source system and the source's own session id: its id is ``session_prefix`` plus
    that id (with ``prefix_by_source``, plus the format id and ``/`` first), or, where
    the source has none, a hash of (format, where it starts, its first message); a
    message without an id of its own gets a hash of its place in its source session
    and of its content (:mod:`store.importing.ids`). So importing the same sources
    again, or a copy of them, stores nothing and counts every message as already
    stored.

    Every source is validated completely before anything is written: any problem raises
    :class:`~store.errors.InvalidSource` (source, line or row, reason, and what to do)
    and nothing is written, unless ``skip_invalid``, which imports the rest and lists
    each session or source left out in :attr:`ImportReport.skipped`. Refused so: a
    session that a source of another system gives in the same import, or that the store
    holds from another system; a message at a place of a session that the store or
    another source holds with other content. A result that answers no call is imported
    as an orphan group with a warning, or refused with ``strict``. The report counts
    only what is stored (or, with ``dry_run``, would be).

    Text sources are read in ``encoding`` (None: UTF-8, or UTF-16 with a BOM; a file
    that does not decode is refused with the encoding it looks like); roles outside the
    standard ones are kept with ``allow_custom_roles``. Refusals name these keywords as
    the command line spells them (``--encoding``, ``--allow-custom-roles``,
    ``--session-prefix``, ``--prefix-by-source``). ``compact`` (a strategy spec)
    compacts each imported session afterwards, as an ``import`` event. ``table`` names
    the messages table of a database source; ``channel`` the channel of a LangGraph
    checkpoint database whose messages are read (``messages`` unless given).
    ``dry_run`` writes nothing.

    A source is read within bounds (``docs/limits.md``): a database's views, virtual
    tables and generated columns are refused, and a query that works for longer than
    the store's ``timeout`` (or its budget of steps) without giving a row is stopped;
    a line or row nested deeper than the store's ``max_json_depth`` allows (with
    :data:`~store.importing.source.ENVELOPE_DEPTH` levels around it) is refused naming
    it.
    """
    options = Reading(
        encoding=encoding,
        allow_custom_roles=allow_custom_roles,
        channel=channel,
        timeout=getattr(store, "timeout", DEFAULT_READ_TIMEOUT),
        limits=getattr(store, "limits", DEFAULT_LIMITS),
    )
    with read_with(options), hashing_of(store):  # ids made of texts keyed as the store keys
        ledger = Ledger(batch=write.BATCH)
        plans: list[Plan] = []
        for given in sources:
            try:
                plans.append(_plan(given, format, table))
            except InvalidSource as error:
                if not skip_invalid:
                    raise
                ledger.refuse_source(error)
        prefix = _prefixer(session_prefix, prefix_by_source)
        validation = Validation(
            store,
            plans,
            ledger,
            prefix=prefix,
            strict=strict,
            skip_invalid=skip_invalid,
            table=table,
            progress=progress,
        )
        await validation.run()
        writing: write.Writing | None = None
        if not dry_run:
            writing = write.Writing(
                store,
                plans,
                ledger,
                prefix=prefix,
                failed=validation.failed,
                table=table,
                progress=progress,
            )
            await writing.run(compact)
    report = ledger.report({plan.source: plan.fmt for plan in plans}, dry_run)
    if writing is None:
        return report
    refused = [
        f"{source}: {count} model call usage{'s' if count > 1 else ''} not recorded "
        "(a count that is not a non-negative integer)"
        for source, count in writing.usage_refused.items()
    ]
    return report.model_copy(
        update={"usage_calls": writing.usage_calls, "warnings": [*report.warnings, *refused]}
    )
