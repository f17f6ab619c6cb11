"""The invariants of docs/architecture.md as assertions, for any strategy and change set.

``await assert_invariants(view_before, changeset, strategy=...)`` checks a change set
planned on ``view_before``; ``assert_projection_invariants(messages)`` checks a list of
messages about to be sent to a model. Both raise ``AssertionError`` naming what broke.

Checked:

* the change set touches only active groups, whole (exclusions and summaries name
  group ids; a summary replaces groups that exist; nothing is both excluded and
  summarized; no reduction of an excluded group);
* pinned groups are never excluded nor summarized;
* system groups are kept (unless ``system_may_go=True``);
* the newest user group is kept (unless ``newest_user_may_go=True``);
* every group of ``view_before`` is sent whole or not at all;
* no tool result without its call, no call without its result except after the last
  user message (the in-flight tail); message ids are unique;
* the projection is not empty when the one before was not;
* with ``strategy``: planning again on ``view_before`` gives an equal change set
  (deterministic) and planning on the view it leaves gives an empty one (idempotent).
"""

from __future__ import annotations

from collections.abc import Sequence

from strategies.base import CompactionStrategy
from strategies.changeset import ChangeSet
from strategies.groups import call_ids, result_ids
from strategies.messages import Message
from strategies.view import View

__all__ = [
    "assert_invariants",
    "assert_projection_invariants",
    "changeset_signature",
]


def assert_projection_invariants(messages: Sequence[Message], *, nonempty: bool = True) -> None:
    """Check a projection: pairs complete (except the in-flight tail), ids unique, not empty."""
    if nonempty:
        assert messages, "the projection is empty"
    ids = [m.message_id for m in messages]
    assert len(ids) == len(set(ids)), f"duplicate message ids in projection: {ids}"
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    declared: dict[str, int] = {}
    answered: set[str] = set()
    for index, message in enumerate(messages):
        for call_id in result_ids(message):
            assert call_id in declared or call_id in _own_calls(message), (
                f"result for call {call_id!r} in message {message.message_id!r} "
                "is sent without its call"
            )
            answered.add(call_id)
        for declared_id in call_ids(message):
            if declared_id is not None:
                declared.setdefault(declared_id, index)
    for call_id, index in declared.items():
        if call_id in answered:
            continue
        assert index > last_user, (
            f"call {call_id!r} in message {messages[index].message_id!r} is sent without its "
            "result, and it is not in the in-flight tail (after the last user message)"
        )


def _own_calls(message: Message) -> set[str]:
    return {c for c in call_ids(message) if c is not None}


def changeset_signature(changes: ChangeSet) -> tuple[object, ...]:
    """What two change sets must share to count as equal (ids, reasons, texts, contents)."""
    return (
        tuple((e.group_id, e.reason) for e in changes.exclusions),
        tuple((s.message.model_dump_json(), s.replaces) for s in changes.summaries),
        tuple((r.group_id, r.message.model_dump_json(), r.reason) for r in changes.reductions),
    )


def _check_changeset_shape(
    view: View,
    changes: ChangeSet,
    *,
    system_may_go: bool,
    newest_user_may_go: bool,
) -> None:
    active = {g.group_id: g for g in view.groups}
    excluded = [e.group_id for e in changes.exclusions]
    replaced = [g for s in changes.summaries for g in s.replaces]
    inserted = {s.group_id for s in changes.summaries}
    assert len(excluded) == len(set(excluded)), f"a group is excluded twice: {excluded}"
    assert len(replaced) == len(set(replaced)), f"a group is summarized twice: {replaced}"
    for group_id in (*excluded, *replaced):
        assert group_id in active or group_id in inserted, f"unknown group {group_id!r}"
    both = set(excluded) & set(replaced)
    assert not both, f"groups both excluded and summarized: {sorted(both)}"
    for summary in changes.summaries:
        assert summary.replaces, "a summary that replaces nothing"
        assert summary.group_id not in active, f"summary id {summary.group_id!r} already active"
    gone = set(excluded) | set(replaced)
    for reduction in changes.reductions:
        assert reduction.group_id in active, f"reduction of unknown group {reduction.group_id!r}"
        assert reduction.group_id not in gone, f"reduction of a removed group {reduction.group_id}"
    for group_id in gone & active.keys():
        group = active[group_id]
        assert not group.pinned, f"pinned group {group_id!r} was removed"
        if not system_may_go:
            assert group.kind != "system", f"system group {group_id!r} was removed"
    newest_user = view.last_user_index()
    if newest_user is not None and not newest_user_may_go:
        user_id = view.groups[newest_user].group_id
        assert user_id not in gone, f"the newest user group {user_id!r} was removed"


async def _check_whole_groups(view: View, after: View, projection: Sequence[Message]) -> None:
    sent = {m.message_id for m in projection}
    members = await view.messages()
    for group_id, messages in members.items():
        ids = {m.message_id for m in messages}
        kept = ids & sent
        assert not kept or kept == ids, (
            f"group {group_id!r} is sent in part: {sorted(kept)} of {sorted(ids)}"
        )
    after_ids = [g.group_id for g in after.groups]
    assert len(after_ids) == len(set(after_ids)), "a group appears twice in the view after"
    keys = [g.order_key for g in after.groups]
    assert keys == sorted(keys) and len(keys) == len(set(keys)), f"bad order keys: {keys}"


async def assert_invariants(
    view_before: View,
    changeset: ChangeSet,
    *,
    strategy: CompactionStrategy | None = None,
    system_may_go: bool = False,
    newest_user_may_go: bool = False,
) -> View:
    """Check the invariants (docs/architecture.md) for ``changeset`` planned on ``view_before``.

    ``strategy``, when given, is also checked for
    determinism and idempotence. Returns the view the change set leaves.
    """
    _check_changeset_shape(
        view_before,
        changeset,
        system_may_go=system_may_go,
        newest_user_may_go=newest_user_may_go,
    )
    after = view_before.apply(changeset)
    before_projection = await view_before.project()
    projection = await after.project()
    assert_projection_invariants(projection, nonempty=bool(before_projection))
    await _check_whole_groups(view_before, after, projection)
    stored_before = view_before.message_count + view_before.excluded.messages
    assert after.message_count + after.excluded.messages >= stored_before, (
        "messages vanished: every stored message is either active or counted as excluded"
    )
    if strategy is not None:
        again = await strategy.plan(view_before)
        assert changeset_signature(again) == changeset_signature(changeset), (
            "not deterministic: a second plan on the same view differs"
        )
        second = await strategy.plan(after)
        assert second.is_empty, f"not idempotent: planning on the result gives {second}"
    return after
