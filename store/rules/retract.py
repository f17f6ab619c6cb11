"""Taking back a session's newest appended message: the rules every backend follows.

:func:`plan_retraction` decides what the session looks like without its newest appended
message, from the session's appended messages (summaries are not appended: they are
never retracted). Annotation is deterministic and incremental, so annotating every
message but the last gives exactly the state the store held before the last one was
appended: the unanswered calls (a retracted result's call is pending again), the turn,
the tail, and the new annotation of the message's group (its kind, pending calls,
reasoning flag), or nothing when the message was alone in it.

A retraction is refused (:class:`~store.errors.InvalidInput`) when the message's group
is excluded or summarized, when the message is reduced, and when taking it back would
split its group (a result that answered calls of two groups merged them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from store.errors import InvalidInput
from store.rules.records import SessionRecord
from strategies.groups import AnnotationState, GroupInfo, annotate_all
from strategies.messages import Message

__all__ = [
    "RETRACT_STRATEGY",
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


def plan_retraction(
    session_id: str, appended: Sequence[Message], group_id: str, members: Sequence[str]
) -> Retraction:
    """Plan the retraction of ``appended[-1]``.

    ``appended`` are the session's appended messages in ``seq`` order; ``group_id`` is the
    stored group of the last one and ``members`` the ids of that group's messages.
    """
    last = appended[-1]
    annotation = annotate_all(appended[:-1])
    placed = dict(annotation.message_groups)
    rest = [m for m in members if m != last.message_id]
    split = sorted({placed.get(m, "") for m in rest} - {group_id})
    if split:
        raise InvalidInput(
            f"cannot retract message {last.message_id!r} of session {session_id!r}: it "
            f"joined group {group_id!r} to others ({', '.join(split)}), and taking it back "
            "would split the group"
        )
    info = annotation.groups.get(group_id) if rest else None
    return Retraction(
        message_id=last.message_id, group_id=group_id, group=info, state=annotation.state
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
