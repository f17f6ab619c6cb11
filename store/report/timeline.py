"""A session's audit as a timeline: its groups in projection order, its events, and the
stored and sent tokens after each turn.

:func:`collect` reads what any backend offers (the stored history with the excluded
messages, the audit, the active view for pins); :func:`build_timeline` is the pure part
that turns them into a :class:`Timeline` for the page (:mod:`store.report.page`).

The token series, per user turn (each user message starts one, in a chat played here as
in one imported): *stored* counts every stored message up to the end of the turn
(summaries included), by ``seq``; *sent* counts what the projection held then: the
appended messages' tokens minus what the applied events up to that turn saved (each
event's tokens before minus after). The last point of *sent* is the session's
active tokens. A before-call strategy may send less still; it is not recorded.

The recorded model calls (``usage_calls``) are totalled per turn (:func:`call_turns`
says which turn a call belongs to) and priced when prices are given.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from store.contract import HistoryBackend
from store.errors import InvalidInput
from store.formats import ORIGINAL_ID_KEY
from store.models import CompactionEvent, SessionInfo, StoredMessage
from store.usage import ModelPrice, UsageCall, UsageRow
from store.usage.report import row_of
from strategies.messages import Message
from strategies.summarizers import format_message

__all__ = [
    "PREVIEW_CHARS",
    "GroupRow",
    "Reduced",
    "Timeline",
    "TurnPoint",
    "build_timeline",
    "call_turns",
    "collect",
]

PREVIEW_CHARS = 160
"""Characters of a group's text shown on the page (the page stays small at scale)."""

GroupState = Literal["sent", "excluded", "summarized"]


@dataclass(frozen=True, slots=True)
class Reduced:
    """A reduced tool result beside its original."""

    message_id: str
    original: str
    reduced: str
    tokens_before: int
    tokens_after: int
    event_id: str | None


@dataclass
class GroupRow:
    """One group of the session, as the page shows it."""

    group_id: str
    kind: str
    turn: int
    order: tuple[int, int]
    messages: int
    tokens: int
    """Stored tokens of the group's messages."""
    sent_tokens: int
    """Tokens the projection sends for it (reductions applied; 0 when excluded)."""
    state: GroupState
    reason: str | None
    event_id: str | None
    preview: str
    pinned: bool = False
    summary_of: tuple[str, ...] = ()
    """The groups a summary replaces."""
    summarized_by: str | None = None
    reductions: list[Reduced] = field(default_factory=list)
    last_seq: int = 0


@dataclass(frozen=True, slots=True)
class TurnPoint:
    """Stored and sent tokens at the end of one user turn."""

    turn: int
    stored: int
    sent: int


@dataclass(frozen=True)
class Timeline:
    """Everything the audit page shows of one session."""

    info: SessionInfo
    groups: list[GroupRow]
    events: list[CompactionEvent]
    """Oldest first."""
    event_turns: dict[str, int]
    """The turn after which each event happened."""
    points: list[TurnPoint]
    cut: int | None = None
    """For a fork, the ``seq`` of the message it was forked at (0 for a fork of an empty
    session; None when not a fork, or when that message has left its history): the
    fork's own groups are placed after it."""
    usage: dict[int, UsageRow] = field(default_factory=dict)
    """The recorded model calls of each turn that has some, totalled (key: the turn),
    in turn order (:func:`call_turns` says which turn a call belongs to)."""
    usage_total: UsageRow | None = None
    """The totals of every recorded call (None: no call was recorded)."""
    priced: bool = False
    """Whether prices were given (``cost`` is None everywhere otherwise)."""
    unpriced_models: tuple[str, ...] = ()
    """The models of the calls the prices do not name (``unknown``: none named)."""

    def count(self, state: GroupState | None = None) -> int:
        """Groups in ``state`` (all when None)."""
        return sum(1 for g in self.groups if state is None or g.state == state)

    @property
    def pinned(self) -> int:
        """Pinned groups."""
        return sum(1 for g in self.groups if g.pinned)

    @property
    def reduced(self) -> int:
        """Groups shown in a reduced form."""
        return sum(1 for g in self.groups if g.reductions)


async def collect(
    store: HistoryBackend, session_id: str, *, prices: Mapping[str, ModelPrice] | None = None
) -> Timeline:
    """Read the session from ``store`` and build its timeline (the calls priced with
    ``prices``, ``{model: ModelPrice}``, when given)."""
    info = await store.session(session_id)
    messages = [m async for m in store.aiter_history(session_id, include_excluded=True)]
    events = await store.audit(session_id)
    view = await store.view(session_id)
    pinned = {g.group_id for g in view.groups if g.pinned}
    try:
        calls = await store.usage_calls(session_id)
    except InvalidInput:  # a backend written before the contract recorded usage
        calls = []
    return build_timeline(info, messages, events, pinned, calls, prices=prices)


def preview(messages: Iterable[Message], limit: int = PREVIEW_CHARS) -> str:
    """The first ``limit`` characters of the messages' transcript lines."""
    text = " ".join(format_message(1, m).removeprefix("1. ") for m in messages)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def build_timeline(
    info: SessionInfo,
    messages: Sequence[StoredMessage],
    events: Sequence[CompactionEvent],
    pinned: set[str],
    calls: Sequence[UsageCall] = (),
    *,
    prices: Mapping[str, ModelPrice] | None = None,
) -> Timeline:
    """The timeline of a session's stored ``messages`` (excluded ones included, any
    order), its ``events`` (any order), its ``pinned`` group ids, and its recorded model
    ``calls`` (priced with ``prices`` when given)."""
    by_seq = sorted(messages, key=lambda m: m.seq)
    turns = _turns(by_seq)
    chronological = sorted(events, key=lambda e: e.created_at)
    summaries = {s: r for e in chronological for s, r in e.summarized.items()}
    groups = _groups(by_seq, turns, summaries, pinned)
    event_turns = _event_turns(by_seq, turns, chronological)
    per_turn = call_turns(by_seq, turns, calls)
    unpriced = sorted(
        {c.usage.model or "unknown" for c in calls if prices is not None and not _priced(c, prices)}
    )
    return Timeline(
        info=info,
        groups=sorted(groups, key=lambda g: g.order),
        events=chronological,
        event_turns=event_turns,
        points=_points(by_seq, turns, event_turns, chronological),
        cut=_cut(info, by_seq),
        usage={t: row_of(str(t), per_turn[t], prices) for t in sorted(per_turn)},
        usage_total=row_of("total", calls, prices) if calls else None,
        priced=prices is not None,
        unpriced_models=tuple(unpriced),
    )


def _priced(call: UsageCall, prices: Mapping[str, ModelPrice]) -> bool:
    return call.usage.model is not None and call.usage.model in prices


def call_turns(
    by_seq: Sequence[StoredMessage], turns: dict[int, int], calls: Iterable[UsageCall]
) -> dict[int, list[UsageCall]]:
    """The calls of each turn. A call belongs to the turn of its ``message_id`` when
    that message is stored (by its id, else by the id its source gave it, kept when the
    store gave it another), else to the turn of its ``after_seq`` (the newest message
    stored when it was recorded, or the newest before it that is still stored); a call
    recorded before any message belongs to the first turn."""
    by_id: dict[str, int] = {}
    for message in by_seq:
        by_id.setdefault(message.message_id, message.seq)
    for message in by_seq:
        original = message.message.metadata.get(ORIGINAL_ID_KEY)
        for other in (message.source_id, original):
            if isinstance(other, str):
                by_id.setdefault(other, message.seq)
    seqs = [m.seq for m in by_seq]
    out: dict[int, list[UsageCall]] = {}
    for call in calls:
        seq = by_id.get(call.message_id) if call.message_id is not None else None
        if seq is None and call.after_seq is not None:
            index = bisect.bisect_right(seqs, call.after_seq) - 1
            seq = seqs[index] if index >= 0 else None
        turn = turns.get(seq, 1) if seq is not None else 1
        out.setdefault(turn, []).append(call)
    return out


def _cut(info: SessionInfo, by_seq: Sequence[StoredMessage]) -> int | None:
    """The ``seq`` of a fork's cut in its history (see :attr:`Timeline.cut`)."""
    if info.parent_session_id is None and info.fork_message_id is None:
        return None
    if info.fork_message_id is None:
        return 0
    return next(
        (m.seq for m in by_seq if m.message_id == info.fork_message_id and m.kind != "summary"),
        None,
    )


def _turns(by_seq: Sequence[StoredMessage]) -> dict[int, int]:
    """The turn of every seq: each user message starts one; a summary takes the turn of
    the message at its anchor."""
    turn = 0
    out: dict[int, int] = {}
    for message in by_seq:
        if message.kind == "summary":
            continue
        if message.role == "user":
            turn += 1
        out[message.seq] = max(turn, 1)
    for message in by_seq:
        if message.kind == "summary":
            out[message.seq] = out.get(message.anchor, max(turn, 1))
    return out


def _groups(
    by_seq: Sequence[StoredMessage],
    turns: dict[int, int],
    summaries: dict[str, tuple[str, ...]],
    pinned: set[str],
) -> list[GroupRow]:
    members: dict[str, list[StoredMessage]] = {}
    for message in by_seq:
        members.setdefault(message.group_id, []).append(message)
    summarized_by = {g: s for s, replaced in summaries.items() for g in replaced}
    rows: list[GroupRow] = []
    for group_id, stored in members.items():
        first = min(stored, key=lambda m: (m.anchor, m.slot))
        excluded = first.excluded
        reason = first.excluded_reason if excluded else None
        state: GroupState = "sent"
        if excluded:
            state = "summarized" if reason == "summarized" else "excluded"
        reductions = [
            Reduced(
                message_id=m.message_id,
                original=preview([m.message]),
                reduced=preview([m.reduced]),
                tokens_before=m.token_count,
                tokens_after=m.reduced_token_count or 0,
                event_id=m.reduced_event_id,
            )
            for m in stored
            if m.reduced is not None
        ]
        sent = 0
        if not excluded:
            sent = sum(
                m.reduced_token_count if m.reduced_token_count is not None else m.token_count
                for m in stored
            )
        rows.append(
            GroupRow(
                group_id=group_id,
                kind=first.kind,
                turn=turns.get(first.seq, 1),
                order=(first.anchor, first.slot),
                messages=len(stored),
                tokens=sum(m.token_count for m in stored),
                sent_tokens=sent,
                state=state,
                reason=reason,
                event_id=first.excluded_event_id if excluded else None,
                preview=preview(m.message for m in stored),
                pinned=group_id in pinned,
                summary_of=summaries.get(group_id, ()),
                summarized_by=summarized_by.get(group_id) if state == "summarized" else None,
                reductions=reductions,
                last_seq=max(m.seq for m in stored),
            )
        )
    return rows


def _event_turns(
    by_seq: Sequence[StoredMessage], turns: dict[int, int], events: Sequence[CompactionEvent]
) -> dict[str, int]:
    """Each event's turn: that of the last message stored at or before it."""
    appended = [m for m in by_seq if m.kind != "summary"]
    times = [m.stored_at for m in appended]
    out: dict[str, int] = {}
    for event in events:
        index = bisect.bisect_right(times, event.created_at) - 1
        out[event.id] = turns[appended[index].seq] if index >= 0 else 1
    return out


def _points(
    by_seq: Sequence[StoredMessage],
    turns: dict[int, int],
    event_turns: dict[str, int],
    events: Sequence[CompactionEvent],
) -> list[TurnPoint]:
    """Stored and sent tokens at the end of each turn (see the module docstring).

    A message counts in the turn it was stored in, by its ``seq`` (never by its time:
    an import stores a whole chat at once): an appended message in its own turn, a
    summary in the turn of the appended message before it. An event's savings count
    from the turn it happened after (:func:`_event_turns`)."""
    stored_in: dict[int, int] = {}
    appended_in: dict[int, int] = {}
    current = 1
    for message in by_seq:
        if message.kind != "summary":
            current = turns[message.seq]
            appended_in[current] = appended_in.get(current, 0) + message.token_count
        stored_in[current] = stored_in.get(current, 0) + message.token_count
    saved_in: dict[int, int] = {}
    for event in events:
        if event.outcome == "applied":
            turn = event_turns[event.id]
            saved_in[turn] = saved_in.get(turn, 0) + event.tokens_saved
    points: list[TurnPoint] = []
    stored = appended = saved = 0
    for turn in sorted(appended_in):
        stored += stored_in.get(turn, 0)
        appended += appended_in[turn]
        saved += saved_in.get(turn, 0)
        points.append(TurnPoint(turn=turn, stored=stored, sent=appended - saved))
    return points
