"""Checking a database and repairing what can be repaired: ``chatledger doctor``.

Each session is read whole, row by row, without trusting any row to parse, and checked
for:

========================  =========================================================  ========
check                     what it finds                                              ``--fix``
========================  =========================================================  ========
``unparsable_row``        a message row no read can map, or holding what no write    quarantine
                          accepts (an older version let in a lone surrogate, a NaN,
                          a bad timestamp, contents of an unknown shape)
``orphan_result``         a tool result whose call was never stored                  no
``stale_call``            a call left unanswered before a later user message         no
``duplicate_call_id``     a call id declared by more than one call of the session    no
``audit_mismatch``        a group's messages whose exclusion flags disagree with     flags
                          the group's (fixed); a group included although the last
                          event that touched it excluded or summarized it; an event
                          link or exclusion naming a group or an event that does not
                          exist (reported)
``totals_mismatch``       group or session totals (messages, groups, tokens, the     yes
                          next ``seq``, the event count) that disagree with the rows
``half_imported``         an import that wrote the session in parts and was          see
                          interrupted: its mark (:mod:`store.rules.import_mark`)     below
                          is still in the session's metadata
``redaction_residue``     what a redaction left of a redacted message in the rows:   erased
                          the content hash of what it held (kept by releases
                          before this check), a quarantine copy in a ``doctor``
                          event
``erasure_pending``       a redaction whose text may still be in the write-ahead     checkpoint
                          log (SQLite: a checkpoint could not truncate it since,
                          another connection was reading, or the process stopped)
========================  =========================================================  ========

A half-imported session is completed by running the same import again. ``--fix`` takes
off the mark of an import that wrote everything, and removes what an interrupted import
stored when the import created the session (nothing else in it, no compaction event):
its messages, groups and open calls are deleted and the session row is as new, the mark
and the counts recorded in the event. An import into a session that held messages
before is not undone: its finding says to run the import again.

A fix runs in one write transaction per session, on a fresh scan made under the
session's lock, and each kind of fix is recorded as one audit event (phase ``manual``,
strategy ``doctor``, the check and what was done in its parameters). A quarantined row
is not deleted: its raw columns are kept verbatim (as JSON-escaped text) in the event's
parameters, and the row becomes a placeholder of the same id and ``seq`` in a group
excluded with reason ``quarantined``, so the session reads again and the projection
stays whole. Orphan results, stale calls and duplicate call ids are reported: they are
states the store itself leaves out of every projection, not damage.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, get_args

from sqlalchemy import Text, delete, null, select, type_coerce, update
from sqlalchemy import cast as sql_cast
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from store.errors import CorruptRowError, InvalidInput, SessionNotFound
from store.models import Check, DoctorReport, Finding
from store.rules.changes import new_event_id
from store.rules.identity import is_tombstone
from store.rules.import_mark import ImportMark, mark_of, verdict, with_mark
from store.rules.limits import Limits, check_json, check_stored_message
from store.rules.records import now
from store.sql import dialect
from store.sql.audit import record_event
from store.sql.codec import (
    ENCODED,
    decode_session_metadata,
    encode_contents,
    encode_metadata,
)
from store.sql.mapping import COLUMN_INDEX, message_columns, stored_message
from store.sql.schema import (
    EARLY_RESULTS,
    EVENT_GROUPS,
    EVENTS,
    FIRST_SEQ,
    GROUPS,
    MESSAGES,
    OPEN_CALLS,
    SESSIONS,
)
from store.sql.sessions import lock_session, metadata_value, read_session
from store.sql.upkeep.erasure import (
    QUARANTINE_COPIES_KEY,
    forget_hashes,
    leftover_copies,
    leftover_hashes,
    pending_file_erasures,
    scrub_copies,
)
from store.sql.upkeep.recount import rebuild_totals
from strategies.groups import call_links, is_approval_key
from strategies.messages import (
    Message,
    TextContent,
)

__all__ = [
    "CHECKS",
    "QUARANTINED_REASON",
    "QUARANTINE_KEY",
    "Check",
    "DoctorReport",
    "Finding",
    "diagnose",
    "repair",
    "session_ids",
]

CHECKS: tuple[Check, ...] = get_args(Check)

QUARANTINED_REASON = "quarantined"
"""The exclusion reason of a group holding a quarantined row."""

QUARANTINE_KEY = "chatledger_quarantine"
"""The metadata key of a quarantined row's placeholder: ``{"event_id": ...}``."""

_PAGE = 500
_EXCLUDING = ("excluded", "summarized")
"""Event actions after which a group stays excluded until a later event says otherwise."""
_ROLES = ("system", "user", "assistant", "tool")


@dataclass
class _Group:
    row: RowMapping
    messages: int = 0
    tokens: int = 0
    mixed_flags: bool = False


@dataclass
class _Scan:
    """One pass over a session: what it found, and what a repair needs."""

    session: RowMapping
    limits: Limits
    findings: list[Finding] = field(default_factory=list)
    bad_rows: list[tuple[Sequence[Any], str]] = field(default_factory=list)
    flagged_groups: list[str] = field(default_factory=list)
    totals: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Column to (stored value, value from the rows), for those that disagree."""
    tombstones: list[str] = field(default_factory=list)
    """The redacted messages."""
    hashed: list[str] = field(default_factory=list)
    """Redacted messages whose row keeps a content hash."""
    copied: list[str] = field(default_factory=list)
    """Redacted messages a ``doctor`` event keeps a quarantine copy of."""

    def add(self, check: Check, detail: str, *, fixable: bool, **where: Any) -> None:
        self.findings.append(
            Finding(
                session_id=self.session["session_id"],
                check=check,
                detail=detail,
                fixable=fixable,
                **where,
            )
        )


async def _groups(conn: AsyncConnection, tenant: str, session_id: str) -> dict[str, _Group]:
    query = (
        select(GROUPS)
        .where(GROUPS.c.tenant == tenant, GROUPS.c.session_id == session_id)
        .order_by(GROUPS.c.anchor, GROUPS.c.slot)
    )
    return {row["group_id"]: _Group(row) for row in (await conn.execute(query)).mappings()}


async def _message_rows(
    conn: AsyncConnection, tenant: str, session_id: str, after: int
) -> list[Any]:
    query = (
        select(*message_columns())
        .where(MESSAGES.c.tenant == tenant, MESSAGES.c.session_id == session_id)
        .where(MESSAGES.c.seq > after)
        .order_by(MESSAGES.c.seq)
        .limit(_PAGE)
    )
    return list(await conn.execute(query))


def _declared_calls(message: Message) -> list[str]:
    """The call ids ``message`` declares as grouping reads them (an approval request
    pairs under a key of its own, which a later request may take again: not a call)."""
    calls, _ = call_links(message)
    return [c for c in calls if c and not is_approval_key(c)]


@dataclass
class _Rows:
    """What the message rows add up to."""

    count: int = 0
    tokens: int = 0
    max_seq: int = FIRST_SEQ - 1
    calls: dict[str, list[int]] = field(default_factory=dict)


async def _scan_messages(
    conn: AsyncConnection, scan: _Scan, groups: dict[str, _Group], rows: _Rows
) -> None:
    s = scan.session
    tenant, session_id = s["tenant"], s["session_id"]
    i = COLUMN_INDEX
    after = FIRST_SEQ - 1
    while page := await _message_rows(conn, tenant, session_id, after):
        for row in page:
            after = seq = row[i["seq"]]
            rows.count += 1
            rows.max_seq = max(rows.max_seq, seq)
            rows.tokens += row[i["token_count"]] or 0
            group = groups.get(row[i["group_id"]])
            if group is not None:
                group.messages += 1
                reduced = row[i["reduced_token_count"]]
                group.tokens += reduced if reduced is not None else row[i["token_count"]] or 0
                if bool(row[i["excluded"]]) != bool(group.row["excluded"]):
                    group.mixed_flags = True
            kind = group.row["kind"] if group is not None else None
            try:
                stored = stored_message(row, kind, tenant=tenant, session_id=session_id)
                check_stored_message(stored.message, scan.limits)
                if stored.reduced is not None:
                    check_stored_message(stored.reduced, scan.limits)
            except (CorruptRowError, InvalidInput) as error:
                scan.bad_rows.append((row, str(error)))
                scan.add(
                    "unparsable_row",
                    f"message {row[i['message_id']]!r} (seq {seq}) does not parse: {error}",
                    fixable=True,
                    seq=seq,
                    group_id=row[i["group_id"]],
                )
                continue
            if is_tombstone(stored.message):
                scan.tombstones.append(stored.message_id)
            for call_id in _declared_calls(stored.message):
                rows.calls.setdefault(call_id, []).append(seq)


def _check_groups(scan: _Scan, groups: dict[str, _Group], events: set[str]) -> None:
    later_user = False
    for group in reversed(list(groups.values())):  # newest first
        g = group.row
        if g["kind"] == "user" and not g["excluded"]:
            later_user = True
        if g["orphan"]:
            scan.add(
                "orphan_result",
                f"group {g['group_id']!r} holds a tool result whose call was never stored",
                fixable=False,
                group_id=g["group_id"],
            )
        elif g["pending_calls"] and later_user and g["kind"] != "user":
            scan.add(
                "stale_call",
                f"group {g['group_id']!r} has {g['pending_calls']} call(s) never answered "
                "before a later user message",
                fixable=False,
                group_id=g["group_id"],
            )
        if group.mixed_flags:
            scan.flagged_groups.append(g["group_id"])
            scan.add(
                "audit_mismatch",
                f"the messages of group {g['group_id']!r} disagree with its exclusion flag",
                fixable=True,
                group_id=g["group_id"],
            )
        if g["excluded_event_id"] is not None and g["excluded_event_id"] not in events:
            scan.add(
                "audit_mismatch",
                f"group {g['group_id']!r} is excluded by event {g['excluded_event_id']!r}, "
                "which is not in the audit",
                fixable=False,
                group_id=g["group_id"],
            )
        summary = g["summarized_by"]
        if summary is not None and summary not in groups:
            scan.add(
                "audit_mismatch",
                f"group {g['group_id']!r} is summarized by {summary!r}, which does not exist",
                fixable=False,
                group_id=g["group_id"],
            )


async def _check_events(conn: AsyncConnection, scan: _Scan, groups: dict[str, _Group]) -> set[str]:
    s = scan.session
    keys = (EVENTS.c.tenant == s["tenant"], EVENTS.c.session_id == s["session_id"])
    query = select(EVENTS.c.event_id, EVENTS.c.number).where(*keys)
    numbers: dict[str, int] = {row[0]: row[1] for row in await conn.execute(query)}
    links = select(EVENT_GROUPS.c.event_id, EVENT_GROUPS.c.group_id, EVENT_GROUPS.c.action).where(
        EVENT_GROUPS.c.tenant == s["tenant"], EVENT_GROUPS.c.session_id == s["session_id"]
    )
    latest: dict[str, tuple[int, str, str]] = {}
    for event_id, group_id, action in await conn.execute(links):
        if group_id not in groups:
            scan.add(
                "audit_mismatch",
                f"event {event_id!r} says it {action} group {group_id!r}, which does not exist",
                fixable=False,
                group_id=group_id,
            )
            continue
        entry = (numbers.get(event_id, 0), action, event_id)
        if group_id not in latest or entry[0] > latest[group_id][0]:
            latest[group_id] = entry
    for group_id, (_, action, event_id) in latest.items():
        if action in _EXCLUDING and not groups[group_id].row["excluded"]:
            scan.add(
                "audit_mismatch",
                f"the audit's last word on group {group_id!r} is that event {event_id!r} "
                f"{action} it, but the group is included",
                fixable=False,
                group_id=group_id,
            )
    return set(numbers)


def _check_totals(scan: _Scan, groups: dict[str, _Group], rows: _Rows, events: int) -> None:
    s = scan.session
    active = [g for g in groups.values() if not g.row["excluded"]]
    expected = {
        "stored_messages": rows.count,
        "stored_groups": len(groups),
        "stored_tokens": rows.tokens,
        "active_messages": sum(g.messages for g in active),
        "active_groups": len(active),
        "active_tokens": sum(g.tokens for g in active),
        "event_count": events,
    }
    for column, value in expected.items():
        if s[column] != value:
            scan.totals[column] = (s[column], value)
    if s["next_seq"] <= rows.max_seq:
        scan.totals["next_seq"] = (s["next_seq"], rows.max_seq + 1)
    for group in groups.values():
        g = group.row
        if (g["message_count"], g["token_count"]) != (group.messages, group.tokens):
            scan.totals[f"group {g['group_id']}"] = (g["token_count"], group.tokens)
    for column, (stored, found) in scan.totals.items():
        scan.add(
            "totals_mismatch",
            f"{column}: {stored} recorded, {found} in the rows"
            if not column.startswith("group ")
            else f"{column}: its message and token totals disagree with its rows",
            fixable=True,
            group_id=column.removeprefix("group ") if column.startswith("group ") else None,
        )


def _duplicates(scan: _Scan, rows: _Rows) -> None:
    for call_id, seqs in rows.calls.items():
        if len(seqs) > 1:
            scan.add(
                "duplicate_call_id",
                f"call id {call_id!r} is declared {len(seqs)} times, at seq "
                + ", ".join(map(str, sorted(set(seqs)))),
                fixable=False,
                seq=seqs[0],
            )


async def _scan(conn: AsyncConnection, session: RowMapping, limits: Limits) -> _Scan:
    scan = _Scan(session=session, limits=limits)
    groups = await _groups(conn, session["tenant"], session["session_id"])
    rows = _Rows()
    await _scan_messages(conn, scan, groups, rows)
    events = await _check_events(conn, scan, groups)
    _check_groups(scan, groups, events)
    _duplicates(scan, rows)
    _check_totals(scan, groups, rows, len(events))
    _check_import(scan)
    await _check_residue(conn, scan)
    return scan


async def _check_residue(conn: AsyncConnection, scan: _Scan) -> None:
    """What redactions left behind: in the rows, and in the write-ahead log."""
    tenant, session_id = scan.session["tenant"], scan.session["session_id"]
    scan.hashed = await leftover_hashes(conn, tenant, session_id, scan.tombstones)
    for message_id in scan.hashed:
        scan.add(
            "redaction_residue",
            f"message {message_id!r} is redacted but its row keeps the content hash of what "
            "it held (a release before this check wrote it): a guess of the text can be "
            "checked against it",
            fixable=True,
        )
    copies = (
        await leftover_copies(conn, tenant, session_id, scan.tombstones) if scan.tombstones else {}
    )
    for event_id, message_ids in copies.items():
        scan.copied.extend(message_ids)
        scan.add(
            "redaction_residue",
            f"event {event_id!r} keeps a quarantine copy of redacted message(s) "
            + ", ".join(map(repr, message_ids)),
            fixable=True,
        )
    for event_id in await pending_file_erasures(conn, tenant, session_id):
        scan.add(
            "erasure_pending",
            f"the text redacted by event {event_id!r} may still be in the write-ahead log: "
            "no checkpoint has truncated it since (another connection was reading, or the "
            "process stopped)",
            fixable=True,
        )


def _session_values(session: RowMapping) -> dict[str, Any]:
    """The session row's metadata, decoded (empty when it does not parse: that is a
    finding of its own, quarantined first)."""
    try:
        return decode_session_metadata(
            session["tenant"], session["session_id"], session["metadata"]
        )
    except ValueError:
        return {}


def _import_mark(session: RowMapping) -> ImportMark | None:
    return mark_of(_session_values(session))


def _removable(session: RowMapping, mark: ImportMark) -> bool:
    """Whether what the interrupted import stored is all the session holds."""
    return mark.held == 0 and session["event_count"] == 0


def _check_import(scan: _Scan) -> None:
    s = scan.session
    mark = _import_mark(s)
    if mark is None:
        return
    origin = f"an import from {', '.join(mark.sources)} ({mark.system})"
    stored = s["stored_messages"]
    if verdict(mark, stored) == "done":
        detail = f"{origin} stored every message but left its mark in the session's metadata"
        scan.add("half_imported", detail, fixable=True)
        return
    detail = (
        f"{origin} was interrupted: {stored} of its {mark.expected} messages are stored; run "
        "the same import again to complete it"
    )
    if _removable(s, mark):
        scan.add(
            "half_imported", f"{detail}, or --fix to remove the {stored} it stored", fixable=True
        )
    else:
        held = f"the session held {mark.held} messages before" if mark.held else "it was compacted"
        scan.add("half_imported", f"{detail} ({held}: --fix cannot undo it)", fixable=False)


async def _session_metadata(
    conn: AsyncConnection, tenant: str, session_id: str, limits: Limits, *, lock: bool = False
) -> tuple[Any, str | None]:
    """The session row's metadata as stored (text), and why it does not parse (None when
    it does); :class:`~store.errors.SessionNotFound` when there is no such session."""
    query = select(sql_cast(SESSIONS.c.metadata, Text)).where(
        SESSIONS.c.tenant == tenant, SESSIONS.c.session_id == session_id
    )
    if lock and dialect.of(conn).row_locks:
        query = query.with_for_update()
    found = (await conn.execute(query)).first()
    if found is None:
        raise SessionNotFound(session_id, tenant=tenant)
    raw = found[0]
    try:
        value = decode_session_metadata(tenant, session_id, raw)
        check_json(value, "metadata", limits, 1)
    except (ValueError, InvalidInput) as error:
        return raw, f"the session's metadata does not parse: {error}"
    return raw, None


async def diagnose(
    conn: AsyncConnection, tenant: str, session_id: str, limits: Limits
) -> list[Finding]:
    """Every finding of one session (see the module docstring); reads only. A row that
    parses but holds what ``limits`` refuse (a lone surrogate, a NaN, JSON too deep)
    counts as unparsable: nothing could write it back or send it on. A session row whose
    metadata does not parse is the one finding reported for it until it is fixed."""
    _, problem = await _session_metadata(conn, tenant, session_id, limits)
    if problem is not None:
        return [
            Finding(session_id=session_id, check="unparsable_row", detail=problem, fixable=True)
        ]
    session = await read_session(conn, tenant, session_id)
    if session["branch"] is not None:
        # a fork's rows and totals span its lineage: not checked yet (docs/branches.md)
        return []
    return (await _scan(conn, session, limits)).findings


# --- repair --------------------------------------------------------------------------


def _verbatim(value: Any) -> Any:
    """A raw column as JSON-safe ASCII text (lone surrogates and NUL escaped)."""
    return value if value is None or isinstance(value, int | bool) else json.dumps(str(value))


def _placeholder(row: Sequence[Any], event_id: str) -> Message:
    role = row[COLUMN_INDEX["role"]]
    text = f"[quarantined by chatledger doctor: this row did not parse; see event {event_id}]"
    return Message.model_construct(
        role=role if role in _ROLES else "assistant",
        contents=[TextContent(text=text)],
        message_id=str(row[COLUMN_INDEX["message_id"]]),
        author_name=None,
        created_at=None,
        metadata={QUARANTINE_KEY: {"event_id": event_id}},
    )


async def _quarantine(
    conn: AsyncConnection, scan: _Scan, count: Callable[[Message], int], event_id: str
) -> dict[str, Any]:
    s = scan.session
    keys = (MESSAGES.c.tenant == s["tenant"], MESSAGES.c.session_id == s["session_id"])
    kept: list[dict[str, Any]] = []
    groups: set[str] = set()
    for row, error in scan.bad_rows:
        kept.append(
            {
                "seq": row[COLUMN_INDEX["seq"]],
                "error": error,
                "columns": {
                    column: _verbatim(row[COLUMN_INDEX[column]])
                    for column in (
                        "message_id",
                        "role",
                        "contents",
                        "author_name",
                        "created_at",
                        "metadata",
                        "reduced_contents",
                    )
                },
            }
        )
        placeholder = _placeholder(row, event_id)
        seq = row[COLUMN_INDEX["seq"]]
        contents = encode_contents(s["tenant"], s["session_id"], seq, placeholder.contents)
        metadata = encode_metadata(s["tenant"], s["session_id"], seq, placeholder.metadata)
        await conn.execute(
            update(MESSAGES)
            .where(*keys, MESSAGES.c.seq == seq)
            .values(
                role=placeholder.role,
                contents=type_coerce(contents, ENCODED),
                metadata=type_coerce(metadata, ENCODED),
                author_name=None,
                created_at=None,
                token_count=count(placeholder),
                search_text=None,
                reduced_contents=null(),  # SQL NULL, not JSON null
                reduced_token_count=None,
                reduced_event_id=None,
            )
        )
        groups.add(row[COLUMN_INDEX["group_id"]])
    for group_id in sorted(groups):
        flags = {
            "excluded": True,
            "excluded_reason": QUARANTINED_REASON,
            "excluded_event_id": event_id,
        }
        await conn.execute(
            update(GROUPS)
            .where(
                GROUPS.c.tenant == s["tenant"],
                GROUPS.c.session_id == s["session_id"],
                GROUPS.c.group_id == group_id,
                GROUPS.c.excluded.is_(False),
            )
            .values(**flags)
        )
        await conn.execute(
            update(MESSAGES)
            .where(*keys, MESSAGES.c.group_id == group_id, MESSAGES.c.excluded.is_(False))
            .values(**flags)
        )
    return {"check": "unparsable_row", "groups": sorted(groups), QUARANTINE_COPIES_KEY: kept}


async def _align_flags(conn: AsyncConnection, scan: _Scan) -> dict[str, Any]:
    s = scan.session
    for group_id in scan.flagged_groups:
        group = (
            (
                await conn.execute(
                    select(
                        GROUPS.c.excluded, GROUPS.c.excluded_reason, GROUPS.c.excluded_event_id
                    ).where(
                        GROUPS.c.tenant == s["tenant"],
                        GROUPS.c.session_id == s["session_id"],
                        GROUPS.c.group_id == group_id,
                    )
                )
            )
            .mappings()
            .one()
        )
        await conn.execute(
            update(MESSAGES)
            .where(
                MESSAGES.c.tenant == s["tenant"],
                MESSAGES.c.session_id == s["session_id"],
                MESSAGES.c.group_id == group_id,
            )
            .values(**group)
        )
    return {"check": "audit_mismatch", "groups": list(scan.flagged_groups)}


async def _fix_totals(conn: AsyncConnection, scan: _Scan) -> None:
    s = scan.session
    values: dict[str, int] = {}
    if "next_seq" in scan.totals:
        values["next_seq"] = scan.totals["next_seq"][1]
    if "event_count" in scan.totals:
        values["event_count"] = scan.totals["event_count"][1]
    if values:
        await conn.execute(
            update(SESSIONS)
            .where(SESSIONS.c.tenant == s["tenant"], SESSIONS.c.session_id == s["session_id"])
            .values(**values)
        )


def _mark(scan: _Scan, check: Check, event_id: str) -> None:
    scan.findings = [
        f.model_copy(update={"fixed": True, "event_id": event_id})
        if f.check == check and f.fixable
        else f
        for f in scan.findings
    ]


_IMPORT_STATE = {
    "next_seq": FIRST_SEQ,
    "position": 0,
    "turn": 0,
    "tail_group_id": None,
    "tail_mode": None,
}
"""The annotation state of a session that holds nothing."""


async def _settle_import(conn: AsyncConnection, scan: _Scan, event_id: str) -> None:
    """Take the mark of an import off, and when it was interrupted remove what it
    stored (the session holds nothing else: :func:`_removable`), as one event."""
    s = scan.session
    mark = _import_mark(s)
    if mark is None:
        raise AssertionError("no import mark to settle")
    keys = (SESSIONS.c.tenant == s["tenant"], SESSIONS.c.session_id == s["session_id"])
    unmarked = with_mark(_session_values(s), None)
    values: dict[str, Any] = {"metadata": metadata_value(s["tenant"], s["session_id"], unmarked)}
    removed = 0
    if verdict(mark, s["stored_messages"]) == "partial":
        removed = s["stored_messages"]
        for table in (EARLY_RESULTS, OPEN_CALLS, MESSAGES, GROUPS):
            await conn.execute(
                delete(table).where(
                    table.c.tenant == s["tenant"], table.c.session_id == s["session_id"]
                )
            )
        values.update(_IMPORT_STATE)
    await conn.execute(update(SESSIONS).where(*keys).values(**values))
    await rebuild_totals(conn, s["tenant"], s["session_id"])
    await record_event(
        conn,
        s["tenant"],
        s["session_id"],
        s,
        event_id=event_id,
        strategy="doctor",
        params={
            "check": "half_imported",
            "mark": mark.model_dump(mode="json"),
            "removed_messages": removed,
        },
        now=now(),
    )


async def repair(
    conn: AsyncConnection,
    tenant: str,
    session_id: str,
    count: Callable[[Message], int],
    limits: Limits,
) -> list[Finding]:
    """Repair one session in the caller's write transaction: scan it under its lock, fix
    what can be fixed (one audit event per kind of fix), and return the findings, those
    repaired marked ``fixed``. A half-imported session is settled first, and scanned
    again."""
    raw, problem = await _session_metadata(conn, tenant, session_id, limits, lock=True)
    if problem is not None:  # quarantined first: the session row must read to go on
        await conn.execute(
            update(SESSIONS)
            .where(SESSIONS.c.tenant == tenant, SESSIONS.c.session_id == session_id)
            .values(metadata=metadata_value(tenant, session_id, {}))
        )
    session = await lock_session(conn, tenant, session_id)
    scan = await _scan(conn, session, limits)
    settled: list[Finding] = []
    for finding in [f for f in scan.findings if f.check == "half_imported" and f.fixable]:
        event_id = new_event_id()
        await _settle_import(conn, scan, event_id)
        settled.append(finding.model_copy(update={"fixed": True, "event_id": event_id}))
        scan = await _scan(conn, await read_session(conn, tenant, session_id), limits)
    if problem is not None:
        scan.add("unparsable_row", problem, fixable=True)
    return settled + await _repair_scan(conn, scan, count, raw, problem)


async def _repair_scan(
    conn: AsyncConnection,
    scan: _Scan,
    count: Callable[[Message], int],
    raw: Any,
    problem: str | None,
) -> list[Finding]:
    tenant, session_id = scan.session["tenant"], scan.session["session_id"]
    session = scan.session
    fixes: list[tuple[Check, dict[str, Any]]] = []
    ids: dict[Check, str] = {}
    if scan.bad_rows or problem is not None:
        ids["unparsable_row"] = event_id = new_event_id()
        quarantined = await _quarantine(conn, scan, count, event_id)
        if problem is not None:
            quarantined["session_metadata"] = {"error": problem, "metadata": _verbatim(raw)}
        fixes.append(("unparsable_row", quarantined))
    if scan.flagged_groups:
        fixes.append(("audit_mismatch", await _align_flags(conn, scan)))
    if scan.hashed or scan.copied:
        ids["redaction_residue"] = event_id = new_event_id()
        await forget_hashes(conn, tenant, session_id, scan.hashed)
        await scrub_copies(conn, tenant, session_id, scan.copied, event_id)
        residue = {"hashes": scan.hashed, "copies": sorted(set(scan.copied))}
        fixes.append(("redaction_residue", {"check": "redaction_residue", **residue}))
    if scan.totals:
        await _fix_totals(conn, scan)
        fixed = {k: {"recorded": v[0], "rows": v[1]} for k, v in scan.totals.items()}
        fixes.append(("totals_mismatch", {"check": "totals_mismatch", "totals": fixed}))
    if not fixes:
        return scan.findings
    await rebuild_totals(conn, tenant, session_id)
    for check, params in fixes:
        event_id = ids.get(check) or new_event_id()
        before = await read_session(conn, tenant, session_id)
        if check == "unparsable_row":
            before = session
        await record_event(
            conn,
            tenant,
            session_id,
            before,
            event_id=event_id,
            strategy="doctor",
            params=params,
            now=now(),
        )
        _mark(scan, check, event_id)
    return scan.findings


async def session_ids(conn: AsyncConnection, tenant: str, after: str | None) -> list[str]:
    """The next page of the tenant's session ids, in id order."""
    query = select(SESSIONS.c.session_id).where(SESSIONS.c.tenant == tenant)
    if after is not None:
        query = query.where(SESSIONS.c.session_id > after)
    return list((await conn.execute(query.order_by(SESSIONS.c.session_id).limit(_PAGE))).scalars())
