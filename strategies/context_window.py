"""Context window: fit the history to a model's window, in two phases.

Same name, keywords and defaults as Agent Framework's
``ContextWindowCompactionStrategy``, plus ``reserved_tokens``, ``start_at_user``,
``min_saving_tokens`` and ``eviction_headroom``.
The input budget is the window minus the output tokens minus ``reserved_tokens``
(instructions and tool schemas the framework adds after compaction). Above
``tool_eviction_threshold`` of the budget, older tool-call groups are collapsed into
summaries (keeping the newest ``keep_last_tool_call_groups``); then, above
``truncation_threshold``, the oldest groups are excluded down to
``tool_eviction_threshold``. Tokens are the view's cached counts.

Unlike the reference, a group is collapsed only when its summary message counts strictly
fewer tokens than the group it replaces: the reference's summary text copies results of
up to 4096 characters, so collapsing short or medium results can save nothing or even
add tokens, while hiding the call's arguments. Such groups stay as they are (truncation
may still exclude them).

Unlike the reference, truncation never drops system groups, the newest user request,
pinned groups or the in-flight tail; with ``start_at_user=True`` the non-system part of
the projection starts at a user message (non-system groups before the first remaining
user group are excluded; Anthropic's API requires it).

Two options, off by default (the reference's behaviour), spare the audit and the store
small compactions. ``eviction_headroom`` (a fraction of the input budget): once tool
eviction fires and has collapsed the older groups, it goes on collapsing the newest
``keep_last_tool_call_groups`` too, oldest first, until the context is at most
``tool_eviction_threshold - eviction_headroom`` of the budget, so that it does not fire
again on the next turn; only groups of earlier turns (before the newest user group, so
never the current turn's, the in-flight tail included), never a pinned group, and only
where a summary saves tokens. ``min_saving_tokens``: a change set that saves fewer tokens than
this is not applied (the eviction and truncation parts are dropped), unless the context
is above the input budget, where every token counts; the ``start_at_user`` exclusions,
a rule of the provider's API rather than a saving, are always applied.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import replace
from typing import Any

from strategies._selection import changeset, combine, protected_ids, trigger_params
from strategies.base import check_tokenizer
from strategies.changeset import ChangeSet, Diagnostic, SummaryInsert
from strategies.tokenizers import Tokenizer
from strategies.tool_result import ToolResultCompactionStrategy
from strategies.triggers import Always, Trigger
from strategies.truncation import TruncationStrategy
from strategies.view import GroupView, View

__all__ = ["ContextWindowCompactionStrategy"]

logger = logging.getLogger("chatledger.strategies")


def _check_fraction(name: str, value: float) -> None:
    if not 0.0 < value <= 1.0:
        raise ValueError(f"{name} must be in (0.0, 1.0], got {value}")


class ContextWindowCompactionStrategy:
    """Tool-result eviction, then truncation, against a budget derived from the window."""

    name = "ContextWindowCompactionStrategy"

    def __init__(
        self,
        *,
        max_context_window_tokens: int,
        max_output_tokens: int,
        tokenizer: Tokenizer | None = None,
        tool_eviction_threshold: float = 0.5,
        truncation_threshold: float = 0.8,
        keep_last_tool_call_groups: int = 4,
        preserve_first_user_group: bool = False,
        reserved_tokens: int = 0,
        start_at_user: bool = False,
        min_saving_tokens: int = 0,
        eviction_headroom: float = 0.0,
        trigger: Trigger | None = None,
        target: Trigger | None = None,
    ) -> None:
        """Validate the window, thresholds, reserve and options, and derive the budgets."""
        if max_context_window_tokens <= 0:
            raise ValueError("max_context_window_tokens must be positive")
        if not 0 <= max_output_tokens < max_context_window_tokens:
            raise ValueError("max_output_tokens must be >= 0 and < max_context_window_tokens")
        if not 0 <= reserved_tokens < max_context_window_tokens - max_output_tokens:
            raise ValueError(
                "reserved_tokens must be >= 0 and leave room in the window after the output"
            )
        _check_fraction("tool_eviction_threshold", tool_eviction_threshold)
        _check_fraction("truncation_threshold", truncation_threshold)
        if truncation_threshold < tool_eviction_threshold:
            raise ValueError("truncation_threshold must be >= tool_eviction_threshold")
        if min_saving_tokens < 0:
            raise ValueError(f"min_saving_tokens must be at least 0, got {min_saving_tokens}")
        if not 0.0 <= eviction_headroom <= tool_eviction_threshold:
            raise ValueError(
                f"eviction_headroom must be in [0.0, tool_eviction_threshold "
                f"({tool_eviction_threshold})], got {eviction_headroom}"
            )
        self.max_context_window_tokens = max_context_window_tokens
        self.max_output_tokens = max_output_tokens
        self.tokenizer = tokenizer
        self.tool_eviction_threshold = tool_eviction_threshold
        self.truncation_threshold = truncation_threshold
        self.keep_last_tool_call_groups = keep_last_tool_call_groups
        self.preserve_first_user_group = preserve_first_user_group
        self.reserved_tokens = reserved_tokens
        self.start_at_user = start_at_user
        self.min_saving_tokens = min_saving_tokens
        self.eviction_headroom = eviction_headroom
        self.trigger = trigger
        self.target = target
        self.input_budget_tokens = max_context_window_tokens - max_output_tokens - reserved_tokens
        """Tokens the projection may use."""
        self.tool_eviction_tokens = int(self.input_budget_tokens * tool_eviction_threshold)
        self.truncation_tokens = int(self.input_budget_tokens * truncation_threshold)
        self.eviction_target_tokens = self.tool_eviction_tokens - int(
            self.input_budget_tokens * eviction_headroom
        )
        """Where tool eviction stops once it fires (the eviction threshold without headroom)."""
        self._eviction = ToolResultCompactionStrategy(
            keep_last_tool_call_groups=keep_last_tool_call_groups
        )
        self._eviction_of_all = ToolResultCompactionStrategy(keep_last_tool_call_groups=0)
        self.forced = False
        """Whether it runs as asked for (:meth:`as_requested`): as if both thresholds
        were crossed."""

    def as_requested(self, *, focus: str | None = None) -> ContextWindowCompactionStrategy:
        """This strategy as it runs when compaction was asked for
        (:func:`strategies.requested.requested`): old tool results collapsed and the
        oldest groups truncated down to the tool-eviction threshold, whatever the
        thresholds say (its trigger, if any, fires; ``focus`` has no summarizer here)."""
        forced = copy.copy(self)
        forced.forced = True
        if self.trigger is not None:
            forced.trigger = Always
        return forced

    def params(self) -> dict[str, Any]:
        """The parameters, as JSON."""
        return {
            "max_context_window_tokens": self.max_context_window_tokens,
            "max_output_tokens": self.max_output_tokens,
            "tokenizer": None if self.tokenizer is None else self.tokenizer.name,
            "tool_eviction_threshold": self.tool_eviction_threshold,
            "truncation_threshold": self.truncation_threshold,
            "keep_last_tool_call_groups": self.keep_last_tool_call_groups,
            "preserve_first_user_group": self.preserve_first_user_group,
            "reserved_tokens": self.reserved_tokens,
            "start_at_user": self.start_at_user,
            "min_saving_tokens": self.min_saving_tokens,
            "eviction_headroom": self.eviction_headroom,
            **trigger_params(self.trigger, self.target),
        }

    def _truncation(self, view: View) -> TruncationStrategy:
        return TruncationStrategy(
            max_n=max(1, self.tool_eviction_tokens if self.forced else self.truncation_tokens),
            compact_to=max(1, self.tool_eviction_tokens),
            tokenizer=view.tokenizer,
            preserve_first_user_group=self.preserve_first_user_group,
            target=self.target,
        )

    async def plan(self, view: View) -> ChangeSet:
        """Evict old tool results, then truncate, then (optionally) start at a user."""
        check_tokenizer(self.name, self.tokenizer, view)
        params = self.params()
        if self.trigger is not None and not self.trigger(view):
            return ChangeSet(strategy=self.name, params=params)
        parts, current = await self._compaction(view)
        if self._too_small(view, current):
            parts, current = [], view
        if self.start_at_user:
            parts.append(changeset(self.name, params, _before_first_user(current), "start_at_user"))
            current = current.apply(parts[-1])
        # the inner truncation's own target is below the budget: only the budget counts
        changes = replace(combine(parts, strategy=self.name, params=params), diagnostics=())
        return changes.with_diagnostics(self._overflow(current))

    def _overflow(self, after: View) -> Diagnostic | None:
        """The ``blocked`` diagnostic (logged) when ``after`` is above the input budget."""
        if after.token_count <= self.input_budget_tokens:
            return None
        logger.warning(
            "%s could not fit protected groups in the input budget: %d tokens left, budget %d",
            self.name,
            after.token_count,
            self.input_budget_tokens,
        )
        pinned = sum(1 for g in after.groups if g.pinned)
        return Diagnostic(
            kind="blocked",
            strategy=self.name,
            message=(
                f"protected groups ({pinned} pinned) keep {after.token_count} tokens "
                f"above the input budget of {self.input_budget_tokens}"
            ),
            tokens=after.token_count,
            budget=self.input_budget_tokens,
        )

    def _too_small(self, view: View, after: View) -> bool:
        """Whether going from ``view`` to ``after`` saves less than ``min_saving_tokens``
        while ``view`` fits the input budget."""
        saved = view.token_count - after.token_count
        return (
            self.min_saving_tokens > 0
            and saved < self.min_saving_tokens
            and view.token_count <= self.input_budget_tokens
        )

    async def _compaction(self, view: View) -> tuple[list[ChangeSet], View]:
        """The tool eviction (with its headroom) and the truncation, in order, and the
        view they leave."""
        parts: list[ChangeSet] = []
        current = view
        if self.forced or current.token_count > self.tool_eviction_tokens:
            parts.append(_saving_only(current, await self._eviction.plan(current)))
            current = current.apply(parts[-1])
            if self.eviction_headroom > 0 and current.token_count > self.eviction_target_tokens:
                parts.append(await self._headroom(current))
                current = current.apply(parts[-1])
        if current.token_count > (
            self.tool_eviction_tokens if self.forced else self.truncation_tokens
        ):
            parts.append(await self._truncation(current).plan(current))
            current = current.apply(parts[-1])
        return parts, current

    async def _headroom(self, view: View) -> ChangeSet:
        """Collapse the tool-call groups eviction kept, oldest first, while the context is
        above :attr:`eviction_target_tokens`: only groups of earlier turns (before the
        newest user group), and only summaries that save tokens."""
        changes = _saving_only(view, await self._eviction_of_all.plan(view))
        earlier = {g.group_id for g in view.groups[: view.last_user_index() or 0]}
        excess = view.token_count - self.eviction_target_tokens
        kept: list[SummaryInsert] = []
        for summary in changes.summaries:
            if excess <= 0 or not earlier.issuperset(summary.replaces):
                break
            kept.append(summary)
            excess -= _saving(view, summary)
        return replace(changes, summaries=tuple(kept))


def _saving(view: View, summary: SummaryInsert) -> int:
    """Tokens ``summary`` saves on ``view`` (positive for the summaries kept)."""
    return sum(view.group(g).token_count for g in summary.replaces) - view.count(summary.message)


def _saving_only(view: View, changes: ChangeSet) -> ChangeSet:
    """``changes`` without the summaries that count no fewer tokens than what they replace."""
    kept = tuple(s for s in changes.summaries if _saving(view, s) > 0)
    return changes if len(kept) == len(changes.summaries) else replace(changes, summaries=kept)


def _before_first_user(view: View) -> list[GroupView]:
    """Non-system, unprotected groups before the first user group (none if no user)."""
    first = next((i for i, g in enumerate(view.groups) if g.kind == "user"), None)
    if first is None:
        return []
    protected = protected_ids(view)
    return [g for g in view.groups[:first] if g.kind != "system" and g.group_id not in protected]
