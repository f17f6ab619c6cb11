"""Selective tool-call compaction: exclude all but the newest tool-call groups.

Same name, keywords and defaults as Agent Framework's
``SelectiveToolCallCompactionStrategy``: only ``tool_call`` groups are touched, and the
newest ``keep_last_tool_call_groups`` of them stay. It acts when more than that many
tool-call groups are sent (or when ``trigger`` fires, then stopping oldest-first once it
no longer fires or ``target`` holds).

Unlike the reference, pinned groups and the in-flight tail (calls still waiting for their
result) stay, and orphan results and stale pending calls, which the projection never
sends, neither count nor are touched.
"""

from __future__ import annotations

from typing import Any

from strategies._selection import (
    Goal,
    changeset,
    exclude_oldest,
    in_flight_ids,
    sendable_tool_groups,
    stop_when,
    trigger_params,
)
from strategies.changeset import ChangeSet
from strategies.triggers import Trigger
from strategies.view import GroupView, View

__all__ = [
    "SelectiveToolCallCompactionStrategy",
    "ToolGroupStrategy",
    "old_tool_groups",
    "stop_when",
]


def old_tool_groups(view: View, keep_last: int, trigger: Trigger | None) -> list[GroupView] | None:
    """The tool-call groups that may be compacted, oldest first; None when not acting.

    Shared by :class:`SelectiveToolCallCompactionStrategy` and the tool-result compaction.
    """
    tool_groups = sendable_tool_groups(view)
    if trigger is not None:
        if not trigger(view):
            return None
    elif len(tool_groups) <= keep_last:
        return None
    older = tool_groups[: len(tool_groups) - keep_last] if keep_last > 0 else tool_groups
    keep = in_flight_ids(view)
    return [g for g in older if not g.pinned and g.group_id not in keep]


class ToolGroupStrategy:
    """What the strategies acting on older tool-call groups share: the keywords,
    their validation, ``params()`` and the choice of groups."""

    name = "ToolGroupStrategy"

    def __init__(
        self,
        *,
        keep_last_tool_call_groups: int = 1,
        trigger: Trigger | None = None,
        target: Trigger | None = None,
    ) -> None:
        """Validate and keep the parameters (``keep_last_tool_call_groups >= 0``)."""
        if keep_last_tool_call_groups < 0:
            raise ValueError(
                f"keep_last_tool_call_groups must be at least 0, got {keep_last_tool_call_groups}"
            )
        self.keep_last_tool_call_groups = keep_last_tool_call_groups
        self.trigger = trigger
        self.target = target

    def params(self) -> dict[str, Any]:
        """The parameters, as JSON."""
        return {
            "keep_last_tool_call_groups": self.keep_last_tool_call_groups,
            **trigger_params(self.trigger, self.target),
        }

    def candidates(self, view: View) -> list[GroupView]:
        """The older tool-call groups this strategy may act on, oldest first (none when
        it does not act)."""
        return old_tool_groups(view, self.keep_last_tool_call_groups, self.trigger) or []

    @property
    def stop(self) -> Trigger | None:
        """When to stop acting, oldest first: see :func:`stop_when`."""
        return stop_when(self.trigger, self.target)


class SelectiveToolCallCompactionStrategy(ToolGroupStrategy):
    """Exclude tool-call groups older than the newest ``keep_last_tool_call_groups``."""

    name = "SelectiveToolCallCompactionStrategy"
    reason = "tool_call_compaction"

    async def plan(self, view: View) -> ChangeSet:
        """Exclude the older tool-call groups."""
        chosen = self.candidates(view)
        target = self.stop
        if target is not None:
            chosen = exclude_oldest(view, chosen, Goal(lambda g: 0, 0, target))
        return changeset(self.name, self.params(), chosen, self.reason)
