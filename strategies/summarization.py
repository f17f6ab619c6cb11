"""Summarization: replace older groups with one summary written by a model.

:class:`SummarizationStrategy` keeps Agent Framework's keywords and meaning. By default
it acts when the active non-system messages exceed ``target_count + threshold``; it then
keeps the newest groups until at least ``target_count`` messages are kept and replaces
the older ones with one assistant message holding the summary, placed where the first
replaced group was. The summary is a ``summary`` group linked both ways: the change
set's :class:`~strategies.changeset.SummaryInsert` names the groups it replaces, and the
view it leaves records them in :attr:`~strategies.view.GroupView.summary_of`; the
message's metadata also lists the replaced group and message ids.

Differences from Agent Framework, on purpose:

* never summarized: system groups, pinned groups, the newest user request and calls
  still waiting for their result after it (the in-flight tail);
* the input bound (``max_summary_input_tokens``) is checked against the view's cached
  counts (prompt tokens plus the groups' tokens), never by tokenizing a transcript;
* a lone summary is never re-summarized on its own (which would change nothing but the
  wording), so running the strategy twice changes nothing the second time, unless the
  input bound stopped the first run early (the second run then goes on from there);
* with ``trigger``/``target``: when ``trigger`` fires, the fewest oldest groups are
  summarized after which ``target`` (default: the trigger no longer fires) holds, the
  summary counted as one message of unknown (zero) tokens.

A failure of the summarizer (an exception) or an empty summary changes nothing and logs
a warning; the third failure in a row also logs an error, once, until a success. The
empty change set then carries a ``failed`` :class:`~strategies.changeset.Diagnostic`
(the error's type and message, the summarizer and its model), which the store audits;
so does a run where no whole group fits the input bound. Each summary insert names the
summarizer and model that wrote it.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from strategies._selection import in_flight_ids, tokenizer_params, trigger_params
from strategies.base import callable_name, check_tokenizer
from strategies.changeset import ChangeSet, Diagnostic, SummaryInsert
from strategies.messages import Message
from strategies.summarizers import AgentFrameworkSummarizer, Summarizer, accepts_focus
from strategies.tokenizers import Tokenizer
from strategies.triggers import Not, Trigger
from strategies.view import GroupView, View

__all__ = [
    "DEFAULT_SUMMARY_PROMPT",
    "FAILURES_BEFORE_ERROR",
    "SummarizationStrategy",
]

logger = logging.getLogger("chatledger.strategies")

DEFAULT_SUMMARY_PROMPT: Final[str] = """\
You are compacting the history of a conversation between a user and an AI assistant.
Write a faithful summary of the transcript below, in at most five sentences, so that the
assistant can carry on the conversation without it.

Keep:
- what the user wants and any constraints or preferences they stated;
- decisions made, facts established and results obtained from tools;
- questions and tasks that are still open;
- everything stated by any earlier summary in the transcript.

Do not judge, correct or add to the conversation, and do not mention this instruction.
"""
"""The instruction sent to the summarizer when ``prompt`` is None."""

FAILURES_BEFORE_ERROR: Final[int] = 3
"""Consecutive failures after which an error is logged (once, until a success)."""


@dataclass(frozen=True, slots=True)
class _NonSystemMessagesExceed:
    """Agent Framework's condition: active non-system messages above ``n``."""

    n: int

    def __call__(self, view: View) -> bool:
        return _non_system_messages(view.groups) > self.n

    def params(self) -> dict[str, Any]:
        return {"trigger": "NonSystemMessagesExceed", "n": self.n}


def _non_system_messages(groups: Sequence[GroupView]) -> int:
    return sum(g.message_count for g in groups if g.kind != "system")


def _as_summarizer(client: object) -> Summarizer:
    if isinstance(client, Summarizer):
        return client
    if callable(getattr(client, "get_response", None)):
        return AgentFrameworkSummarizer(client)
    raise TypeError(
        f"client must be a Summarizer (async summarize(messages, *, prompt)) or an Agent "
        f"Framework chat client (get_response); got {type(client).__qualname__}"
    )


def _summary_id(group_ids: Sequence[str], text: str) -> str:
    """Deterministic, and different for another text of the same groups (after a restore,
    a new summary of them must not collide with the old one's id)."""
    digest = hashlib.sha256("\x1f".join((*group_ids, text)).encode("utf-8")).hexdigest()
    return f"summary_{digest[:32]}"


class SummarizationStrategy:
    """Summarize the oldest groups with an injected summarizer.

    ``client`` is a :class:`~strategies.summarizers.Summarizer`, or an Agent Framework
    chat client (wrapped in :class:`~strategies.summarizers.AgentFrameworkSummarizer`).
    ``target_count`` and ``threshold`` count active non-system messages, as in Agent
    Framework. ``max_summary_input_tokens`` bounds what is sent (prompt plus whole
    groups, from cached counts; None for no bound). ``tokenizer`` must be the view's
    when given. The summary replaces trusted history: only use a summarizer you trust
    as much as the main model.
    """

    def __init__(
        self,
        *,
        client: Any,
        target_count: int = 4,
        threshold: int | None = 2,
        prompt: str | None = None,
        max_summary_input_tokens: int | None = 8000,
        tokenizer: Tokenizer | None = None,
        trigger: Trigger | None = None,
        target: Trigger | None = None,
    ) -> None:
        if target_count <= 0:
            raise ValueError("target_count must be greater than 0")
        if threshold is not None and threshold < 0:
            raise ValueError("threshold must be 0 or more")
        if max_summary_input_tokens is not None and max_summary_input_tokens <= 0:
            raise ValueError("max_summary_input_tokens must be greater than 0")
        self.client: Summarizer = _as_summarizer(client)
        self.target_count = target_count
        self.threshold = threshold if threshold is not None else 0
        self.prompt = prompt or DEFAULT_SUMMARY_PROMPT
        self.max_summary_input_tokens = max_summary_input_tokens
        self.tokenizer = tokenizer
        self.trigger = trigger
        self.target = target
        self.focus: str | None = None
        """What a requested compaction asked the summary to keep (see
        :func:`strategies.requested.requested`), passed to a summarizer that accepts it."""
        self._failures = 0
        self._error_logged = False
        self._prompt_tokens: dict[str, int] = {}

    @property
    def name(self) -> str:
        """``"SummarizationStrategy"``."""
        return "SummarizationStrategy"

    @property
    def consecutive_failures(self) -> int:
        """Failures since the last successful summary."""
        return self._failures

    def params(self) -> dict[str, Any]:
        """Parameters for the audit row (the prompt as ``"default"`` when not given)."""
        return {
            "client": callable_name(type(self.client)),
            "target_count": self.target_count,
            "threshold": self.threshold,
            "prompt": "default" if self.prompt == DEFAULT_SUMMARY_PROMPT else self.prompt,
            "max_summary_input_tokens": self.max_summary_input_tokens,
            "tokenizer": tokenizer_params(self.tokenizer),
            **trigger_params(self.trigger, self.target),
        }

    @property
    def summarizer_name(self) -> str:
        """The summarizer's qualified class name."""
        return callable_name(type(self.client))

    @property
    def summarizer_model(self) -> str | None:
        """The summarizer's model, when it names one (a string ``model`` attribute)."""
        model = getattr(self.client, "model", None)
        return model if isinstance(model, str) and model else None

    def _empty(self) -> ChangeSet:
        return ChangeSet(strategy=self.name, params=self.params())

    def _failed(self, what: str, error: BaseException | None = None) -> ChangeSet:
        """An empty change set with the ``failed`` diagnostic of ``what`` (and ``error``)."""
        detail = f": {type(error).__name__}: {error}" if error is not None else ""
        failure = Diagnostic(
            kind="failed",
            strategy=self.name,
            message=f"{what}{detail}",
            error_type=None if error is None else callable_name(type(error)),
            error_message=None if error is None else str(error),
            summarizer=self.summarizer_name,
            model=self.summarizer_model,
        )
        return self._empty().with_diagnostics(failure)

    async def plan(self, view: View) -> ChangeSet:
        """Summarize the groups that should go, or change nothing."""
        check_tokenizer(self.name, self.tokenizer, view)
        trigger = self.trigger or _NonSystemMessagesExceed(self.target_count + self.threshold)
        if not trigger(view):
            return self._empty()
        if self.trigger is None and self.target is None:
            wanted = self._reference_selection(view)
        else:
            wanted = self._target_selection(view, self.target or Not(trigger))
        chosen = self._bounded(view, wanted)
        if not chosen:
            if wanted:
                logger.warning(
                    "%s skipped: no whole group fits max_summary_input_tokens=%s",
                    self.name,
                    self.max_summary_input_tokens,
                )
                self._record_failure()
                return self._failed(
                    f"no whole group fits max_summary_input_tokens={self.max_summary_input_tokens}"
                )
            return self._empty()
        if len(chosen) == 1 and chosen[0].kind == "summary":
            return self._empty()
        return await self._summarize(view, chosen)

    # ------------------------------------------------------------------ selection

    def _candidates(self, view: View, groups: Sequence[GroupView]) -> list[GroupView]:
        protected = in_flight_ids(view)
        last_user = view.last_user_index()
        if last_user is not None:
            protected.add(view.groups[last_user].group_id)
        return [
            g for g in groups if g.kind != "system" and not g.pinned and g.group_id not in protected
        ]

    def _reference_selection(self, view: View) -> list[GroupView]:
        """Agent Framework's rule: keep the newest groups holding ``target_count`` messages."""
        non_system = [g for g in view.groups if g.kind != "system"]
        kept = 0
        boundary = len(non_system)
        while boundary > 0:
            if kept >= self.target_count and boundary < len(non_system):
                break
            boundary -= 1
            kept += non_system[boundary].message_count
        return self._candidates(view, non_system[:boundary])

    def _target_selection(self, view: View, target: Trigger) -> list[GroupView]:
        """The shortest oldest run of candidates after which ``target`` holds (all if none)."""
        candidates = self._candidates(view, view.groups)

        def holds(count: int) -> bool:
            gone = {g.group_id for g in candidates[:count]}
            groups = [g for g in view.groups if g.group_id not in gone]
            if count:
                groups.append(_placeholder(candidates[0]))
                groups.sort(key=lambda g: g.order_key)
            return target(replace(view, groups=tuple(groups)))

        if not candidates or holds(0):
            return []
        low, high = 0, len(candidates)
        if not holds(high):
            return candidates
        while high - low > 1:
            middle = (low + high) // 2
            if holds(middle):
                high = middle
            else:
                low = middle
        return candidates[:high]

    def _bounded(self, view: View, wanted: Sequence[GroupView]) -> list[GroupView]:
        """The oldest wanted groups that fit the input bound, with the prompt."""
        if self.max_summary_input_tokens is None:
            return list(wanted)
        budget = self.max_summary_input_tokens - self._count_prompt(view)
        chosen: list[GroupView] = []
        used = 0
        for group in wanted:
            if used + group.token_count > budget:
                if chosen:
                    break
                continue
            chosen.append(group)
            used += group.token_count
        return chosen

    def _count_prompt(self, view: View) -> int:
        """The prompt's tokens with the view's tokenizer (counted once per tokenizer)."""
        name = view.tokenizer_name
        if name not in self._prompt_tokens:
            self._prompt_tokens[name] = view.tokenizer.count_tokens(self.prompt)
        return self._prompt_tokens[name]

    # ------------------------------------------------------------------ summarizing

    async def _summarize(self, view: View, chosen: Sequence[GroupView]) -> ChangeSet:
        group_ids = [g.group_id for g in chosen]
        loaded = await view.messages(group_ids)
        messages = [m for gid in group_ids for m in loaded[gid]]
        try:
            if self.focus is not None and accepts_focus(self.client):
                answer = await self.client.summarize(  # type: ignore[call-arg]
                    messages, prompt=self.prompt, focus=self.focus
                )
            else:
                answer = await self.client.summarize(messages, prompt=self.prompt)
            text = answer.strip()
        except Exception as exc:
            logger.warning("%s skipped: the summarizer failed (%r)", self.name, exc)
            self._record_failure()
            return self._failed("the summarizer raised", exc)
        if not text:
            logger.warning("%s skipped: the summarizer returned no text", self.name)
            self._record_failure()
            return self._failed("the summarizer returned no text")
        self._failures = 0
        self._error_logged = False
        summary = Message.text_message(
            "assistant",
            text,
            message_id=_summary_id(group_ids, text),
            metadata={
                "summary_of_group_ids": list(group_ids),
                "summary_of_message_ids": [m.message_id for m in messages],
            },
        )
        insert = SummaryInsert(
            message=summary,
            replaces=tuple(group_ids),
            summarizer=self.summarizer_name,
            model=self.summarizer_model,
        )
        return ChangeSet(summaries=(insert,), strategy=self.name, params=self.params())

    def _record_failure(self) -> None:
        self._failures += 1
        if self._failures >= FAILURES_BEFORE_ERROR and not self._error_logged:
            self._error_logged = True
            logger.error(
                "%s has failed %d times in a row; history is no longer being summarized",
                self.name,
                self._failures,
            )


def _placeholder(first: GroupView) -> GroupView:
    """The summary to come, for target checks: one message, tokens not yet known."""
    return GroupView(
        group_id=f"{first.group_id}__summary",
        kind="summary",
        turn=first.turn,
        anchor=first.anchor,
        slot=first.slot + 1,
        message_count=1,
        token_count=0,
    )
