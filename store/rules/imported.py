"""Turning Agent Framework's compaction annotations into summaries and exclusions.

Messages read by :func:`store.formats.from_agent_framework` keep the reference's
annotations under :data:`store.formats.AF_ANNOTATIONS_KEY`. Importing them:

* a summary message (one that names what it summarizes) becomes a ``summary`` group
  replacing the groups of every message it names (by message id, by Agent Framework
  group id, or by the replaced messages' back link), so that the projection never holds
  both a summary and what it replaced; a summary naming nothing known is stored as an
  ordinary message;
* any other excluded message excludes its whole group (a group is excluded whole), with
  Agent Framework's reason, or ``imported`` when it gave none.

Ids in the annotations are Agent Framework's own; an imported message that was given a
fresh id is found through :data:`store.formats.ORIGINAL_ID_KEY`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from store.formats._common import ORIGINAL_ID_KEY
from store.rules.records import SessionRecord
from strategies.changeset import ChangeSet, Exclusion, SummaryInsert
from strategies.groups import group_id_for
from strategies.messages import Message

if TYPE_CHECKING:
    from store.formats.agent_framework import AFAnnotations

__all__ = [
    "IMPORTED_REASON",
    "ImportPlan",
    "import_changes",
    "plan_import",
    "source_id",
    "source_ids",
]

IMPORTED_REASON = "imported"
"""Exclusion reason of a message excluded by the source without a reason."""


def source_id(message: Message) -> str | None:
    """The id the source system gave ``message`` (its original id when it was replaced)."""
    if ORIGINAL_ID_KEY in message.metadata:
        original = message.metadata[ORIGINAL_ID_KEY]
        return original if isinstance(original, str) else None
    return message.message_id


def source_ids(messages: Sequence[Message]) -> dict[str, str]:
    """Our message id to the source's, for the messages that had one."""
    return {m.message_id: sid for m in messages if (sid := source_id(m)) is not None}


@dataclass(frozen=True)
class ImportPlan:
    """Messages to append as they are, and the summaries to insert afterwards."""

    append: list[Message]
    summaries: list[tuple[Message, AFAnnotations]]
    annotated: list[tuple[Message, AFAnnotations]]


def plan_import(session: SessionRecord | None, messages: Sequence[Message]) -> ImportPlan:
    """Split ``messages`` into plain appends and resolvable summaries."""
    from store.formats.agent_framework import af_annotations  # an import's, not a read's

    by_source = _source_index(session, messages)
    annotated = [(m, a) for m in messages if (a := af_annotations(m)) is not None]
    groups = _af_groups(annotated)
    summaries = []
    held = set()
    for message, ann in annotated:
        if ann.is_summary and _targets(message, ann, annotated, by_source, groups):
            summaries.append((message, ann))
            held.add(message.message_id)
    return ImportPlan(
        append=[m for m in messages if m.message_id not in held],
        summaries=summaries,
        annotated=annotated,
    )


def import_changes(
    session: SessionRecord, messages: Sequence[Message], plan: ImportPlan, source: str
) -> ChangeSet:
    """The change set that reproduces the source's compaction on the stored messages."""
    by_source = _source_index(session, messages)
    groups = _af_groups(plan.annotated)
    inserts = []
    summarized: set[str] = set()
    held = {m.message_id for m, _ in plan.summaries}
    position = {m.message_id: i for i, m in enumerate(messages)}
    for message, ann in plan.summaries:
        if message.message_id in session.rows:
            continue  # imported before
        targets = _targets(message, ann, plan.annotated, by_source, groups)
        summarized.update(targets)
        replaces = _group_ids(session, targets, held, position)
        inserts.append(SummaryInsert(message=message, replaces=tuple(replaces)))
    exclusions = []
    for message, ann in plan.annotated:
        if not ann.excluded or message.message_id in summarized:
            continue
        row = session.rows.get(message.message_id)
        if row is not None:
            reason = ann.exclude_reason or IMPORTED_REASON
            exclusions.append(Exclusion(group_id=row.group_id, reason=reason))
    return ChangeSet(
        exclusions=tuple(exclusions),
        summaries=tuple(inserts),
        strategy=f"import:{source}",
        params={"source": source},
    )


def _source_index(session: SessionRecord | None, messages: Sequence[Message]) -> dict[str, str]:
    index: dict[str, str] = {}
    if session is not None:
        for row in session.rows.values():
            index[row.source_id or row.message.message_id] = row.message.message_id
    for message in messages:
        sid = source_id(message)
        if sid is not None:
            index[sid] = message.message_id
    return index


def _af_groups(annotated: list[tuple[Message, AFAnnotations]]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for message, ann in annotated:
        if ann.group_id is not None:
            groups.setdefault(ann.group_id, []).append(message.message_id)
    return groups


def _targets(
    summary: Message,
    ann: AFAnnotations,
    annotated: list[tuple[Message, AFAnnotations]],
    by_source: dict[str, str],
    groups: dict[str, list[str]],
) -> list[str]:
    """Our ids of the messages a summary replaces, in a stable order."""
    found: list[str] = []
    for sid in ann.summary_of_message_ids:
        if sid in by_source:
            found.append(by_source[sid])
    for gid in ann.summary_of_group_ids:
        found.extend(groups.get(gid, ()))
    own = source_id(summary)
    for message, other in annotated:
        if own is not None and other.summarized_by_summary_id == own:
            found.append(message.message_id)
    return [m for m in dict.fromkeys(found) if m != summary.message_id]


def _group_ids(
    session: SessionRecord, message_ids: list[str], held: set[str], position: dict[str, int]
) -> list[str]:
    """Group ids of the messages, in input order (earlier imports first).

    A held summary, not inserted yet, is named by the group it will create.
    """

    def key(message_id: str) -> tuple[int, int]:
        if message_id in position:
            return (1, position[message_id])
        return (0, session.rows[message_id].seq)

    out: list[str] = []
    for message_id in sorted(message_ids, key=key):
        if message_id in session.rows:
            group_id = session.rows[message_id].group_id
        elif message_id in held:
            group_id = group_id_for(message_id)
        else:
            continue
        if group_id not in out:
            out.append(group_id)
    return out
