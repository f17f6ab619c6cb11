"""Per-tool reduction of tool results (from Agent Framework's .NET side).

:class:`ToolResultReductionStrategy` takes ``reducers``, a mapping of tool name to a
function from the result's text to a shorter text (keep the first lines of a log, the
fields of a JSON reply that matter, ...). For every older tool-call group whose calls
name a registered tool, it emits a :class:`~strategies.changeset.Reduction`: a copy of
the result message whose result text is the reducer's output. The projection shows the
copy; the original stays stored. Results of tools that are not registered are left as
they are, and so are pinned groups, orphan results and the newest
``minimum_preserved_groups`` non-system groups.

A reduced message carries the metadata key :data:`REDUCED_KEY` (the qualified names of
the reducers used, by call id), and a message that has it is never reduced again, so
running the strategy twice changes nothing the second time. A reducer that returns its
input unchanged produces no reduction; one that raises (or returns something other than
a string) leaves that result as it is and logs a warning.

With ``trigger`` (default: always) the strategy acts only when it fires; with a
``target`` (default: the trigger no longer fires; with no trigger, never) it reduces
the oldest groups first and stops once the target holds.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from strategies._selection import fewest_until, reduction_steps, stop_when, trigger_params
from strategies.base import callable_name
from strategies.changeset import ChangeSet, Reduction
from strategies.messages import FunctionCallContent, FunctionResultContent, Message
from strategies.triggers import Trigger
from strategies.view import GroupView, View

__all__ = ["REDUCED_KEY", "ToolResultReductionStrategy"]

logger = logging.getLogger("chatledger.strategies")

REDUCED_KEY: Final[str] = "chatledger_reduced"
"""Metadata key of a reduced result message: reducer qualified names by call id."""

Reducer = Callable[[str], str]


def result_text(result: Any) -> str:
    """A tool result as the text a reducer receives: strings as they are, else JSON."""
    if isinstance(result, str):
        return result
    return json.dumps(result, ensure_ascii=False, separators=(",", ":"))


class ToolResultReductionStrategy:
    """Show reduced versions of registered tools' results; keep the originals stored."""

    def __init__(
        self,
        *,
        reducers: Mapping[str, Reducer],
        trigger: Trigger | None = None,
        target: Trigger | None = None,
        minimum_preserved_groups: int = 0,
    ) -> None:
        if minimum_preserved_groups < 0:
            raise ValueError("minimum_preserved_groups must be 0 or more")
        for tool, reducer in reducers.items():
            if not callable(reducer):
                raise TypeError(f"the reducer for tool {tool!r} is not callable")
        self.reducers: dict[str, Reducer] = dict(reducers)
        self.trigger = trigger
        self.target = target
        self.minimum_preserved_groups = minimum_preserved_groups

    @property
    def name(self) -> str:
        """``"ToolResultReductionStrategy"``."""
        return "ToolResultReductionStrategy"

    def params(self) -> dict[str, Any]:
        """Parameters for the audit row; reducers by qualified name, sorted by tool."""
        return {
            "reducers": {
                tool: callable_name(self.reducers[tool]) for tool in sorted(self.reducers)
            },
            "minimum_preserved_groups": self.minimum_preserved_groups,
            **trigger_params(self.trigger, self.target),
        }

    def _eligible(self, view: View) -> list[GroupView]:
        non_system = [g for g in view.groups if g.kind != "system"]
        preserved = non_system[len(non_system) - self.minimum_preserved_groups :]
        if self.minimum_preserved_groups == 0:
            preserved = []
        kept = {g.group_id for g in preserved}
        return [
            g
            for g in non_system
            if g.kind == "tool_call" and not g.pinned and not g.orphan and g.group_id not in kept
        ]

    async def plan(self, view: View) -> ChangeSet:
        """Reduce the registered tools' results of the eligible groups, oldest first."""
        if self.trigger is not None and not self.trigger(view):
            return ChangeSet(strategy=self.name, params=self.params())
        eligible = self._eligible(view) if self.reducers else []
        loaded = await view.messages(g.group_id for g in eligible)
        reductions: list[Reduction] = []
        per_group: list[int] = []
        for group in eligible:
            found = self._reduce_group(view, group.group_id, loaded[group.group_id])
            reductions.extend(found)
            if found:
                per_group.append(len(reductions))
        target = stop_when(self.trigger, self.target)
        if target is not None:
            reductions = _until(view, reductions, per_group, target)
        return ChangeSet(reductions=tuple(reductions), strategy=self.name, params=self.params())

    def _reduce_group(
        self, view: View, group_id: str, messages: Sequence[Message]
    ) -> list[Reduction]:
        names = {
            c.call_id: c.name
            for m in messages
            for c in m.contents
            if isinstance(c, FunctionCallContent)
        }
        out: list[Reduction] = []
        for message in messages:
            reduced = self._reduce_message(message, names)
            if reduced is not None:
                out.append(
                    Reduction(
                        group_id=group_id,
                        message=reduced,
                        reason="reduced",
                        tokens_before=view.count(message),
                        tokens_after=view.count(reduced),
                    )
                )
        return out

    def _reduce_message(self, message: Message, names: Mapping[str, str]) -> Message | None:
        if REDUCED_KEY in message.metadata:
            return None
        contents = list(message.contents)
        used: dict[str, str] = {}
        for index, content in enumerate(contents):
            if not isinstance(content, FunctionResultContent):
                continue
            reducer = self.reducers.get(names.get(content.call_id, ""))
            if reducer is None:
                continue
            original = result_text(content.result)
            text = _run(reducer, original, content.call_id)
            if text is None or text == original:
                continue
            contents[index] = content.model_copy(update={"result": text})
            used[content.call_id] = callable_name(reducer)
        if not used:
            return None
        metadata = {**message.metadata, REDUCED_KEY: dict(used)}
        return message.model_copy(update={"contents": contents, "metadata": metadata})


def _run(reducer: Reducer, text: str, call_id: str) -> str | None:
    """The reducer's output, or None (logged) when it raises or returns a non-string."""
    try:
        out = reducer(text)
    except Exception as exc:
        logger.warning(
            "reducer %s failed on the result of call %s (%r); result left as is",
            callable_name(reducer),
            call_id,
            exc,
        )
        return None
    if not isinstance(out, str):
        logger.warning(
            "reducer %s returned %s, not a string; result left as is",
            callable_name(reducer),
            type(out).__name__,
        )
        return None
    return out


def _until(
    view: View, reductions: list[Reduction], per_group: list[int], target: Trigger
) -> list[Reduction]:
    """The reductions of the fewest oldest groups after which ``target`` holds."""
    batches = [reductions[a:b] for a, b in zip([0, *per_group], per_group, strict=False)]

    def build(k: int) -> View:
        chosen = reductions[: per_group[k - 1]] if k else []
        return view.apply(ChangeSet(reductions=tuple(chosen)))

    count = fewest_until(view, reduction_steps(view, batches), target, build)
    return reductions[: per_group[count - 1]] if count else []
