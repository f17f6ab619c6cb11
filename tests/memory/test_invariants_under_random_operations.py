"""Generated conversations and random operations on the in-memory store: the invariants of
``docs/architecture.md`` after every step."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store.errors import InvalidInput
from store.memory import InMemoryHistoryStore
from strategies.groups import Annotation, AnnotationState, annotate
from strategies.messages import Message
from tests.conformance.toy_strategies import (
    TOKENIZER,
    ExcludeOldest,
    ReduceResults,
    SummarizeOldest,
)
from tests.groups.conversations import conversations
from tests.strategies.conversations import Chat, chats
from tests.strategies.invariants import assert_projection_invariants

OPS = (
    "append",
    "append",
    "exclude",
    "summarize",
    "reduce",
    "restore_event",
    "restore_group",
    "pin",
    "unpin",
    "context",
    "retract",
)


class Runner:
    """Applies operations to one session and checks the invariants after each."""

    def __init__(self, messages: list[Message], *, pairs: bool = True) -> None:
        self.pairs = pairs
        """Check that calls and results are sent together (false for adversarial shapes)."""
        self.store = InMemoryHistoryStore(tokenizer=TOKENIZER)
        self.todo = list(messages)
        self.appended: list[Message] = []
        self.state = AnnotationState()
        """The annotation state after :attr:`appended`, kept apart from the store's."""
        self.before: list[AnnotationState] = []
        """The annotation state before each message of :attr:`appended`."""
        self.placed: dict[str, str] = {}
        """Each appended message's group, as the annotations of the appends say."""
        self.frozen: set[str] = set()
        """Groups of early results compacted before an append (rule 10)."""
        self.frozen_orphans: set[str] = set()
        """Those of :attr:`frozen` that were orphans."""
        self.retracted = False
        """Whether a message was taken back (its ``seq`` is lost when a summary followed)."""

    async def run(self, ops: list[tuple[str, int]]) -> None:
        for op, n in ops:
            await self.step(op, n)
            if self.appended:
                await self.check()
        await self.step("append", len(self.todo))
        if self.appended:
            await self.check()

    async def step(self, op: str, n: int) -> None:
        if op == "append":
            chunk, self.todo = self.todo[: n + 1], self.todo[n + 1 :]
            frozen = await self.compacted_waiting_groups()
            self.frozen |= frozen
            self.frozen_orphans |= {g for g in frozen if self.state.waiting_groups[g].orphan}
            await self.store.append("s", chunk)
            for message in chunk:  # one by one: the state before each, for a retraction
                self.before.append(self.state)
                self.expect(annotate([message], self.state, frozen=frozen))
            self.appended += chunk
            return
        if not self.appended:
            return
        if op == "retract":
            await self.retract()
            return
        if op in ("exclude", "summarize", "reduce"):
            strategy: Any = {
                "exclude": ExcludeOldest(n % 3 + 1),
                "summarize": SummarizeOldest(n % 3 + 2),
                "reduce": ReduceResults(),
            }[op]
            await self.store.compact("s", strategy)
        elif op == "restore_event":
            events = await self.store.audit("s")
            if events:
                await self.store.restore("s", event_id=events[n % len(events)].id)
        elif op in ("restore_group", "pin", "unpin"):
            await self.group_op(op, n)
        else:
            pending = self.todo[: n % 3]
            sent = await self.store.context("s", pending=pending)
            if self.pairs:
                assert_projection_invariants(sent, nonempty=False)

    async def retract(self) -> None:
        """Take back the newest message: the session is then as it was before that message
        was appended (its state is the one its append started from), and the message is
        appended again later."""
        try:
            taken = await self.store.retract_last("s")
        except InvalidInput as error:  # compaction touched it, or it joined two groups
            assert any(w in str(error) for w in ("excluded", "summarized", "reduced", "split"))
            return
        message = self.appended.pop()
        assert taken is not None and taken.message_id == message.message_id
        del self.placed[message.message_id]
        self.state = self.before.pop()
        self.todo.insert(0, message)
        self.retracted = True

    async def compacted_waiting_groups(self) -> set[str]:
        """Groups of early results that compaction excluded or summarized (or that are
        gone): rule 10 says a call arriving now does not join them."""
        if not self.state.waiting_groups:
            return set()
        stored = await self.store.history("s", include_excluded=True)
        excluded = {m.group_id: m.excluded for m in stored}
        return {g for g in self.state.waiting_groups if excluded.get(g, True)}

    def expect(self, annotation: Annotation) -> None:
        """Apply ``annotation`` to :attr:`placed` as a store applies it."""
        for absorbed, into in annotation.merged.items():
            for message_id, group_id in self.placed.items():
                if group_id == absorbed:
                    self.placed[message_id] = into
        self.placed.update(annotation.message_groups)
        self.state = annotation.state

    async def group_op(self, op: str, n: int) -> None:
        groups = sorted({m.group_id for m in await self.store.history("s", include_excluded=True)})
        target = groups[n % len(groups)]
        if op == "restore_group":
            await self.store.restore("s", group_ids=[target])
        elif op == "pin":
            await self.store.pin("s", [target])
        else:
            await self.store.unpin("s", [target])

    async def check(self) -> None:
        store = self.store
        stored = await store.history("s", include_excluded=True)
        # nothing lost, nothing duplicated, seq gapless (unique after a retraction),
        # content unchanged
        seqs = [m.seq for m in stored]
        assert seqs == (sorted(set(seqs)) if self.retracted else list(range(1, len(stored) + 1)))
        originals = [m for m in stored if m.kind != "summary"]
        assert [m.message for m in originals] == self.appended
        # every message is where the annotations of the appends put it, given the early
        # results compacted before each append (rule 10 of docs/groups.md); without
        # such a compaction, that is where annotating the whole history puts it
        assert {m.message_id: m.group_id for m in originals} == self.placed
        if not self.frozen:
            assert self.placed == dict(annotate(self.appended).message_groups)
        roles: dict[str, set[str]] = {}
        for m in originals:
            roles.setdefault(m.group_id, set()).add(m.message.role)
        for group_id in self.frozen_orphans & set(roles):
            # a compacted orphan joined no call: a group of tool messages only
            assert roles[group_id] == {"tool"}, group_id
        view = await store.view("s")
        sent = await store.context("s")
        if self.pairs:
            assert_projection_invariants(sent, nonempty=False)
        assert len({m.message_id for m in sent}) == len(sent)
        members: dict[str, set[str]] = {}
        for m in stored:
            members.setdefault(m.group_id, set()).add(m.message_id)
            # a message shares its group's exclusion state
            assert m.excluded == (m.group_id not in {g.group_id for g in view.groups})
        ids = {m.message_id for m in sent}
        for group_id, group_ids in members.items():
            assert not (ids & group_ids) or group_ids <= ids, f"{group_id} sent in part"
        await self.check_links(stored, view.groups)
        stats = await store.stats("s")
        assert (stats.stored_messages, stats.active_messages, stats.active_tokens) == (
            len(stored),
            view.message_count,
            view.token_count,
        )
        assert stats.active_groups + view.excluded.groups == stats.stored_groups

    async def check_links(self, stored: list[Any], active: Any) -> None:
        events = {e.id: e for e in await self.store.audit("s")}
        inserted = {g for e in events.values() for g in e.summarized}
        active_ids = {g.group_id for g in active}
        for group in await self.store.excluded("s"):
            assert group.event_id in events, f"exclusion of {group.group_id} has no event"
            if group.reason == "summarized":
                assert group.summary_group_id in active_ids | {
                    g.group_id for g in await self.store.excluded("s")
                }
        for g in active:
            if g.kind == "summary":
                assert g.group_id in inserted
                assert not (set(g.summary_of) & active_ids), "a summary beside what it replaced"
        for m in stored:
            if m.reduced is not None:
                assert m.reduced_event_id in events


_SETTINGS = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
_OPS = st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 9)), max_size=14)


@_SETTINGS
@given(chat=chats(), ops=_OPS)
def test_invariants_hold_after_every_operation(chat: Chat, ops: list[tuple[str, int]]) -> None:
    asyncio.run(Runner(chat.messages).run(ops))


@_SETTINGS
@given(messages=conversations(max_steps=16), ops=_OPS)
def test_store_invariants_hold_on_adversarial_shapes(
    messages: list[Message], ops: list[tuple[str, int]]
) -> None:
    """Reused and duplicated call ids, results before calls, orphans, custom roles."""
    asyncio.run(Runner(messages, pairs=False).run(ops))


def test_restoring_a_summary_whose_group_was_merged_away_since() -> None:
    """An early result is summarized, restored, then absorbed by its late call's group;
    restoring again finds the summary naming a group that no longer exists."""
    from strategies.messages import (
        FunctionCallContent,
        FunctionResultContent,
        OtherContent,
        TextContent,
    )

    def user(i: int) -> Message:
        return Message(role="user", contents=[TextContent(text="")], message_id=f"m{i}")

    messages = [
        user(0),
        user(1),
        Message(
            role="assistant",
            message_id="m2",
            contents=[FunctionCallContent(call_id="c1", name="lookup", arguments={"q": "c1"})],
        ),
        Message(
            role="tool",
            message_id="m3",
            contents=[
                OtherContent(
                    kind="mcp_server_tool_result",
                    payload={"out": 1},
                    call_id="c_a",
                    pairing="result",
                )
            ],
        ),
        Message(
            role="assistant",
            message_id="m4",
            contents=[FunctionCallContent(call_id="c_a", name="lookup", arguments={"q": "c_a"})],
        ),
        Message(
            role="tool",
            message_id="m5",
            contents=[FunctionResultContent(call_id="c1", result="r")],
        ),
        *(user(i) for i in range(6, 15)),
    ]
    ops = [("append", 3), ("summarize", 1), ("restore_event", 0), ("append", 0)]
    asyncio.run(Runner(messages, pairs=False).run([*ops, ("restore_event", 1)]))
    asyncio.run(Runner(messages, pairs=False).run([*ops, ("restore_event", 0)]))


def _second_result_history() -> list[Message]:
    """An early result ``m1`` of call ``m7``, and ``m15``, a second result for it."""
    from strategies.messages import FunctionCallContent, FunctionResultContent, TextContent

    def user(i: int) -> Message:
        return Message(role="user", contents=[TextContent(text="")], message_id=f"m{i}")

    def answer(i: int) -> Message:
        result = FunctionResultContent(call_id="c_a", result=f"r{i}")
        return Message(role="tool", message_id=f"m{i}", contents=[result])

    calls = [
        FunctionCallContent(call_id=c, name="lookup", arguments={"q": c})
        for c in ("call_1_é", "c_a", "call_1_é")
    ]
    return [
        user(0),
        answer(1),
        *(user(i) for i in range(2, 7)),
        Message(role="assistant", message_id="m7", contents=calls),
        *(user(i) for i in range(8, 15)),
        answer(15),
        user(16),
    ]


def test_a_second_result_for_a_call_whose_early_result_was_excluded() -> None:
    """The early result ``m1`` is excluded before its call ``m7`` comes, so the call does
    not join it and stays pending: ``m15``, a second result for the id, answers it. Had
    ``m1`` joined, ``m15`` would be an orphan; the store and annotating the whole history
    then place ``m15`` differently, and both are right. ``m7`` also declares
    ``call_1_é`` twice, which is ambiguous: those two calls stay pending."""
    runner = Runner(_second_result_history(), pairs=False)
    asyncio.run(runner.run([("append", 0), ("append", 0), ("exclude", 0)]))

    async def outcome() -> None:
        stored = {m.message_id: m for m in await runner.store.history("s", include_excluded=True)}
        assert stored["m1"].group_id == "group_m1" and stored["m1"].excluded
        assert stored["m15"].group_id == stored["m7"].group_id == "group_m7"
        group = next(g for g in (await runner.store.view("s")).groups if g.group_id == "group_m7")
        assert (group.message_count, group.pending_calls, group.orphan) == (2, 2, False)

    asyncio.run(outcome())


def test_retracting_a_second_result_for_a_call_whose_early_result_was_excluded() -> None:
    """The history above: taking back ``m15`` leaves ``m7`` pending, so that ``m15``
    appended again joins it; taking back a user message before it changes nothing."""
    runner = Runner(_second_result_history(), pairs=False)
    appends = [("append", 0), ("append", 0), ("exclude", 0), ("append", 13)]
    asyncio.run(runner.run([*appends, ("retract", 0), ("retract", 0), ("append", 0)]))
    asyncio.run(runner.run([("retract", 0), ("retract", 0), ("retract", 0)]))
