"""Optimistic apply: a change set planned on a snapshot applies only if still valid.

A strategy plans outside any write transaction (a summarizer may wait on an LLM). The
write that applies the plan checks the groups it touches against the snapshot
(:func:`still_valid`): it conflicts when one of them changed or vanished since, or when
a group absent from the snapshot (appended or restored since) is active. A group that
another write excluded since is no conflict: what the plan does to it is dropped (its
exclusion is done already; a summary replacing it goes whole), and the rest applies.
Writers sharing a session each compact after their turn, and their plans mostly agree:
they no longer make each other plan again. :func:`plan_and_apply` runs the whole loop:
on a conflict the plan is made again once; a second conflict applies nothing, logs a
warning and records an ``abandoned`` event. A plan that changes nothing but reports a
failed or blocked step records a ``failed`` or ``blocked`` event; one that changes
nothing and reports nothing (done whole by another compaction, say) records none. A
compaction asked for (:class:`~store.models.CompactionRequest`, read with the snapshot)
plans as :class:`~strategies.requested.RequestedStrategy`; once it has an outcome the
request is consumed (unless a newer one replaced it meanwhile), except by an abandoned
compaction, which leaves it to the next.
Every backend compacts through it, with its own snapshot, apply and record; the span
of the compaction and the translation of a strategy's errors are
:class:`~store.contract.BackendBase`'s, around it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from store import telemetry
from store.models import CompactionEvent, CompactionRequest, EventOutcome
from store.rules.changes import Attempt, unapplied_outcome
from strategies.base import CompactionStrategy
from strategies.changeset import ChangeSet
from strategies.requested import RequestedStrategy
from strategies.view import View

__all__ = [
    "CONFLICT",
    "Compaction",
    "Conflict",
    "GroupState",
    "Snapshot",
    "honours_requests",
    "plan_and_apply",
    "planner",
    "still_valid",
]

logger = logging.getLogger("chatledger.store")


class Conflict:
    """What an apply returns when the session changed under its plan."""


CONFLICT = Conflict()


@dataclass(frozen=True, slots=True)
class GroupState:
    """A group as an apply finds it: whether it is excluded, and its fingerprint
    (whatever must not change between a snapshot and an apply)."""

    excluded: bool
    fingerprint: Hashable


def still_valid(
    changes: ChangeSet,
    snapshot: Mapping[str, Hashable],
    current: Mapping[str, GroupState],
) -> ChangeSet | Conflict:
    """What of ``changes``, planned on the ``snapshot`` (each active group's fingerprint
    then), still applies to the touched groups as they are now (``current``):
    :data:`CONFLICT` when one changed or vanished since, or is active but was not in the
    snapshot (appended or restored since: never touched by a stale plan); else
    ``changes`` less what it does to the groups excluded since (by another compaction:
    done already)."""
    taken_out: set[str] = set()
    for group_id in changes.touched_group_ids:
        now = current.get(group_id)
        if group_id not in snapshot:
            if now is not None and not now.excluded:
                return CONFLICT
            continue
        if now is None:
            return CONFLICT
        if now.excluded:
            taken_out.add(group_id)
        elif now.fingerprint != snapshot[group_id]:
            return CONFLICT
    return changes.without(taken_out) if taken_out else changes


class Snapshot(Protocol):
    """What a plan is made on."""

    @property
    def view(self) -> View:
        """The active view at the snapshot."""
        ...

    @property
    def request(self) -> CompactionRequest | None:
        """The compaction asked for and not yet run, at the snapshot."""
        ...


S = TypeVar("S", bound=Snapshot)
R = TypeVar("R")


@dataclass(frozen=True)
class Compaction(Generic[S]):
    """One backend's way to snapshot a session and apply a plan made on the snapshot."""

    snapshot: Callable[[], Awaitable[S]]
    apply: Callable[[S, ChangeSet, Attempt], Awaitable[CompactionEvent | Conflict | None]]
    """Apply in one write, returning :data:`CONFLICT` when the session changed under it."""
    record: Callable[[ChangeSet, Attempt, EventOutcome], Awaitable[CompactionEvent]]
    """Record, in one write, the event of a compaction that applied nothing."""
    consume: Callable[[CompactionRequest], Awaitable[None]]
    """Forget the request a compaction ran for, unless another replaced it since."""


def honours_requests(strategy: CompactionStrategy) -> bool:
    """Whether a compaction by ``strategy`` runs (and so consumes) a request waiting: all
    do but those that say otherwise (``honours_requests = False``: bookkeeping, such as
    adopting a summary a framework wrote, which is not the compaction asked for)."""
    return getattr(strategy, "honours_requests", True) is not False


def planner(strategy: CompactionStrategy, request: CompactionRequest | None) -> CompactionStrategy:
    """What plans: ``strategy``, or, for a request, ``strategy`` run for it (a strategy
    already run for one keeps its own reason; one that does not honour requests plans as
    it is)."""
    if request is None or isinstance(strategy, RequestedStrategy):
        return strategy
    if not honours_requests(strategy):
        return strategy
    return RequestedStrategy(strategy, reason=request.reason, focus=request.focus)


async def plan_and_apply(
    session_id: str,
    strategy: CompactionStrategy,
    compaction: Compaction[S],
    *,
    dry_run: bool,
) -> CompactionEvent | ChangeSet | telemetry.Unchanged:
    """Plan ``strategy`` on a snapshot and apply it if still valid, at most twice.

    Returns the event of the recorded outcome (``applied``, ``failed``, ``blocked`` or
    ``abandoned``), :class:`~store.telemetry.Unchanged` when nothing changed and nothing
    was reported, or with ``dry_run`` the change set, writing nothing.
    """
    started = time.perf_counter()
    changes = ChangeSet()
    request: CompactionRequest | None = None
    for number in (1, 2):
        attempt = Attempt(number, started)
        snapshot = await compaction.snapshot()
        request = snapshot.request if honours_requests(strategy) else None
        changes = await planner(strategy, request).plan(snapshot.view)
        if dry_run:
            return changes
        result = None if changes.is_empty else await compaction.apply(snapshot, changes, attempt)
        if result is None:
            outcome = unapplied_outcome(changes)
            done: CompactionEvent | telemetry.Unchanged = (
                telemetry.Unchanged(snapshot.view, attempt)
                if outcome is None
                else await compaction.record(changes, attempt, outcome)
            )
            return await _consumed(compaction, request, done)
        if not isinstance(result, Conflict):
            return await _consumed(compaction, request, result)
        logger.info(
            "compaction of session %r by %s conflicted with a concurrent write (try %d)",
            session_id,
            strategy.name,
            number,
        )
    logger.warning(
        "compaction of session %r by %s abandoned: the session kept changing under it",
        session_id,
        strategy.name,
    )
    # a request stays for the next compaction: this one never ran it
    return await compaction.record(changes, Attempt(2, started), "abandoned")


async def _consumed(compaction: Compaction[S], request: CompactionRequest | None, result: R) -> R:
    """``result``, once the request it ran for (if any) is consumed."""
    if request is not None:
        await compaction.consume(request)
    return result
