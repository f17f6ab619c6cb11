"""Taking back a session's newest appended message: the rules every backend follows.

:func:`plan_retraction` decides what the session looks like without its newest appended
message, from the session's appended messages and the group each is stored in
(summaries are not appended: they are never retracted). Annotation is deterministic and
incremental, so annotating every message but the last *as the appends did* gives
exactly the state the store held before the last one was appended: the unanswered calls
(a retracted result's call is pending again), the results waiting for their call, the
turn, the tail, and the new annotation of the message's group (its kind, pending calls,
reasoning flag), or nothing when the message was alone in it.

The appends annotated with what compaction had done by then: a result stored before its
call, and compacted before the call arrived, is *frozen* and the call does not join it
(``docs/groups.md``, rule 10), where annotating the whole history would join them. The
stored groups say which calls joined their early result and which did not, so
:func:`plan_retraction` replays the history with, at each such call, the frozen groups
its append must have had (:class:`Replay`), and checks that the replay gives the stored
groups.

A retraction is refused (:class:`~store.errors.InvalidInput`) when the message's group
is excluded or summarized, when the message is reduced, when taking it back would split
its group (a result that answered calls of two groups merged them, or a call joined a
result stored before it), and when the replay does not give the stored groups (a call
that did not join its compacted early result and was merged with it later, by a result
answering both: the stored groups no longer tell which it was).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from store.errors import InvalidInput
from store.rules.records import SessionRecord
from strategies.groups import AnnotationState, GroupInfo, annotate, call_links
from strategies.messages import Message

__all__ = [
    "RETRACT_STRATEGY",
    "Replay",
    "Retraction",
    "apply_retraction",
    "check_retractable",
    "plan_retraction",
]

RETRACT_STRATEGY = "retract"
"""The strategy name of a retraction's audit event (phase ``manual``)."""


@dataclass(frozen=True, slots=True)
class Retraction:
    """What taking back the newest appended message changes."""

    message_id: str
    group_id: str
    group: GroupInfo | None
    """The group's annotation without the message; None when the message was alone."""
    state: AnnotationState
    """The annotation state without the message."""

    def params(self, seq: int, role: str) -> dict[str, Any]:
        """The parameters the audit event records."""
        return {"message_id": self.message_id, "seq": seq, "role": role, "group_id": self.group_id}


def check_retractable(
    session_id: str,
    message_id: str,
    *,
    excluded: bool,
    reason: str | None,
    reduced: bool,
) -> None:
    """Refuse to retract a message that compaction has touched already."""
    if excluded:
        what = "summarized" if reason == "summarized" else f"excluded ({reason or 'no reason'})"
        raise InvalidInput(
            f"cannot retract message {message_id!r} of session {session_id!r}: its group is "
            f"{what}; restore it first"
        )
    if reduced:
        raise InvalidInput(
            f"cannot retract message {message_id!r} of session {session_id!r}: it is reduced; "
            "restore the reducing event first"
        )


class Replay:
    """Annotates a session's appended messages again, as its appends did (a retraction
    replays all but the last; a fork or a rewind, :mod:`store.rules.branching`, the
    prefix up to its cut).

    ``stored`` maps each appended message to the group it is stored in. A call whose id
    a result stored before it waits for is annotated on its own, with that result's
    group frozen when the stored groups keep the call apart from it: its append found
    the result compacted. Everything else is annotated in runs, since ``frozen`` plays
    no part there.
    """

    def __init__(self, stored: Mapping[str, str]) -> None:
        self.stored = stored
        self.state = AnnotationState()
        self.placed: dict[str, str] = {}
        """Each message annotated so far: the group the replay puts it in."""
        self.groups: dict[str, GroupInfo] = {}
        """The annotation of every group so far, by id."""
        self._members: dict[str, list[str]] = {}
        self._results: set[str] = set()
        """Call ids that a message annotated so far holds a result for."""

    def add(self, messages: Sequence[Message]) -> None:
        """Annotate ``messages``, appended after those annotated so far."""
        start = 0
        for index, message in enumerate(messages):
            calls, results = call_links(message)
            if any(c is not None and c in self._results for c in calls):
                self._annotate(messages[start:index])
                self._annotate([message], self._frozen(message, calls))
                start = index + 1
            self._results.update(results)
        self._annotate(messages[start:])

    def _frozen(self, message: Message, calls: list[str | None]) -> set[str]:
        """The waiting groups of ``message``'s calls that were frozen when it was
        appended: those the stored groups keep apart from it."""
        own = self.stored.get(message.message_id)
        frozen: set[str] = set()
        for call_id in calls:
            waiting = self.state.early_results.get(call_id) if call_id else None
            if waiting is None:
                continue
            held = self._members.get(waiting, ())
            if not held or self.stored.get(held[0]) != own:
                frozen.add(waiting)
        return frozen

    def _annotate(self, messages: Sequence[Message], frozen: Collection[str] = ()) -> None:
        if not messages:
            return
        annotation = annotate(messages, self.state, frozen=frozen)
        for absorbed, into in annotation.merged.items():
            moved = self._members.pop(absorbed, [])
            self._members.setdefault(into, []).extend(moved)
            self.placed.update((message_id, into) for message_id in moved)
            self.groups.pop(absorbed, None)
        for message_id, group_id in annotation.message_groups:
            self.placed[message_id] = group_id
            self._members.setdefault(group_id, []).append(message_id)
        self.groups.update(annotation.groups)
        self.state = annotation.state


def plan_retraction(
    session_id: str, appended: Sequence[Message], groups: Sequence[str]
) -> Retraction:
    """Plan the retraction of ``appended[-1]``.

    ``appended`` are the session's appended messages in ``seq`` order and ``groups`` the
    id of the group each one is stored in.
    """
    stored = {m.message_id: g for m, g in zip(appended, groups, strict=True)}
    last = appended[-1]
    group_id = stored[last.message_id]
    replay = Replay(stored)
    replay.add(appended[:-1])
    state, info = replay.state, replay.groups.get(group_id)
    rest = [m for m, g in stored.items() if g == group_id and m != last.message_id]
    split = sorted({replay.placed[m] for m in rest} - {group_id})
    replay.add([last])
    _check_replayed(session_id, last.message_id, stored, replay.placed)
    if split:
        raise InvalidInput(
            f"cannot retract message {last.message_id!r} of session {session_id!r}: it "
            f"joined group {group_id!r} to others ({', '.join(split)}), and taking it back "
            "would split the group"
        )
    return Retraction(
        message_id=last.message_id,
        group_id=group_id,
        group=info if rest else None,
        state=state,
    )


def _check_replayed(
    session_id: str, message_id: str, stored: Mapping[str, str], placed: Mapping[str, str]
) -> None:
    """Refuse when replaying the appends does not give the stored groups: the state the
    replay ends in would not be the session's."""
    differ = [m for m, g in stored.items() if placed.get(m) != g]
    if differ:
        first = differ[0]
        raise InvalidInput(
            f"cannot retract message {message_id!r} of session {session_id!r}: annotating "
            f"its history again does not give its stored groups (message {first!r} is in "
            f"{stored[first]!r}, the annotation puts it in {placed.get(first)!r})"
        )


def apply_retraction(session: SessionRecord, retraction: Retraction, seq: int) -> None:
    """Take the message out of ``session``'s records (the caller records the event).

    The message's ``seq`` is given back when it was the session's last one, so that
    ``seq`` stays gapless.
    """
    del session.rows[retraction.message_id]
    group = session.groups[retraction.group_id]
    if retraction.group is None:
        del session.groups[retraction.group_id]
    else:
        info = retraction.group
        group.message_ids.remove(retraction.message_id)
        group.kind = info.kind
        group.has_reasoning = info.has_reasoning
        group.pending_calls = info.pending_calls
        group.orphan = info.orphan
    session.state = retraction.state
    if seq == session.next_seq - 1:
        session.next_seq = seq
