"""The prefix of a session's records that a fork or a rewind keeps (``docs/branches.md``).

:func:`cut_prefix` takes a whole :class:`~store.rules.records.SessionRecord` and the
cut, and returns the records of the prefix, copied (each row keeps its
:attr:`~store.rules.records.MessageRecord.key`, so that a redaction finds every
branch holding it), by the shared rules of :mod:`store.rules.branching`: a cut through a
tool exchange is refused, a split group keeps its members up to the cut annotated
again, a summary is carried over only when every group it replaced lies whole in the
prefix (else the groups it replaced are active again), and exclusions, reductions and
pins go along as they are. The annotation state goes on from the cut: the prefix's
appends are replayed as they were made (:class:`~store.rules.retract.Replay`), with
the groups the session stored.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from store.rules.branching import check_cut, cut_refusal, summary_fates
from store.rules.records import GroupRecord, MessageRecord, SessionRecord
from store.rules.retract import Replay
from strategies.groups import AnnotationState

__all__ = ["Prefix", "cut_prefix"]


@dataclass
class Prefix:
    """The records a branch starts from, and what it took over."""

    rows: dict[str, MessageRecord]
    groups: dict[str, GroupRecord]
    state: AnnotationState
    next_seq: int
    """The ``seq`` of the branch's next message: after the highest it holds."""
    carried_summaries: list[str]
    dropped_summaries: list[str]
    """Group ids of the summaries left out (see :func:`~store.rules.branching.summary_fates`)."""
    set_aside: int
    """The session's appended messages after the cut."""

    def inherited(self) -> dict[str, int]:
        """The counts a fork's event records (``params["inherited"]``)."""
        groups = self.groups.values()
        return {
            "groups": len(self.groups),
            "excluded_groups": sum(g.excluded for g in groups),
            "summaries": len(self.carried_summaries),
            "reductions": sum(r.reduced is not None for r in self.rows.values()),
            "pins": sum(g.pinned for g in groups),
        }


def cut_prefix(session: SessionRecord, cut: str | None, verb: str) -> Prefix:
    """The records of ``session`` up to and including the appended message ``cut``
    (None: nothing), for a ``verb`` (``fork``, ``rewind``) that refuses a cut which is
    not an appended message of the session or that parts a tool call from its result."""
    appended = session.appended()
    index = -1
    if cut is not None:
        row = session.rows.get(cut)
        if row is None:
            raise cut_refusal(verb, session.session_id, cut, "it is not one of its messages")
        if row.slot != 0:
            raise cut_refusal(verb, session.session_id, cut, "it is a summary")
        index = appended.index(row)
    kept, after = appended[: index + 1], appended[index + 1 :]
    kept_ids = {r.message.message_id for r in kept}
    groups: dict[str, GroupRecord] = {}
    split: set[str] = set()
    for group in sorted(session.groups.values(), key=lambda g: g.order_key):
        if group.kind == "summary":
            continue
        inside = [m for m in group.message_ids if m in kept_ids]
        if not inside:
            continue
        if len(inside) < len(group.message_ids):
            split.add(group.group_id)
            before = sorted((session.rows[m] for m in inside), key=lambda r: r.seq)
            beyond = sorted(
                (session.rows[m] for m in group.message_ids if m not in kept_ids),
                key=lambda r: r.seq,
            )
            check_cut(
                verb,
                session.session_id,
                cut or "",
                [r.message for r in before],
                [r.message for r in beyond],
            )
        groups[group.group_id] = replace(group, message_ids=inside)
    replay = Replay({r.message.message_id: r.group_id for r in kept})
    replay.add([r.message for r in kept])
    for group_id in split:
        info = replay.groups[group_id]
        group = groups[group_id]
        group.kind = info.kind
        group.has_reasoning = info.has_reasoning
        group.pending_calls = info.pending_calls
        group.orphan = info.orphan
    summaries = sorted(
        (g for g in session.groups.values() if g.kind == "summary"),
        key=lambda g: session.rows[g.message_ids[0]].seq,
    )
    carried, dropped = summary_fates(
        ((g.group_id, g.summary_of) for g in summaries), set(groups), set(groups) - split
    )
    for group_id in carried:
        summary = session.groups[group_id]
        groups[group_id] = replace(summary, message_ids=list(summary.message_ids))
    for group in groups.values():
        if group.summarized_by is not None and group.summarized_by not in groups:
            _reactivate(group)
    rows = {
        message_id: replace(session.rows[message_id])
        for group in groups.values()
        for message_id in group.message_ids
    }
    rows = dict(sorted(rows.items(), key=lambda item: item[1].seq))
    return Prefix(
        rows=rows,
        groups=groups,
        state=replay.state,
        next_seq=1 + max((r.seq for r in rows.values()), default=0),
        carried_summaries=carried,
        dropped_summaries=dropped,
        set_aside=len(after),
    )


def _reactivate(group: GroupRecord) -> None:
    """A group whose summary was left out: active again, neither summarized nor excluded."""
    group.excluded = False
    group.reason = None
    group.event_id = None
    group.excluded_at = None
    group.summarized_by = None
