"""Compaction on request: a request waits in the session until its next compaction runs
it (whatever the triggers say), the projection honours it meanwhile, the event keeps
the reason and focus, and the request is consumed; ``now=True`` runs at once; bad
input and unknown sessions are refused in one line."""

from __future__ import annotations

import pytest

from store.contract import HistoryBackend
from store.errors import InvalidInput, SessionNotFound
from store.provider import BEFORE_STRATEGY_KEY
from strategies.changeset import ChangeSet, Exclusion
from strategies.messages import Message
from strategies.summarization import SummarizationStrategy
from strategies.summarizers import FakeSummarizer
from strategies.triggers import TokensExceed
from strategies.truncation import TruncationStrategy
from strategies.view import View
from tests.groups.conversations import assistant, call, result, tool, user


def _chat(turns: int = 6) -> list[Message]:
    out: list[Message] = []
    for n in range(turns):
        out += [user(f"u{n}", f"question {n}"), assistant(f"a{n}", f"answer number {n}")]
    return out


def _eager() -> TruncationStrategy:
    """A truncation whose threshold the chat never crosses, but would compact far if
    asked: it tells whether a request waits."""
    return TruncationStrategy(max_n=100, compact_to=1)


def _quiet(fake: FakeSummarizer) -> SummarizationStrategy:
    """A summarization whose own threshold the chat never crosses."""
    return SummarizationStrategy(client=fake, target_count=4, threshold=100)


async def test_a_request_makes_the_next_compaction_run_and_is_consumed(
    store: HistoryBackend,
) -> None:
    await store.append("s", _chat())
    fake = FakeSummarizer()
    assert await store.compact("s", _quiet(fake), phase="after_run") is None  # no trigger
    assert await store.request_compaction("s", reason="model_requested", focus="numbers") is None
    event = await store.compact("s", _quiet(fake), phase="after_run")
    assert event is not None and event.outcome == "applied"
    assert (event.reason, event.focus) == ("model_requested", "numbers")
    assert event.params["request"] == {"reason": "model_requested", "focus": "numbers"}
    assert event.phase == "after_run" and event.strategy == "SummarizationStrategy"
    # the focus reached the summarizer, which accepts it
    assert fake.calls[-1][1].endswith("numbers")
    # the summary keeps the newest four messages (target_count) beside it
    assert [m.message_id for m in await store.context("s")][-4:] == ["u4", "a4", "u5", "a5"]
    # consumed: projections and the next compaction are back to the triggers
    active = [m.message_id for m in await store.context("s")]
    assert [m.message_id for m in await store.context("s", strategy=_eager())] == active
    assert await store.compact("s", _eager(), phase="after_run") is None
    (audited,) = [e for e in await store.audit("s") if e.id == event.id]
    assert (audited.reason, audited.focus) == ("model_requested", "numbers")


async def test_a_newer_request_replaces_the_older(store: HistoryBackend) -> None:
    await store.append("s", _chat())
    await store.request_compaction("s", reason="first", focus="one")
    await store.request_compaction("s", reason="second")
    event = await store.compact("s", TruncationStrategy(max_n=100, compact_to=4))
    assert event is not None and (event.reason, event.focus) == ("second", None)


async def test_the_projection_honours_a_request_without_consuming_it(
    store: HistoryBackend,
) -> None:
    await store.append("s", _chat())
    strategy = TruncationStrategy(max_n=100, compact_to=4)
    assert len(await store.context("s", strategy=strategy)) == 12
    await store.request_compaction("s")
    assert [m.message_id for m in await store.context("s", strategy=strategy)] == [
        "u4",
        "a4",
        "u5",
        "a5",
    ]
    # nothing stored changed, and the request still waits for the compaction
    assert (await store.stats("s")).active_messages == 12
    event = await store.compact("s", strategy)
    assert event is not None and event.reason == "manual"
    assert (await store.stats("s")).active_messages == 4


async def test_a_request_never_splits_a_call_from_its_result(store: HistoryBackend) -> None:
    # the model asked for compaction in a call whose result is not stored yet
    await store.append("s", [*_chat(3), assistant("ac", call("c1", "compact_context"))])
    await store.request_compaction("s", reason="model_requested")
    strategy = TruncationStrategy(max_n=100, compact_to=1)
    projected = await store.context(
        "s", strategy=strategy, pending=[tool("tc", result("c1", "requested"))]
    )
    assert [m.message_id for m in projected][-2:] == ["ac", "tc"]
    event = await store.compact("s", strategy)
    assert event is not None and "ac" in [m.message_id for m in await store.context("s")]


async def test_a_trigger_given_fires_and_a_target_given_still_holds(
    store: HistoryBackend,
) -> None:
    await store.append("s", _chat())
    strategy = TruncationStrategy(
        max_n=100, compact_to=1, trigger=TokensExceed(10_000), target=None
    )
    assert await store.compact("s", strategy) is None
    await store.request_compaction("s", reason="manual")
    event = await store.compact("s", strategy)
    # no target: as far as the strategy's protections allow (the last user turn stays)
    assert event is not None
    assert [m.message_id for m in await store.context("s")] == ["u5", "a5"]


async def test_now_compacts_at_once_and_consumes_a_waiting_request(
    store: HistoryBackend,
) -> None:
    await store.append("s", _chat())
    await store.request_compaction("s", reason="waiting")
    event = await store.request_compaction(
        "s",
        reason="user asked",
        focus="keep numbers",
        now=True,
        strategy="truncation:max_n=100,compact_to=4",
    )
    assert event is not None and event.phase == "manual"
    assert (event.reason, event.focus) == ("user asked", "keep numbers")
    assert (await store.stats("s")).active_messages == 4
    # the waiting request went with it
    assert await store.compact("s", _eager()) is None


async def test_now_without_a_strategy_takes_the_recorded_one(store: HistoryBackend) -> None:
    await store.append("s", _chat())
    with pytest.raises(InvalidInput, match="records no strategy"):
        await store.request_compaction("s", now=True)
    await store.set_metadata("s", {BEFORE_STRATEGY_KEY: "truncation:max_n=100,compact_to=6"})
    event = await store.request_compaction("s", now=True)
    assert event is not None and event.strategy == "TruncationStrategy"
    assert (await store.stats("s")).active_messages == 6


@pytest.mark.parametrize(
    ("keywords", "says"),
    [
        ({"reason": ""}, "one line"),
        ({"reason": "a\nb"}, "one line"),
        ({"reason": "x" * 201}, "1 to 200"),
        ({"reason": 3}, "must be a string"),
        ({"focus": "x" * 2001}, "at most 2000"),
        ({"focus": 3}, "must be a string"),
        ({"now": "yes"}, "now"),
        ({"strategy": "truncation:max_n=4,compact_to=2"}, "only with now=True"),
    ],
)
async def test_bad_requests_are_refused_in_one_line(
    store: HistoryBackend, keywords: dict[str, object], says: str
) -> None:
    await store.append("s", _chat(1))
    with pytest.raises(InvalidInput, match=says) as raised:
        await store.request_compaction("s", **keywords)  # type: ignore[arg-type]
    assert "\n" not in str(raised.value)


async def test_an_unknown_session_is_refused(store: HistoryBackend) -> None:
    with pytest.raises(SessionNotFound):
        await store.request_compaction("nope")


class _Bookkeeping:
    """A strategy that is not the compaction asked for (``honours_requests = False``)."""

    honours_requests = False
    name = "bookkeeping"

    def params(self) -> dict[str, object]:
        return {}

    async def plan(self, view: View) -> ChangeSet:
        oldest = view.groups[0].group_id
        return ChangeSet(exclusions=(Exclusion(oldest, "bookkeeping"),), strategy=self.name)


async def test_a_strategy_that_does_not_honour_requests_leaves_them_waiting(
    store: HistoryBackend,
) -> None:
    await store.append("s", _chat())
    await store.request_compaction("s", reason="model_requested")
    event = await store.compact("s", _Bookkeeping())
    assert event is not None and event.reason is None and "request" not in event.params
    # still waiting: the next compaction runs it
    asked = await store.compact("s", _eager())
    assert asked is not None and asked.reason == "model_requested"
