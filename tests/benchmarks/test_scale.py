"""The workloads of scale: their data sets, and each run once, small, end to end.

No timing is asserted: only what the workloads count (turns, errors, compactions, the
cache's bound) and that the runner plans and caches what they need.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchmarks.__main__ import _parser, config_from
from benchmarks.child import ChildSpec, run_spec
from benchmarks.generator import ConversationGenerator
from benchmarks.report import _memory_table, _scale_table
from benchmarks.runner import PRESETS, Case, Runner
from store import HistoryStore


def test_tool_heavy_turns_have_five_messages_and_results_of_one_to_two_kilobytes() -> None:
    generator = ConversationGenerator(3, dataset="tools")
    for turn in [generator.turn() for _ in range(200)]:
        assert [m["role"] for m in turn] == ["user", "assistant", "tool", "tool", "assistant"]
        assert len(turn[1]["tool_calls"]) == 2
        assert {m["tool_call_id"] for m in turn[2:4]} == {c["id"] for c in turn[1]["tool_calls"]}
        assert all(1_000 <= len(m["content"]) <= 2_000 for m in turn[2:4])


def test_short_sessions_are_short_and_every_data_set_is_seeded() -> None:
    items = list(ConversationGenerator(5, dataset="short").chat_dicts(20))
    assert len(items) == 20
    assert all(len(m["content"]) <= 300 for m in items)
    for dataset in ("mixed", "tools", "short"):
        first = list(ConversationGenerator(9, dataset=dataset).chat_dicts(50))
        assert first == list(ConversationGenerator(9, dataset=dataset).chat_dicts(50))
    with pytest.raises(ValueError, match="unknown data set"):
        ConversationGenerator(1, dataset="huge")  # type: ignore[arg-type]


@pytest.mark.parametrize("workload", ["many_writers", "shared_session"])
async def test_writers_run_every_turn_without_an_error(workload: str, tmp_path: Path) -> None:
    location = str(tmp_path / "writers.sqlite")
    spec = ChildSpec(workload, "chatledger", "sqlite", location, 2, turns=3)
    answer = await run_spec(spec)
    assert answer["status"] == "ok", answer
    metrics = answer["metrics"]
    assert metrics["turns"] == 6
    assert metrics["errors"] == 0
    assert 0 < metrics["p50_s"] <= metrics["p99_s"]


@pytest.mark.parametrize(("workload", "sessions"), [("many_writers", 2), ("shared_session", 1)])
async def test_writers_start_on_sessions_holding_their_history(
    workload: str, sessions: int, tmp_path: Path
) -> None:
    location = str(tmp_path / "writers.sqlite")
    spec = ChildSpec(workload, "chatledger", "sqlite", location, 2, turns=2, history=6)
    answer = await run_spec(spec)
    assert answer["status"] == "ok", answer
    assert answer["metrics"]["lost"] == answer["metrics"]["duplicated"] == 0
    async with HistoryStore.open(f"sqlite+aiosqlite:///{location}") as store:
        held: dict[str, set[str]] = {}
        for session in await store.sessions():
            stored = store.aiter_history(session.session_id, include_excluded=True)
            ids = {s.message.message_id async for s in stored}
            held[session.session_id] = {i.split("_")[0] for i in ids if i.startswith("h")}
    # each written session holds one history of its own, loaded before the writers
    assert sorted(held.values(), key=sorted) == [{f"h{i}"} for i in range(sessions)]


async def test_deferred_compaction_compacts_in_both_modes(tmp_path: Path) -> None:
    location = str(tmp_path / "deferred.sqlite")
    spec = ChildSpec("deferred_compaction", "chatledger", "sqlite", location, 2, delay=0.05)
    answer = await run_spec(spec)
    assert answer["status"] == "ok", answer
    assert answer["metrics"]["inline_compactions"] >= 1
    assert answer["metrics"]["deferred_compactions"] >= 1


async def test_many_sessions_builds_then_measures_within_the_cache_bound(tmp_path: Path) -> None:
    location = str(tmp_path / "sessions.sqlite")
    build = ChildSpec("build_sessions", "chatledger", "sqlite", location, 30, probe=60)
    assert (await run_spec(build))["status"] == "ok"
    resumed = ChildSpec("build_sessions", "chatledger", "sqlite", location, 40, probe=60, start=-1)
    assert (await run_spec(resumed))["status"] == "ok"  # as after an interrupted build
    run = ChildSpec("many_sessions", "chatledger", "sqlite", location, 40, turns=2, repeats=2)
    answer = await run_spec(run)
    assert answer["status"] == "ok", answer
    metrics = answer["metrics"]
    assert metrics["sessions"] == 40
    assert metrics["cache_within_bound"] == 1.0
    assert 0 < metrics["cache_max_messages"] <= metrics["cache_bound"]


def test_writer_history_reaches_the_writers_specs_and_refuses_a_negative_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = _parser().parse_args(["--smoke", "--writer-history", "400"])
    runner = Runner(config_from(args), work_dir=tmp_path)
    assert runner._spec("shared_session", "chatledger", "x", 2).history == 400
    assert runner._spec("per_turn", "chatledger", "x", 200).history == 0
    with pytest.raises(SystemExit):
        _parser().parse_args(["--writer-history", "-1"])
    assert "0 or more, got '-1'" in capsys.readouterr().err


def test_runner_plans_the_scale_sizes_and_keys_the_cache_by_the_build(tmp_path: Path) -> None:
    config = PRESETS["smoke"]
    runner = Runner(config, work_dir=tmp_path)
    cases = runner.plan(["chatledger", "limit"])
    assert Case("many_sessions", "chatledger", 50) in cases
    assert Case("full_read_tools", "limit", 200) in cases
    assert {c.size for c in cases if c.workload == "many_writers"} == set(config.writer_counts)
    assert not [c for c in cases if c.system == "limit" and c.workload == "many_writers"]
    path = runner.sessions_path(50)
    assert path.parent == tmp_path / "clbench-cache"
    assert path != runner.sessions_path(1)
    other = Runner(config.__class__(session_probe=7), work_dir=tmp_path)
    assert other.sessions_path(50) != path


async def test_per_turn_reports_the_view_cache_within_its_bound(tmp_path: Path) -> None:
    location = str(tmp_path / "turns.sqlite")
    assert (await run_spec(ChildSpec("build", "chatledger", "sqlite", location, 200)))[
        "status"
    ] == "ok"
    answer = await run_spec(ChildSpec("per_turn", "chatledger", "sqlite", location, 200, turns=3))
    assert answer["status"] == "ok", answer
    metrics = answer["metrics"]
    assert 0 < metrics["cache_max_messages"] <= metrics["cache_bound"]
    assert metrics["cache_within_bound"] == 1.0


def test_the_memory_table_shows_growth_and_the_cache_against_its_bound() -> None:
    def case(workload: str, size: int, mb: float, **extra: list[float]) -> dict[str, Any]:
        samples = {"peak_rss_mb": [mb], **extra}
        return {"workload": workload, "system": "chatledger", "size": size, "samples": samples}

    report = {
        "cases": [
            case("per_turn", 100_000, 150.0, cache_max_messages=[900.0], cache_bound=[50_000.0]),
            case("per_turn", 1_000, 100.0, cache_max_messages=[800.0], cache_bound=[50_000.0]),
            case("full_read", 1_000, 80.0),
            case("projection", 1_000, 70.0),  # not a memory figure of its own
        ]
    }
    rows = [line for line in _memory_table(report) if line.startswith("| per_turn")]
    assert rows == [
        "| per_turn | chatledger | 100,000 | 150.0 | 150.0 to 150.0 | 1.50 | 900 / 50,000 |",
        "| per_turn | chatledger | 1,000 | 100.0 | 100.0 to 100.0 | 1.00 | 800 / 50,000 |",
    ]
    text = "\n".join(_memory_table(report))
    assert "| full_read | chatledger | 1,000 | 80.0 | 80.0 to 80.0 | 1.00 |  |" in text
    assert "projection" not in text


def test_sessions_pages_grow_against_the_smallest_database_that_fills_one() -> None:
    def case(sessions: int, turn: float, page: float) -> dict[str, Any]:
        samples = {"per_turn_s": [turn], "page_first_s": [page]}
        return {
            "workload": "many_sessions",
            "system": "chatledger",
            "size": sessions,
            "samples": samples,
        }

    report = {
        "cases": [case(1, 0.004, 0.0005), case(10_000, 0.005, 0.002), case(100_000, 0.006, 0.003)]
    }
    rows = [line for line in _scale_table(report, "many_sessions") if line.startswith("| chat")]
    cells = [[cell for i, cell in enumerate(row.split(" | ")) if i in (3, 5)] for row in rows]
    assert cells == [
        ["4.00 (1.00x)", "0.50 (partial page)"],  # one session: a page of one row
        ["5.00 (1.25x)", "2.00 (1.00x)"],
        ["6.00 (1.50x)", "3.00 (1.50x)"],
    ]
