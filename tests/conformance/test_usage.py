"""Usage: what each model call cost, recorded once, paired with the projection made
for it, totalled, priced, fitted; removed with its session, left by a redaction."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from store.contract import HistoryBackend
from store.errors import InvalidInput
from store.usage import ModelPrice, Usage
from tests.conformance.toy_strategies import ExcludeOldest
from tests.groups.conversations import assistant, user

DAY_1 = datetime(2026, 11, 30, 12, tzinfo=UTC)
DAY_2 = datetime(2026, 12, 1, 9, tzinfo=UTC)


def _usage(model: str = "m1", **lanes: int | None) -> Usage:
    return Usage(model=model, **lanes)  # type: ignore[arg-type]


async def test_a_call_is_recorded_once_and_read_back(store: HistoryBackend) -> None:
    await store.append("s", [user("u1", "hi")])
    first = _usage(input_tokens=120, output_tokens=30, cache_read_tokens=0, reasoning_tokens=10)
    await store.record_usage("s", first, message_id="a1", call_id="r1")
    await store.record_usage("s", _usage(input_tokens=999), call_id="r1")  # a re-delivery
    await store.append("s", [assistant("a1", "hello")])
    await store.record_usage("s", _usage(input_tokens=200))
    calls = await store.usage_calls("s")
    assert [(c.seq, c.call_id, c.message_id, c.after_seq) for c in calls] == [
        (1, "r1", "a1", 1),
        (2, None, None, 2),
    ]
    assert calls[0].usage == first
    assert calls[0].usage.cache_write_tokens is None and calls[0].usage.cache_read_tokens == 0
    assert all(c.session_id == "s" and c.local_tokens is None for c in calls)


async def test_a_call_may_come_before_its_session(store: HistoryBackend) -> None:
    await store.record_usage("later", _usage(input_tokens=5), call_id="x")
    assert [(c.call_id, c.after_seq) for c in await store.usage_calls("later")] == [("x", None)]
    assert [s.session_id for s in await store.sessions()] == []


async def test_a_call_is_paired_with_the_newest_projection(store: HistoryBackend) -> None:
    await store.append("s", [user("u1", "hello there"), assistant("a1", "hi, how can I help")])
    view = await store.view("s")
    await store.context("s")
    await store.record_usage("s", _usage(input_tokens=50))
    await store.record_usage("s", _usage(input_tokens=60))  # inside a loop: no projection
    await store.context("s", pending=[user("u2", "and more words here")])
    pending_tokens = (await store.view("s")).token_count + store.count_tokens(
        user("u2", "and more words here")
    )
    await store.record_usage("s", _usage(input_tokens=70), call_id="c3")
    await store.record_usage("other", _usage(input_tokens=1))  # another session's call
    calls = await store.usage_calls("s")
    assert [c.local_tokens for c in calls] == [view.token_count, None, pending_tokens]
    assert [c.prefix_kept for c in calls] == [None, None, True]


async def test_a_cache_break_is_a_context_that_lost_the_previous_prefix(
    store: HistoryBackend,
) -> None:
    await store.append("s", [user("u1", "one"), assistant("a1", "two")])
    await store.context("s")
    await store.record_usage("s", _usage(input_tokens=10, cache_read_tokens=0))
    await store.append("s", [user("u2", "three"), assistant("a2", "four")])
    await store.context("s")
    await store.record_usage("s", _usage(input_tokens=20, cache_read_tokens=8))
    await store.compact("s", ExcludeOldest(n=1))
    await store.context("s")
    await store.record_usage("s", _usage(input_tokens=12, cache_read_tokens=0))
    assert [c.prefix_kept for c in await store.usage_calls("s")] == [None, True, False]
    stats = await store.stats("s")
    assert (stats.usage_calls, stats.cache_read_tokens, stats.cache_breaks) == (3, 8, 1)
    report = await store.usage("s")
    assert (report.total.cache_breaks, report.total.projected_calls) == (1, 3)


async def test_reports_total_each_lane_by_model_session_and_day(store: HistoryBackend) -> None:
    await store.record_usage("a", Usage(model="m1", input_tokens=100, output_tokens=10, at=DAY_1))
    await store.record_usage(
        "a", Usage(model="m2", input_tokens=300, cache_read_tokens=200, at=DAY_2)
    )
    await store.record_usage("b", Usage(model="m1", input_tokens=50, output_tokens=5, at=DAY_2))
    by_model = await store.usage()
    assert [
        (r.key, r.calls, r.input_tokens, r.output_tokens, r.cache_read_tokens)
        for r in by_model.rows
    ] == [("m1", 2, 150, 15, None), ("m2", 1, 300, None, 200)]
    assert (by_model.total.calls, by_model.total.input_tokens) == (3, 450)
    assert by_model.total.cache_write_tokens is None and by_model.total.cost is None
    by_session = await store.usage(by="session")
    assert [(r.key, r.calls) for r in by_session.rows] == [("a", 2), ("b", 1)]
    by_day = await store.usage("a", by="day")
    assert [(r.key, r.input_tokens) for r in by_day.rows] == [
        ("2026-11-30", 100),
        ("2026-12-01", 300),
    ]
    assert by_day.session_id == "a"
    recent = await store.usage(since=DAY_2 - timedelta(hours=1))
    assert recent.total.calls == 2
    assert (await store.usage(since=timedelta(days=1))).total.calls == 0


async def test_prices_cost_the_uncached_input_the_cache_and_the_output(
    store: HistoryBackend,
) -> None:
    await store.record_usage(
        "s",
        Usage(
            model="m1",
            input_tokens=1_000_000,
            cache_read_tokens=400_000,
            cache_write_tokens=100_000,
            output_tokens=200_000,
        ),
    )
    await store.record_usage("s", Usage(model="free", input_tokens=10))
    prices = {"m1": ModelPrice(input=2.0, output=8.0, cache_read=0.5, cache_write=2.5)}
    report = await store.usage("s", prices=prices)
    # 500k uncached x 2 + 400k x 0.5 + 100k x 2.5 + 200k x 8, per million
    assert report.priced and report.total.cost == pytest.approx(1.0 + 0.2 + 0.25 + 1.6)
    assert report.total.unpriced_calls == 1
    assert [r.cost for r in report.rows] == [None, pytest.approx(3.05)]


async def test_calibration_fits_the_provider_count_on_the_local_one(
    store: HistoryBackend,
) -> None:
    assert await store.calibration("s") is None
    for turn in range(6):
        await store.append("s", [user(f"u{turn}", "word " * (40 * (turn + 1)))])
        local = (await store.view("s")).token_count
        await store.context("s")
        await store.record_usage("s", Usage(model="m1", input_tokens=round(1.3 * local + 200)))
    fitted = await store.calibration("s")
    assert fitted is not None and fitted.model == "m1" and fitted.calls == 6
    assert fitted.scale == pytest.approx(1.3, abs=0.01)
    assert fitted.offset == pytest.approx(200, abs=2)
    assert not fitted.bounded
    assert await store.calibration("s", model="other") is None


@pytest.mark.parametrize(("factor", "scale"), [(0.0, 0.5), (100.0, 2.0)])
async def test_a_wild_report_moves_the_fit_no_further_than_its_bounds(
    store: HistoryBackend, factor: float, scale: float
) -> None:
    for turn in range(4):
        await store.append("s", [user(f"u{turn}", "word " * (30 * (turn + 1)))])
        local = (await store.view("s")).token_count
        await store.context("s")
        await store.record_usage("s", Usage(model="m", input_tokens=round(factor * local)))
    fitted = await store.calibration("s")
    assert fitted is not None and fitted.bounded
    assert fitted.scale == scale
    assert 0 <= fitted.offset <= 65_536


async def test_delete_and_purge_remove_usage_and_redaction_leaves_it(
    store: HistoryBackend,
) -> None:
    await store.append("s", [user("u1", "secret"), assistant("a1", "ok")])
    await store.record_usage("s", _usage(input_tokens=5), message_id="a1")
    await store.redact("s", ["u1"], reason="asked")
    assert len(await store.usage_calls("s")) == 1
    fork = await store.fork("s", at="a1", new_session_id="f")
    assert await store.usage_calls(fork.session_id) == []
    await store.delete_session("s")
    assert await store.usage_calls("s") == []
    await store.record_usage("never-stored", _usage(input_tokens=1))
    cutoff = datetime.now(UTC) + timedelta(seconds=1)
    report = await store.purge(older_than=cutoff)
    assert "f" in report.sessions and report.usage_calls == 1
    assert await store.usage_calls("never-stored") == []


@pytest.mark.parametrize(
    ("call", "says"),
    [
        (lambda s: s.record_usage("s", {"input_tokens": 1}), "usage must be a store.Usage"),
        (lambda s: s.record_usage("s", Usage(), call_id=3), "call_id"),
        (lambda s: s.usage(by="week"), "by must be one of model, session, day"),
        (lambda s: s.usage(since="7d"), "since must be a datetime or a timedelta"),
        (lambda s: s.usage(since=timedelta(days=-1)), "negative"),
        (lambda s: s.usage(prices={"m": {"input": 1}}), "prices must map"),
        (lambda s: s.calibration("s", model=5), "model"),
    ],
)
async def test_bad_arguments_are_refused(store: HistoryBackend, call: object, says: str) -> None:
    with pytest.raises(InvalidInput, match=says):
        await call(store)  # type: ignore[operator]


def test_a_lane_refuses_a_negative_count() -> None:
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        Usage(input_tokens=-1)
