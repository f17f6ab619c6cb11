"""The rules of branches, shared by every backend: where a session may be cut, what a
fork inherits, and the errors of what branches refuse (``docs/branches.md``).

A fork (:meth:`~store.contract.HistoryBackend.fork`) and a rewind
(:meth:`~store.contract.HistoryBackend.rewind`) cut a session's conversation after one
of its appended messages, the *cut*. The prefix (every appended message up to and
including the cut) keeps its groups; a group with members on both sides of the cut is
*split*: refused when a tool call and its result would be parted (:func:`check_cut`),
else the prefix keeps the members before the cut, annotated again
(:func:`trimmed_group`). A summary is carried over when every group it replaced lies in
the prefix (:func:`carried`); otherwise it is dropped and the groups it replaced come
back as active.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from store.errors import InvalidInput
from strategies.groups import AnnotationState, GroupInfo, Tail, annotate, call_links
from strategies.messages import Message

__all__ = [
    "FORK_PREFIX",
    "FORK_STRATEGY",
    "REWIND_STRATEGY",
    "TAIL_PREFIX",
    "carried",
    "check_cut",
    "cut_refusal",
    "fork_params",
    "new_fork_id",
    "new_tail_id",
    "rewind_params",
    "shared_refusal",
    "summary_fates",
    "tail_refusal",
    "tail_restore_params",
    "tail_source_refusal",
    "taken_refusal",
    "trimmed_group",
]

FORK_PREFIX = "fork-"
"""What the id of a fork made without ``new_session_id`` starts with."""
TAIL_PREFIX = "tail-"
"""What the id of a superseded tail starts with."""
FORK_STRATEGY = "fork"
"""The ``strategy`` of a fork's first event (phase ``fork``)."""
REWIND_STRATEGY = "rewind"
"""The ``strategy`` of a rewind's event (phase ``rewind``)."""


def new_fork_id() -> str:
    """A fresh session id for a fork made without one."""
    return f"{FORK_PREFIX}{uuid.uuid4().hex}"


def new_tail_id() -> str:
    """A fresh session id for a superseded tail."""
    return f"{TAIL_PREFIX}{uuid.uuid4().hex}"


def check_cut(
    verb: str,
    session_id: str,
    cut: str,
    before: Sequence[Message],
    after: Sequence[Message],
) -> None:
    """Refuse a cut after message ``cut`` that parts a tool call from its result.

    ``before`` and ``after`` are the members, on each side of the cut, of the groups
    that have members on both sides (in stored order): a call declared before and
    answered after, or a result stored before the call it answers comes after, is
    :class:`~store.errors.InvalidInput` naming both messages.
    """
    if not before or not after:
        return
    declared: dict[str, str] = {}
    answered: dict[str, str] = {}
    for message in before:
        calls, results = call_links(message)
        for call_id in calls:
            if call_id is not None:
                declared.setdefault(call_id, message.message_id)
        for call_id in results:
            answered.setdefault(call_id, message.message_id)
    for message in after:
        calls, results = call_links(message)
        for call_id in results:
            if call_id in declared:
                raise _cut_error(verb, session_id, cut, call_id, declared[call_id], message)
        for maybe in calls:
            if maybe is not None and maybe in answered:
                raise _cut_error(verb, session_id, cut, maybe, answered[maybe], message)


def _cut_error(
    verb: str, session_id: str, cut: str, call_id: str, kept: str, parted: Message
) -> InvalidInput:
    return InvalidInput(
        f"cannot {verb} session {session_id!r} at message {cut!r}: it parts tool call "
        f"{call_id!r} of message {kept!r} from message {parted.message_id!r}"
    )


def trimmed_group(
    members: Sequence[Message], *, turn: int, first_position: int
) -> tuple[GroupInfo, Tail | None]:
    """The group of a split group's ``members`` before the cut (stored order, the cut
    last), and the annotation tail after the cut: annotated again from the group's
    start, ``turn`` and ``first_position`` being the stored group's."""
    start = turn - 1 if members[0].role == "user" else turn
    annotation = annotate(members, AnnotationState(position=first_position, turn=start))
    group_id = annotation.message_groups[-1][1]
    return annotation.groups[group_id], annotation.state.tail


def carried(replaced: Iterable[str], prefix_groups: set[str], whole: set[str]) -> bool:
    """Whether a summary of the groups ``replaced`` is carried over to the prefix: every
    group it replaced is in the prefix (``prefix_groups``) whole (``whole``: the prefix
    groups not split by the cut)."""
    return all(g in prefix_groups and g in whole for g in replaced)


def tail_refusal(session_id: str, owner: str | None, event_id: str | None) -> InvalidInput:
    """The error of a write to a superseded tail."""
    if owner is None:
        return InvalidInput(f"session {session_id!r} is a superseded tail: it is read-only")
    return InvalidInput(
        f"session {session_id!r} is a superseded tail of {owner!r}: it is read-only; "
        f"bring it back with restore({owner!r}, event_id={event_id!r})"
    )


def shared_refusal(what: str, session_id: str, message_id: str | None, other: str) -> InvalidInput:
    """The error of an operation that would change, for one branch, a row another holds."""
    held = "its messages" if message_id is None else f"message {message_id!r}"
    return InvalidInput(
        f"cannot {what} session {session_id!r}: {held} are shared with branch {other!r}"
        if message_id is None
        else f"cannot {what} session {session_id!r}: {held} is shared with branch {other!r}"
    )


def summary_fates(
    summaries: Iterable[tuple[str, Sequence[str]]], prefix_groups: set[str], whole: set[str]
) -> tuple[list[str], list[str]]:
    """Which summaries a prefix carries over, and which it drops.

    ``summaries`` are the source's summary groups in the order they were stored, each
    with the groups it replaced; ``prefix_groups`` and ``whole`` are as for
    :func:`carried`. A carried summary counts as a prefix group, whole (a summary of
    summaries is carried when they are). Returns the carried summaries and the dropped
    ones: those not carried that replaced a group of the prefix, directly or through a
    dropped summary (a summary of messages after the cut only is neither). The groups
    a dropped summary replaced come back as active.
    """
    inside = set(prefix_groups)
    complete = set(whole)
    kept: list[str] = []
    dropped: list[str] = []
    for summary_id, replaced in summaries:
        if carried(replaced, inside, complete):
            kept.append(summary_id)
            inside.add(summary_id)
            complete.add(summary_id)
        elif any(g in inside or g in dropped for g in replaced):
            dropped.append(summary_id)
    return kept, dropped


def cut_refusal(verb: str, session_id: str, cut: str, why: str) -> InvalidInput:
    """The error of a cut that is not an appended message of the session (``why``:
    ``"it is not one of its messages"``, ``"it is a summary"``)."""
    return InvalidInput(f"cannot {verb} session {session_id!r} at message {cut!r}: {why}")


def taken_refusal(new_session_id: str) -> InvalidInput:
    """The error of a fork to an id the tenant holds already (tails included)."""
    return InvalidInput(f"cannot fork to session {new_session_id!r}: it exists already")


def tail_source_refusal(session_id: str, owner: str | None) -> InvalidInput:
    """The error of a fork of a superseded tail."""
    return InvalidInput(
        f"cannot fork session {session_id!r}: it is a superseded tail of {owner!r}; "
        f"fork {owner!r} with at= one of the tail's messages instead"
    )


def fork_params(
    source_session_id: str,
    at: str | None,
    *,
    inherited: dict[str, int],
    dropped_summaries: Sequence[str],
) -> dict[str, Any]:
    """The ``params`` of a fork's event. ``inherited`` counts ``groups`` (every group of
    the fork, carried summaries included), ``excluded_groups``, ``summaries`` (carried),
    ``reductions`` (reduced messages) and ``pins`` (pinned groups)."""
    return {
        "source_session_id": source_session_id,
        "at": at,
        "inherited": dict(inherited),
        "dropped_summaries": list(dropped_summaries),
    }


def rewind_params(to: str | None, tail_session_id: str, messages: int) -> dict[str, Any]:
    """The ``params`` of a rewind's event (``messages``: the appended messages after
    ``to``, which the tail set aside)."""
    return {"to": to, "tail_session_id": tail_session_id, "messages": messages}


def tail_restore_params(event_id: str, tail_session_id: str | None) -> dict[str, Any]:
    """The ``params`` of the restore event that brought a tail back (``event_id``: the
    event that set it aside), naming the tail it set aside in turn (None: none)."""
    return {"event_id": event_id, "tail_session_id": tail_session_id}
