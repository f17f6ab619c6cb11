"""The spans and metrics of the store's operations.

Each store method that the issue of a context or a write goes through opens one span
(:data:`~store.telemetry.names.SPAN_APPEND`, ``SPAN_CONTEXT``, ``SPAN_COMPACT``,
``SPAN_IMPORT``) with the session and the tenant, and adds what it did: tokens stored,
tokens sent, and for a compaction its outcome, counts before and after, groups touched
and attempts. With no provider configured every call returns :data:`OFF`, whose methods
do nothing and compute nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from store.models import CompactionEvent, Phase
from store.rules.changes import Attempt
from store.telemetry import names
from store.telemetry.providers import Instruments, instruments
from strategies.changeset import ChangeSet
from strategies.view import View

__all__ = ["OFF", "CompactionSpan", "Operation", "Unchanged", "compaction", "operation"]


@dataclass(frozen=True, slots=True)
class Unchanged:
    """A compaction that changed nothing and reported nothing: no audit row."""

    view: View
    """The view it planned on."""
    attempt: Attempt


class Operation:
    """One store operation being traced (see :func:`operation`)."""

    __slots__ = ("_span", "_tools")

    def __init__(self, tools: Instruments | None, span: Any) -> None:
        self._tools = tools
        self._span = span

    def stored(self, messages: int, tokens: int) -> None:
        """The operation stored ``messages`` messages of ``tokens`` tokens."""
        if self._span is not None:
            self._span.set_attribute(names.MESSAGES_AFTER, messages)
            self._span.set_attribute(names.TOKENS_AFTER, tokens)
        if self._tools is not None and self._tools.tokens_stored is not None and tokens:
            self._tools.tokens_stored.add(tokens)

    def sent(self, view: View) -> None:
        """The operation handed out ``view``'s messages, to be sent to a model."""
        if self._span is not None:
            self._span.set_attribute(names.MESSAGES_AFTER, view.message_count)
            self._span.set_attribute(names.TOKENS_AFTER, view.token_count)
        if self._tools is not None and self._tools.tokens_sent is not None:
            self._tools.tokens_sent.add(view.token_count)

    def event(self, event: CompactionEvent | None) -> None:
        """The operation recorded ``event`` (an import's)."""
        if self._span is None:
            return
        if event is None:
            self._span.set_attribute(names.OUTCOME, "unchanged")
            return
        _describe(self._span, event)


OFF = Operation(None, None)
"""The operation of a store with no provider configured: records nothing."""


@contextmanager
def operation(name: str, tenant: str, session_id: str | None) -> Iterator[Operation]:
    """Trace the store operation ``name`` on one session, or on the tenant when
    ``session_id`` is None (nothing when off)."""
    tools = instruments()
    if tools is None:
        yield OFF
        return
    if tools.tracer is None:
        yield Operation(tools, None)
        return
    attributes = {names.TENANT: tenant}
    if session_id is not None:
        attributes[names.CONVERSATION_ID] = session_id
    with tools.tracer.start_as_current_span(name, attributes=attributes) as span:
        yield Operation(tools, span)


class CompactionSpan:
    """One compaction being traced and counted (see :func:`compaction`)."""

    __slots__ = ("_phase", "_span", "_strategy", "_tools")

    def __init__(self, tools: Instruments | None, span: Any, phase: Phase, strategy: str) -> None:
        self._tools = tools
        self._span = span
        self._phase = phase
        self._strategy = strategy

    def finish(
        self, result: CompactionEvent | ChangeSet | Unchanged
    ) -> CompactionEvent | ChangeSet | None:
        """Describe ``result`` on the span, count it, and return what ``compact`` returns."""
        if isinstance(result, ChangeSet):
            if self._span is not None:
                self._span.set_attribute(names.OUTCOME, "dry_run")
            return result
        if isinstance(result, Unchanged):
            self._unchanged(result)
            return None
        if self._span is not None:
            _describe(self._span, result)
        self._count(result.outcome, result.duration_seconds)
        if self._tools is not None and self._tools.tokens_saved is not None:
            if result.outcome == "applied" and result.tokens_saved > 0:
                attributes = {names.PHASE: self._phase, names.STRATEGY: result.strategy}
                self._tools.tokens_saved.add(result.tokens_saved, attributes)
        return result

    def _unchanged(self, result: Unchanged) -> None:
        if self._span is not None:
            view = result.view
            for key, value in (
                (names.OUTCOME, "unchanged"),
                (names.MESSAGES_BEFORE, view.message_count),
                (names.MESSAGES_AFTER, view.message_count),
                (names.TOKENS_BEFORE, view.token_count),
                (names.TOKENS_AFTER, view.token_count),
                (names.ATTEMPTS, result.attempt.number),
            ):
                self._span.set_attribute(key, value)
        self._count("unchanged", result.attempt.duration())

    def _count(self, outcome: str, duration: float | None) -> None:
        tools = self._tools
        if tools is None:
            return
        attributes = {names.OUTCOME: outcome, names.STRATEGY: self._strategy}
        if tools.outcomes is not None:
            tools.outcomes.add(1, attributes)
        if tools.duration is not None and duration is not None:
            tools.duration.record(duration, attributes)


def _describe(span: Any, event: CompactionEvent) -> None:
    """Set a compaction event's attributes on ``span``."""
    for key, value in (
        (names.PHASE, event.phase),
        (names.STRATEGY, event.strategy),
        (names.OUTCOME, event.outcome),
        (names.MESSAGES_BEFORE, event.messages_before),
        (names.MESSAGES_AFTER, event.messages_after),
        (names.TOKENS_BEFORE, event.tokens_before),
        (names.TOKENS_AFTER, event.tokens_after),
        (names.GROUPS_EXCLUDED, len(event.excluded)),
        (names.GROUPS_SUMMARIZED, sum(len(g) for g in event.summarized.values())),
        (names.GROUPS_REDUCED, len(event.reduced)),
        (names.ATTEMPTS, event.attempts),
    ):
        span.set_attribute(key, value)


_OFF_COMPACTION = CompactionSpan(None, None, "manual", "")


@contextmanager
def compaction(
    tenant: str, session_id: str, phase: Phase, strategy: str
) -> Iterator[CompactionSpan]:
    """Trace and count one compaction (nothing when off)."""
    tools = instruments()
    if tools is None:
        yield _OFF_COMPACTION
        return
    if tools.tracer is None:
        yield CompactionSpan(tools, None, phase, strategy)
        return
    attributes = {
        names.CONVERSATION_ID: session_id,
        names.TENANT: tenant,
        names.PHASE: phase,
        names.STRATEGY: strategy,
    }
    with tools.tracer.start_as_current_span(names.SPAN_COMPACT, attributes=attributes) as span:
        yield CompactionSpan(tools, span, phase, strategy)
