"""What a write-back left in the rows it wrote, for the store's cache of active views.

After a compaction the store knows the new state of every group it loaded (the
mirror's groups, read under the write lock) and the rows of the summaries it inserted.
:class:`Written` carries them, as the rows a read would return, so that the cache can
move to the session's next revision without reading those groups again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import RowMapping

from store._read import inserted_message
from strategies.messages import Message
from strategies.view import Totals

if TYPE_CHECKING:
    from store.memory._state import GroupRow as MemGroup

__all__ = ["Written", "written"]

_GROUP_DEFAULTS = {"has_reasoning": False, "pending_calls": 0, "orphan": False}
"""The group columns a summary's insert leaves to their server defaults."""


@dataclass(frozen=True)
class Written:
    """The groups a write-back loaded or inserted, as rows after the write."""

    groups: dict[str, Mapping[str, Any]]
    """Every group loaded or inserted, by id: its row as a read would return it now."""
    messages: dict[str, tuple[tuple[int, Message], ...]]
    """The ``(seq, message)`` pairs of the active summaries inserted."""
    excluded: Totals
    """The session's excluded totals after the write."""


def written(
    loaded: Mapping[str, RowMapping],
    groups: Mapping[str, MemGroup],
    token_counts: Mapping[str, int],
    summary_groups: Iterable[Mapping[str, Any]],
    summary_messages: Iterable[Mapping[str, Any]],
    excluded: Totals,
) -> Written:
    """The rows of the ``loaded`` groups with their new state, and the summaries' rows.

    ``token_counts`` holds the groups whose token count the write changed.
    """
    rows: dict[str, Mapping[str, Any]] = {}
    for group_id, before in loaded.items():
        group = groups[group_id]
        row = dict(before)
        row.update(
            excluded=group.excluded,
            excluded_reason=group.reason,
            excluded_event_id=group.event_id,
            summarized_by=group.summarized_by,
            pinned=group.pinned,
        )
        if group_id in token_counts:
            row["token_count"] = token_counts[group_id]
        rows[group_id] = row
    for values in summary_groups:
        rows[values["group_id"]] = {**_GROUP_DEFAULTS, **values}
    messages: dict[str, list[tuple[int, Message]]] = {}
    for values in summary_messages:
        if not values["excluded"]:
            pairs = messages.setdefault(values["group_id"], [])
            pairs.append((values["seq"], inserted_message(values)))
    shown = {gid: tuple(sorted(pairs, key=lambda p: p[0])) for gid, pairs in messages.items()}
    return Written(rows, shown, excluded)
