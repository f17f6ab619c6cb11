"""The CLI's tables, built from the API's models (pure: models in, tables out).

Numbers and times are whole cells; message contents, statuses and reasons shorten on a
terminal, ids to a unique start, and the least needed columns drop first (see
:mod:`store.cli._output`); piped, every cell is whole. Strategy names are
shown in their short form (``context-window``), timestamps in UTC with their zone.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from store.cli._output import Column, Table, number, quantity, when

if TYPE_CHECKING:
    from store.admin import TenantInfo
    from store.models import (
        BranchInfo,
        CompactionEvent,
        ExcludedGroup,
        SessionInfo,
        Stats,
        StoredMessage,
    )
    from store.usage import UsageReport, UsageRow
    from strategies.messages import Content, Message

__all__ = [
    "branches_table",
    "content_preview",
    "context_table",
    "event_outcome",
    "events_table",
    "excluded_table",
    "fork_of",
    "history_table",
    "inherited",
    "sessions_table",
    "short_strategy",
    "stats_table",
    "tenants_table",
    "usage_table",
]


def short_strategy(name: str) -> str:
    """A strategy's short name (``TruncationStrategy`` is ``truncation``), else the name."""
    from strategies.specs import spec_name

    return spec_name(name) or name


def _json_text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _one(content: Content) -> str:
    from strategies.messages import (
        DataContent,
        FunctionCallContent,
        FunctionResultContent,
        OtherContent,
        ReasoningContent,
        TextContent,
        UriContent,
    )

    if isinstance(content, TextContent):
        return content.text
    if isinstance(content, FunctionCallContent):
        return f"call {content.name}({_json_text(content.arguments or '')})"
    if isinstance(content, FunctionResultContent):
        label = "error" if content.is_error else "result"
        return f"{label}: {_json_text(content.result)}"
    if isinstance(content, ReasoningContent):
        return f"reasoning: {content.text or '…'}"
    if isinstance(content, DataContent | UriContent):
        return f"[{content.type} {content.media_type or ''}]".replace(" ]", "]")
    if isinstance(content, OtherContent):
        return f"[{content.kind}]"
    return f"[{type(content).__name__}]"  # pragma: no cover - the union is closed


def content_preview(message: Message) -> str:
    """One line holding all a message says (a terminal shortens it, a pipe never)."""
    return " ".join(" | ".join(_one(c) for c in message.contents).split()) or "(empty)"


def sessions_table(
    sessions: Sequence[SessionInfo], title: str, known: frozenset[str] = frozenset()
) -> Table:
    """Sessions with stored and active messages and tokens, and their titles when one
    has a title, shortened to fit a terminal (left out where even a fair share of the
    width is too much) (``known``: the tenant's other session ids,
    which a shortened id stays unique among)."""
    titled = any(info.title is not None for info in sessions)
    table = Table(
        title,
        [
            Column("session", ids=True, among=known),
            Column("updated", drop=2),
            Column("messages", "right"),
            Column("active", "right"),
            Column("tokens", "right"),
            Column("active", "right"),
            # a title cut to a few letters says nothing: left out once it would be
            *([Column("title", flex=True, drop=1)] if titled else []),
        ],
    )
    for info in sessions:
        table.add(
            info.session_id,
            when(info.updated_at),
            number(info.stored_messages),
            number(info.active_messages),
            number(info.stored_tokens),
            number(info.active_tokens),
            *([info.title or ""] if titled else []),
        )
    return table


def tenants_table(tenants: Sequence[TenantInfo]) -> Table:
    """Every tenant of a database and its totals."""
    table = Table(
        "Tenants",
        [
            Column("tenant"),
            Column("sessions", "right"),
            Column("messages", "right"),
            Column("tokens", "right"),
            Column("updated", drop=1),
        ],
    )
    for info in tenants:
        table.add(
            info.tenant,
            number(info.sessions),
            number(info.stored_messages),
            number(info.stored_tokens),
            when(info.updated_at),
        )
    return table


def _status(stored: StoredMessage, pinned: bool) -> tuple[str, str | None]:
    if stored.excluded:
        return f"excluded: {stored.excluded_reason or '-'}", "dim"
    marks = []
    if stored.kind == "summary":
        marks.append("summary")
    if stored.reduced is not None:
        marks.append("reduced")
    if pinned:
        marks.append("pinned")
    return ", ".join(marks), "bold" if stored.kind == "summary" else None


def fork_of(info: SessionInfo) -> str | None:
    """What a fork was forked from: ``fork of PARENT at MESSAGE`` (None: not a fork)."""
    parent, cut = info.parent_session_id, info.fork_message_id
    if parent is None and cut is None:
        return None
    if parent is None:
        return f"fork at {cut} of a deleted session"
    if cut is None:
        return f"fork of {parent} (empty when forked)"
    return f"fork of {parent} at {cut}"


def history_table(
    title: str,
    messages: Sequence[StoredMessage],
    pinned: frozenset[str] = frozenset(),
    *,
    fork: tuple[str, int] | None = None,
    whole: bool = True,
    known: frozenset[str] = frozenset(),
) -> Table:
    """Stored messages in projection order, with their ``seq`` and id: summaries where
    they replace what they summarize, excluded messages marked (``pinned``: the ids of
    pinned groups; ``known``: every message id of the session, which a shortened id
    stays unique among).

    ``fork`` is what a fork was forked from (:func:`fork_of`) and the ``seq`` of its cut:
    it is a rule, ``— fork of PARENT at MESSAGE —``, before the first message placed
    after the cut (its anchor past the cut's seq), where the fork's own messages start.
    Before the first row it is drawn only when the rows are the ``whole`` history, not
    its newest part.
    """
    table = Table(
        title,
        [
            Column("seq", "right"),
            Column("id", ids=True, among=known),
            Column("role"),
            Column("tokens", "right"),
            Column("status", flex=True),
            Column("content", flex=True),
        ],
    )
    ordered = sorted(messages, key=lambda m: (m.anchor, m.slot, m.seq))
    if fork is not None:
        origin, cut = fork
        own = next((i for i, m in enumerate(ordered) if m.anchor > cut), len(ordered))
        if own > 0 or whole:
            table.rule(own, f"— {origin} —")
    for stored in ordered:
        status, style = _status(stored, stored.group_id in pinned)
        shown = stored.reduced if stored.reduced is not None else stored.message
        table.add(
            str(stored.seq),
            stored.message_id,
            stored.role,
            number(stored.reduced_token_count or stored.token_count),
            status,
            content_preview(shown),
            style=style,
        )
    return table


def context_table(
    title: str, messages: Sequence[Message], tokens: Sequence[int], summaries: frozenset[str]
) -> Table:
    """The request context the model is sent, with each message's tokens."""
    table = Table(
        title,
        [
            Column("#", "right"),
            Column("role"),
            Column("tokens", "right"),
            Column("content", flex=True),
        ],
    )
    for index, (message, count) in enumerate(zip(messages, tokens, strict=True), start=1):
        summary = message.message_id in summaries
        preview = content_preview(message)
        table.add(
            str(index),
            message.role,
            number(count),
            f"[summary] {preview}" if summary else preview,
            style="bold" if summary else None,
        )
    return table


def inherited(params: Mapping[str, object]) -> str:
    """What a fork event's ``params`` say the fork took over: ``4 groups (1 excluded),
    1 summary``, and the summaries it left out."""
    counts = params.get("inherited")
    found = counts if isinstance(counts, dict) else {}

    def count(key: str) -> int:
        value = found.get(key, 0)
        return value if isinstance(value, int) else 0

    parts = [quantity(count("groups"), "group")]
    if count("excluded_groups"):
        parts[0] += f" ({count('excluded_groups'):,} excluded)"
    for key, noun, plural in (
        ("summaries", "summary", "summaries"),
        ("reductions", "reduction", None),
        ("pins", "pin", None),
    ):
        if count(key):
            parts.append(quantity(count(key), noun, plural))
    dropped = params.get("dropped_summaries")
    if isinstance(dropped, list) and dropped:
        parts.append(
            f"left out {quantity(len(dropped), 'summary', 'summaries')} of later messages "
            "(the groups it replaced are active)"
        )
    return ", ".join(parts)


def _branching(event: CompactionEvent) -> str | None:
    """What a fork, a rewind, or a restore of a rewind did (None for other events)."""
    params = event.params
    if event.phase == "fork":
        source, at = params.get("source_session_id"), params.get("at")
        where = f" at {at}" if at is not None else ""
        return f"forked from {source}{where}: inherited {inherited(params)}"
    if event.phase == "rewind":
        left = params.get("messages")
        moved = quantity(left, "message") if isinstance(left, int) else "messages"
        to = params.get("to") or "the start"
        return f"rewound to {to}: {moved} set aside as tail {params.get('tail_session_id')}"
    if event.phase == "restore" and params.get("tail_session_id") is not None:
        return f"tail brought back; what followed is tail {params['tail_session_id']}"
    return None


def event_outcome(event: CompactionEvent) -> str:
    """What an event did, with the reasons of what it excluded; for a compaction that
    applied nothing, its outcome and why; for a fork or a rewind, what it took over or
    set aside."""
    branching = _branching(event) if event.outcome == "applied" else None
    if branching is not None:
        return branching
    if event.outcome != "applied":
        why = "; ".join(d.message for d in event.diagnostics)
        if event.outcome == "abandoned":
            why = why or f"the session changed under it {event.attempts} times"
        return f"{event.outcome}: {why}" if why else event.outcome
    parts = []
    summarized = {g for replaced in event.summarized.values() for g in replaced}
    if event.excluded:
        reasons = Counter(event.reasons.get(g, "") for g in event.excluded if g not in summarized)
        why = ", ".join(f"{r} {n}" if len(reasons) > 1 else r for r, n in reasons.items() if r)
        parts.append(f"{len(event.excluded)} excluded" + (f" ({why})" if why else ""))
    if event.summarized:
        into = len(event.summarized)
        parts.append(
            f"{len(summarized)} summarized" + ("" if into == len(summarized) else f" into {into}")
        )
    if event.reduced:
        parts.append(f"{len(event.reduced)} reduced")
    if event.restored:
        parts.append(f"{len(event.restored)} restored")
    return "; ".join(parts) or "-"


def events_table(events: Sequence[CompactionEvent], title: str) -> Table:
    """Compaction events: ids, what each did and why, and the tokens it saved."""
    table = Table(
        title,
        [
            Column("event", ids=True),
            Column("when", drop=4),
            Column("session", constant=True, ids=True, drop=1),
            Column("phase", constant=True, drop=3),
            Column("strategy", constant=True, drop=2),
            Column("outcome", flex=True),
            Column("tokens", "right"),
            Column("saved", "right"),
        ],
    )
    for event in events:
        table.add(
            event.id,
            when(event.created_at),
            event.session_id,
            event.phase,
            short_strategy(event.strategy),
            event_outcome(event),
            f"{number(event.tokens_before)} → {number(event.tokens_after)}",
            number(event.tokens_saved),
        )
    return table


def excluded_table(
    groups: Sequence[ExcludedGroup], title: str, known: frozenset[str] = frozenset()
) -> Table:
    """Excluded groups, their size, the reason and the event that excluded them
    (``known``: the session's other group ids, which a shortened id stays unique among)."""
    table = Table(
        title,
        [
            Column("group", ids=True, among=known),
            Column("kind", drop=2),
            Column("msgs", "right", drop=3),
            Column("tokens", "right"),
            Column("event", ids=True, drop=1),
            Column("reason", flex=True),
        ],
    )
    for group in groups:
        reason = group.reason or "-"
        if group.summary_group_id:
            reason += f", by summary {group.summary_group_id}"
        table.add(
            group.group_id,
            group.kind,
            number(group.message_count),
            number(group.tokens),
            group.event_id or "-",
            reason,
        )
    return table


def stats_table(stats: Stats) -> Table:
    """Stored versus active messages, groups and tokens (sessions for a tenant)."""
    scope = f"session {stats.session_id}" if stats.session_id else f"tenant {stats.tenant}"
    table = Table(
        f"Stats of {scope}", [Column(""), Column("stored", "right"), Column("active", "right")]
    )
    table.add("messages", number(stats.stored_messages), number(stats.active_messages))
    table.add("groups", number(stats.stored_groups), number(stats.active_groups))
    table.add("tokens", number(stats.stored_tokens), number(stats.active_tokens))
    if stats.session_id is None:
        table.add("sessions", number(stats.sessions), "")
    table.add("compaction events", number(stats.events), "")
    if stats.usage_calls:
        table.add("model calls", number(stats.usage_calls), "")
        reads = stats.cache_read_tokens
        table.add("cache reads", "-" if reads is None else number(reads), "")
        table.add("cache breaks", number(stats.cache_breaks), "")
    return table


def _lane(value: int | None) -> str:
    """A token total, or ``-`` where no call reported the lane."""
    return "-" if value is None else number(value)


def _cost(value: float | None) -> str:
    """A cost in the prices' currency, to four decimals (``-``: not priced)."""
    return "-" if value is None else f"{value:,.4f}"


def usage_table(report: UsageReport, title: str) -> Table:
    """A usage report's rows, and their total when there are several: calls, the
    provider's lanes, what chatledger counted it sent, cache breaks, and the cost with
    prices. On a narrow terminal reasoning, cache writes, the local count and the breaks
    drop, in that order."""
    key = Column(report.by, flex=report.by == "model", ids=report.by == "session")
    columns = [
        key,
        Column("calls", "right"),
        Column("input", "right"),
        Column("cache read", "right"),
        Column("cache write", "right", drop=3),
        Column("output", "right"),
        Column("reasoning", "right", drop=4),
        Column("sent (local)", "right", drop=2),
        Column("breaks", "right", drop=1),
    ]
    if report.priced:
        columns.append(Column("cost", "right"))
    table = Table(title, columns)

    def add(row: UsageRow, style: str | None = None) -> None:
        cells = [
            row.key,
            number(row.calls),
            _lane(row.input_tokens),
            _lane(row.cache_read_tokens),
            _lane(row.cache_write_tokens),
            _lane(row.output_tokens),
            _lane(row.reasoning_tokens),
            _lane(row.local_sent_tokens),
            number(row.cache_breaks),
        ]
        if report.priced:
            cells.append(_cost(row.cost))
        table.add(*cells, style=style)

    for row in report.rows:
        add(row)
    if len(report.rows) > 1:
        add(report.total, style="bold")
    return table


def dry_run_table(
    title: str,
    actions: Mapping[str, str],
    kinds: Mapping[str, str],
    tokens: Mapping[str, tuple[int, int]],
    known: frozenset[str] = frozenset(),
) -> Table:
    """What a change set would do, group by group, with each group's tokens before and
    after (``actions``: group id to what would happen to it; ``known``: the session's
    other group ids, which a shortened id stays unique among)."""
    table = Table(
        title,
        [
            Column("group", ids=True, among=known),
            Column("kind", drop=1),
            Column("before", "right"),
            Column("after", "right"),
            Column("would be", flex=True),
        ],
    )
    for group_id, action in actions.items():
        before, after = tokens.get(group_id, (0, 0))
        table.add(group_id, kinds.get(group_id, "-"), number(before), number(after), action)
    return table


def branches_table(branches: Sequence[BranchInfo], title: str) -> Table:
    """A session's parent, forks and superseded tails, with the message each was cut at
    and the event that made it."""
    table = Table(
        title,
        [
            Column("relation"),
            Column("session", ids=True),
            Column("fork message", ids=True),
            Column("messages", "right"),
            Column("created", drop=2),
            Column("event", ids=True, drop=1),
        ],
    )
    for branch in branches:
        table.add(
            branch.relation,
            branch.session_id,
            branch.fork_message_id or "-",
            number(branch.messages),
            when(branch.created_at),
            branch.event_id or "-",
        )
    return table
