"""What a session reads as, to compare a session that took messages back with one that
never stored them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from store.contract import HistoryBackend
from strategies.messages import Message
from strategies.view import View


@dataclass(frozen=True)
class Reading:
    """Everything a session reads as, without times and revisions."""

    history: list[tuple[Any, ...]]
    groups: list[tuple[Any, ...]]
    flags: list[tuple[bool, bool, bool]]
    totals: tuple[int, ...]
    context: list[Message]


async def reading(store: HistoryBackend, session_id: str) -> Reading:
    """What ``session_id`` reads as in ``store``."""
    history = [
        (m.seq, m.message, m.group_id, m.kind, m.token_count, m.excluded)
        for m in await store.history(session_id, include_excluded=True)
    ]
    view: View = await store.view(session_id)
    groups = [
        (g.group_id, g.kind, g.turn, g.message_count, g.token_count, g.pending_calls)
        for g in view.groups
    ]
    flags = [(g.orphan, g.has_reasoning, g.pinned) for g in view.groups]
    info = await store.session(session_id)
    totals = (
        info.stored_messages,
        info.stored_groups,
        info.stored_tokens,
        info.active_messages,
        info.active_groups,
        info.active_tokens,
    )
    return Reading(history, groups, flags, totals, await store.context(session_id))
