"""A stateful test of branches: a store against a plain model of its histories.

A hypothesis rule-based state machine forks, rewinds, appends, compacts, restores
(groups, and the tails of rewinds), redacts, retracts and deletes, on each backend,
and keeps a model that knows nothing of groups nor of compaction: for each session
(and each superseded tail) the list of the messages its history holds, as shared
:class:`Row` objects (a fork's prefix holds its parent's rows, a tail the session's as
it was), each redacted or not. After every step each branch's appended messages
(summaries left out) must be the model's, redacted ones as tombstones, and
``sessions()``, ``branches()`` and the parent of every session must say what the model
says; every context must keep the projection's invariants.

Each example runs on its own event loop and tenant, and closes its store in
``teardown``.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from store import HistoryStore
from store.contract import HistoryBackend
from store.errors import InvalidInput
from store.memory import InMemoryHistoryStore
from store.rules.identity import is_tombstone
from strategies.base import CompactionStrategy
from strategies.groups import call_links
from strategies.messages import Message
from tests.conformance.toy_strategies import (
    TOKENIZER,
    ExcludeOldest,
    ReduceResults,
    SummarizeOldest,
)
from tests.groups.conversations import assistant, call, reasoning, result, tool, user
from tests.strategies.invariants import assert_projection_invariants

SETTINGS = settings(
    # a longer run: CHATLEDGER_MACHINE_RUN=200x40 (examples x steps)
    max_examples=int(os.environ.get("CHATLEDGER_MACHINE_RUN", "30x25").split("x")[0]),
    stateful_step_count=int(os.environ.get("CHATLEDGER_MACHINE_RUN", "30x25").split("x")[1]),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
MAX_SESSIONS = 5
UNITS = ("user", "text", "tool", "reasoning_tool")
STRATEGIES: tuple[CompactionStrategy, ...] = (
    SummarizeOldest(2),
    SummarizeOldest(3),
    ExcludeOldest(1),
    ReduceResults(),
)
_tenants = itertools.count()
T = TypeVar("T")


@dataclass(eq=False)
class Row:
    """One stored message; branches holding it hold this same object."""

    message: Message
    redacted: bool = False

    def expected(self) -> tuple[str, Message | str]:
        return self.message.message_id, "<tombstone>" if self.redacted else self.message


@dataclass
class TailModel:
    """A superseded tail: its id, its rows, and the event that set it aside."""

    session_id: str
    rows: list[Row]
    event_id: str


@dataclass
class Model:
    """What each branch holds."""

    sessions: dict[str, list[Row]] = field(default_factory=dict)
    parents: dict[str, str | None] = field(default_factory=dict)
    tails: dict[str, list[TailModel]] = field(default_factory=dict)
    spent: list[tuple[str, str]] = field(default_factory=list)
    """(session, event) of rewinds and restores whose tail was restored or deleted."""

    def branches(self) -> dict[str, list[Row]]:
        """Every session and tail, by id, in the order they were made (tail ids are
        random: drawing from them sorted would make the draws depend on them)."""
        held = dict(self.sessions)
        for tails in self.tails.values():
            held.update((t.session_id, t.rows) for t in tails)
        return held

    def shared(self, holder: str, row: Row) -> bool:
        """Whether a branch other than ``holder`` holds ``row``."""
        return any(
            any(r is row for r in rows) for name, rows in self.branches().items() if name != holder
        )


def parts_exchange(rows: list[Row], index: int) -> bool:
    """Whether a cut after ``rows[index]`` parts a call from its result."""
    declared = {c for r in rows[: index + 1] for c in call_links(r.message)[0] if c is not None}
    return any(c in declared for r in rows[index + 1 :] for c in call_links(r.message)[1])


class BranchMachine(RuleBasedStateMachine):
    """Drive one store and the model with the same operations."""

    def __init__(self, url: str | None) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.tenant = f"b{next(_tenants)}"
        self.store: HistoryBackend = self.run(self._open(url))
        self.model = Model()
        self.ids = itertools.count()
        self.forks = itertools.count()

    async def _open(self, url: str | None) -> HistoryBackend:
        if url is None:
            return InMemoryHistoryStore(tenant=self.tenant, tokenizer=TOKENIZER)
        return await HistoryStore.open(url, tenant=self.tenant, tokenizer=TOKENIZER)

    def run(self, awaitable: Awaitable[T]) -> T:
        """Run one coroutine on the machine's loop."""
        return self.loop.run_until_complete(awaitable)

    def refused(self, awaitable: Awaitable[Any], match: str | None = None) -> None:
        """The call must raise :class:`InvalidInput` (matching ``match``)."""
        with pytest.raises(InvalidInput, match=match):
            self.run(awaitable)

    def teardown(self) -> None:
        """Close the store, then the loop."""
        try:
            self.run(self.store.aclose())
            self.run(self.loop.shutdown_asyncgens())
        finally:
            self.loop.close()

    # -- drawing ----------------------------------------------------------------------

    def _unit(self, kind: str) -> list[Message]:
        n = next(self.ids)
        if kind == "user":
            return [user(f"u{n}", f"question {n}")]
        if kind == "text":
            return [assistant(f"a{n}", f"answer {n}")]
        exchange = [
            assistant(f"c{n}", call(f"call{n}")),
            tool(f"t{n}", result(f"call{n}", f"r{n}")),
        ]
        if kind == "tool":
            return exchange
        return [assistant(f"r{n}", reasoning(f"thinking {n}")), *exchange]

    def _batch(self, data: st.DataObject) -> list[Message]:
        kinds = data.draw(st.lists(st.sampled_from(UNITS), min_size=1, max_size=3))
        return [m for kind in kinds for m in self._unit(kind)]

    def _session(self, data: st.DataObject) -> str:
        return data.draw(st.sampled_from(sorted(self.model.sessions)))

    def _tails(self) -> list[tuple[str, TailModel]]:
        return [(owner, t) for owner, tails in sorted(self.model.tails.items()) for t in tails]

    # -- writes -----------------------------------------------------------------------

    @initialize(data=st.data())
    def start(self, data: st.DataObject) -> None:
        """A first session."""
        batch = [*self._unit("user"), *self._batch(data)]
        self.run(self.store.append("s", batch))
        self.model.sessions["s"] = [Row(m) for m in batch]
        self.model.parents["s"] = None
        self.model.tails["s"] = []

    @rule(data=st.data())
    def append(self, data: st.DataObject) -> None:
        """Append a batch of whole units to one session."""
        session = self._session(data)
        batch = self._batch(data)
        self.run(self.store.append(session, batch))
        self.model.sessions[session].extend(Row(m) for m in batch)

    @precondition(lambda self: len(self.model.sessions) < MAX_SESSIONS)
    @rule(data=st.data(), where=st.sampled_from(["last", "message", "tail"]))
    def fork(self, data: st.DataObject, where: str) -> None:
        """Fork a session at its end, at one of its messages or at one of its tails'."""
        source = self._session(data)
        held = self.model.sessions[source]
        rows, at = held, None
        tails = [t for t in self.model.tails[source] if t.rows]
        if where == "message" and held:
            at = data.draw(st.sampled_from([r.message.message_id for r in held]))
        elif where == "tail" and tails:
            tail = data.draw(st.sampled_from(tails))
            at = data.draw(st.sampled_from([r.message.message_id for r in tail.rows]))
            if all(r.message.message_id != at for r in held):
                rows = tail.rows  # the session's own message wins: both prefixes are one
        ids = [r.message.message_id for r in rows]
        index = len(rows) - 1 if at is None else ids.index(at)
        name = f"f{next(self.forks)}"
        if at is not None and parts_exchange(rows, index):
            self.refused(self.store.fork(source, at=at, new_session_id=name), match=at)
            return
        info = self.run(self.store.fork(source, at=at, new_session_id=name))
        assert info.parent_session_id == source
        cut = rows[index].message.message_id if rows else None
        assert info.fork_message_id == cut
        self.model.sessions[name] = list(rows[: index + 1])
        self.model.parents[name] = source
        self.model.tails[name] = []
        (event,) = self.run(self.store.audit(name))
        assert (event.phase, event.params["source_session_id"], event.params["at"]) == (
            "fork",
            source,
            cut,
        )

    @rule(data=st.data())
    def fork_to_a_taken_id(self, data: st.DataObject) -> None:
        """A fork to an id the tenant holds is refused."""
        taken = data.draw(st.sampled_from(list(self.model.branches())))
        self.refused(self.store.fork(self._session(data), new_session_id=taken), match=taken)

    @rule(data=st.data())
    def rewind(self, data: st.DataObject) -> None:
        """Rewind a session to one of its messages, or to nothing."""
        session = self._session(data)
        rows = self.model.sessions[session]
        ids = [r.message.message_id for r in rows]
        to = data.draw(st.none() | st.sampled_from(ids)) if ids else None
        index = -1 if to is None else ids.index(to)
        if to is not None and parts_exchange(rows, index):
            self.refused(self.store.rewind(session, to=to), match=to)
            return
        event = self.run(self.store.rewind(session, to=to))
        if index == len(rows) - 1:
            assert event is None
            return
        assert event is not None and event.phase == "rewind"
        tail = event.params["tail_session_id"]
        assert event.params == {
            "to": to,
            "tail_session_id": tail,
            "messages": len(rows) - index - 1,
        }
        self.model.tails[session].append(TailModel(tail, list(rows), event.id))
        self.model.sessions[session] = rows[: index + 1]

    @precondition(lambda self: any(self.model.tails.values()))
    @rule(data=st.data())
    def restore_tail(self, data: st.DataObject) -> None:
        """Bring a tail back; what the session held beyond it becomes a tail."""
        owner, tail = data.draw(st.sampled_from(self._tails()))
        current = self.model.sessions[owner]
        beyond = [r for r in current if not any(r is t for t in tail.rows)]
        event = self.run(self.store.restore(owner, event_id=tail.event_id))
        assert event is not None and event.params["event_id"] == tail.event_id
        new_tail = event.params["tail_session_id"]
        assert (new_tail is None) == (not beyond)
        self.model.tails[owner].remove(tail)
        self.model.spent.append((owner, tail.event_id))
        if new_tail is not None:
            self.model.tails[owner].append(TailModel(new_tail, list(current), event.id))
        self.model.sessions[owner] = list(tail.rows)

    @precondition(lambda self: any(s in self.model.sessions for s, _ in self.model.spent))
    @rule(data=st.data())
    def restore_spent_tail(self, data: st.DataObject) -> None:
        """A rewind whose tail was restored or deleted cannot be restored again."""
        live = [(s, e) for s, e in self.model.spent if s in self.model.sessions]
        session, event_id = data.draw(st.sampled_from(live))
        self.refused(self.store.restore(session, event_id=event_id))

    @rule(data=st.data(), strategy=st.sampled_from(STRATEGIES))
    def compact(self, data: st.DataObject, strategy: CompactionStrategy) -> None:
        """Compact one session: its history (and every other branch) stays as it is."""
        self.run(self.store.compact(self._session(data), strategy))

    @rule(data=st.data())
    def restore_group(self, data: st.DataObject) -> None:
        """Restore an excluded group of one session."""
        session = self._session(data)
        excluded = self.run(self.store.excluded(session))
        if excluded:
            group = data.draw(st.sampled_from([g.group_id for g in excluded]))
            self.run(self.store.restore(session, group_ids=[group]))

    @rule(data=st.data())
    def redact(self, data: st.DataObject) -> None:
        """Redact a message of a session or of a tail: every branch holding it sees it."""
        held = {name: rows for name, rows in self.model.branches().items() if rows}
        if not held:
            return
        name = data.draw(st.sampled_from(list(held)))
        row = data.draw(st.sampled_from(held[name]))
        self.run(self.store.redact(name, [row.message.message_id], reason="test"))
        row.redacted = True

    @rule(data=st.data())
    def retract_last(self, data: st.DataObject) -> None:
        """Take back a session's last message, refused when another branch holds it."""
        session = self._session(data)
        rows = self.model.sessions[session]
        if not rows:
            assert self.run(self.store.retract_last(session)) is None
            return
        if self.model.shared(session, rows[-1]):
            self.refused(self.store.retract_last(session), match="shared with branch")
            return
        try:
            taken = self.run(self.store.retract_last(session))
        except InvalidInput as error:  # compaction touched it: refused for that
            assert "shared" not in str(error)
            return
        assert taken is not None and taken.message_id == rows[-1].message.message_id
        rows.pop()

    @rule(data=st.data())
    def write_to_a_tail(self, data: st.DataObject) -> None:
        """A tail is read-only."""
        tails = self._tails()
        if tails:
            _, tail = data.draw(st.sampled_from(tails))
            self.refused(self.store.append(tail.session_id, [user("x")]), match="restore")

    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        """Delete a tail, or a session other than the last one (its tails go with it)."""
        choices = [name for name, _ in ((t.session_id, t) for _, t in self._tails())]
        if len(self.model.sessions) > 1:
            choices += sorted(self.model.sessions)
        if not choices:
            return
        name = data.draw(st.sampled_from(choices))
        self.run(self.store.delete_session(name))
        if name in self.model.sessions:
            del self.model.sessions[name]
            del self.model.parents[name]
            for tail in self.model.tails.pop(name):
                self.model.spent.append((name, tail.event_id))
            for child, parent in self.model.parents.items():
                if parent == name:
                    self.model.parents[child] = None
            return
        for owner, tails in self.model.tails.items():
            for tail in [t for t in tails if t.session_id == name]:
                tails.remove(tail)
                self.model.spent.append((owner, tail.event_id))

    # -- after every step -------------------------------------------------------------

    @invariant()
    def histories_are_the_models(self) -> None:
        """Each branch's appended messages are the model's, redacted ones as tombstones."""
        for name, rows in sorted(self.model.branches().items()):
            stored = self.run(self.store.history(name, include_excluded=True))
            got = [
                (m.message_id, "<tombstone>" if is_tombstone(m.message) else m.message)
                for m in stored
                if m.kind != "summary"
            ]
            assert got == [r.expected() for r in rows], f"branch {name!r}"
            assert {m.session_id for m in stored} <= {name}

    @invariant()
    def listing_and_branches_are_the_models(self) -> None:
        """``sessions()`` lists the sessions (not the tails); ``branches()`` and each
        session's parent say what the model says."""
        listed = [s.session_id for s in self.run(self.store.sessions())]
        assert listed == sorted(self.model.sessions)
        for name in sorted(self.model.sessions):
            parent = self.model.parents[name]
            assert self.run(self.store.session(name)).parent_session_id == parent
            branches = self.run(self.store.branches(name))
            expected = [] if parent is None else [("parent", parent)]
            forks = sorted(child for child, p in self.model.parents.items() if p == name)
            got_forks = sorted(b.session_id for b in branches if b.relation == "fork")
            assert got_forks == forks
            expected += [("tail", t.session_id) for t in self.model.tails[name]]
            got = [(b.relation, b.session_id) for b in branches if b.relation != "fork"]
            assert got == expected
            relations = [b.relation for b in branches]
            assert relations == sorted(relations, key=["parent", "fork", "tail"].index)

    @invariant()
    def contexts_keep_their_invariants(self) -> None:
        """Every session's context is a valid projection."""
        for name in sorted(self.model.sessions):
            assert_projection_invariants(self.run(self.store.context(name)), nonempty=False)


def test_branches_follow_the_model(backend: str, request: pytest.FixtureRequest) -> None:
    """The store's branches hold what the plain model says, step after step."""
    url = None if backend == "memory" else str(request.getfixturevalue("db_url"))
    # the factory form is documented; the stub only names the class form
    run_state_machine_as_test(
        lambda: BranchMachine(url),  # type: ignore[arg-type]
        settings=SETTINGS,
    )
