"""The benchmark harness: generator properties and an end-to-end smoke run.

No timing is asserted: only that the outputs exist and are well-formed.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tracemalloc
from itertools import islice
from pathlib import Path

import pytest

from benchmarks.child import ChildSpec, run_spec
from benchmarks.generator import ConversationGenerator, message_size, model_text, to_message
from benchmarks.peers import REGISTRY, SystemSpec
from benchmarks.stats import summarize
from strategies.messages import FunctionCallContent, FunctionResultContent

REPO = Path(__file__).resolve().parents[2]


def test_same_seed_same_conversation() -> None:
    first = list(ConversationGenerator(3).chat_dicts(2_000))
    second = list(ConversationGenerator(3).chat_dicts(2_000))
    other = list(ConversationGenerator(4).chat_dicts(2_000))
    assert first == second
    assert first != other
    assert [m.model_dump() for m in ConversationGenerator(3).messages(2_000)] == [
        to_message(d).model_dump() for d in first
    ]


@pytest.mark.parametrize("count", [0, 1, 2, 3, 7, 50, 501])
def test_yields_exactly_the_count_asked(count: int) -> None:
    items = list(ConversationGenerator(count).chat_dicts(count))
    assert len(items) == count
    if count:
        assert items[0]["role"] == "system"
    assert len({item["id"] for item in items}) == count


def test_shape_of_turns() -> None:
    items = list(ConversationGenerator(11).chat_dicts(5_000))
    assert sum(item["role"] == "system" for item in items) == 1
    pending: set[str] = set()
    for item in items:
        if item["role"] == "tool":
            assert 200 <= len(item["content"]) <= 4_000
            pending.remove(item["tool_call_id"])
        elif item.get("tool_calls"):
            assert not pending
            assert 1 <= len(item["tool_calls"]) <= 3
            pending = {call["id"] for call in item["tool_calls"]}
    parallel = {len(i["tool_calls"]) for i in items if i.get("tool_calls")}
    assert parallel == {1, 2, 3}
    roles = {item["role"] for item in items}
    assert roles == {"system", "user", "assistant", "tool"}


def test_average_message_is_about_one_kilobyte() -> None:
    sizes = [message_size(d) for d in ConversationGenerator(5).chat_dicts(20_000)]
    mean = statistics.fmean(sizes)
    assert 800 <= mean <= 1_250, mean


def test_streams_without_holding_messages() -> None:
    stream = ConversationGenerator(1).chat_dicts(1_000_000)
    tracemalloc.start()
    try:
        total = sum(message_size(item) for item in islice(stream, 30_000))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # 30,000 messages are ~30 MB of JSON; a streaming generator holds a few of them
    assert peak < total / 10


def test_conversion_to_chatledger_messages_pairs_calls_and_results() -> None:
    calls: set[str] = set()
    results: set[str] = set()
    for item in ConversationGenerator(2).chat_dicts(2_000):
        message = to_message(item)
        assert message.role == item["role"]
        assert message.message_id == item["id"]
        for content in message.contents:
            if isinstance(content, FunctionCallContent):
                calls.add(content.call_id)
                assert content.name in model_text(item)
            elif isinstance(content, FunctionResultContent):
                results.add(content.call_id)
                assert content.result == item["content"]
    assert calls and calls == results


def test_summary_of_samples() -> None:
    summary = summarize([5.0, 1.0, 4.0, 2.0, 3.0])
    assert (summary.median, summary.minimum, summary.maximum) == (3.0, 1.0, 5.0)
    assert (summary.q1, summary.q3, summary.runs) == (2.0, 4.0, 5)
    single = summarize([2.5])
    assert single.q1 == single.q3 == single.median == 2.5
    with pytest.raises(ValueError):
        summarize([])


async def test_missing_peer_is_skipped_with_its_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    ghost = SystemSpec("benchmarks.peers.no_such_peer", "Ghost", "sqlite", missing_reason="gone")
    monkeypatch.setitem(REGISTRY, "ghost", ghost)
    answer = await run_spec(ChildSpec("probe", "ghost", "sqlite", ""))
    assert answer["status"] == "skipped"
    assert answer["reason"].startswith("gone")


def test_smoke_run_writes_a_well_formed_report(tmp_path: Path) -> None:
    out, work = tmp_path / "results", tmp_path / "work"
    work.mkdir()  # the databases of many sessions are built here, not in the shared cache
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--smoke", "--out", str(out), "--work-dir", str(work)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3_000:]
    md_path, json_path = (Path(line) for line in done.stdout.split())
    assert md_path.parent == json_path.parent == out
    assert md_path.stem == json_path.stem
    report = json.loads(json_path.read_text())
    assert report["machine"]["start"]["cores"] >= 1
    assert report["config"]["runs"] == 1
    ran = {row["system"] for row in report["rows"]}
    for name in REGISTRY:
        assert name in ran or report["skipped_systems"].get(name), name
    if "chatledger" in report["skipped_systems"]:
        assert "store not yet available" in report["skipped_systems"]["chatledger"]
    for row in report["rows"]:
        summary = row["summary"]
        assert summary["runs"] >= 1
        assert summary["minimum"] <= summary["median"] <= summary["maximum"]
        assert summary["median"] > 0
        if row["system"] == "limit":
            assert row["vs_limit"] == pytest.approx(1.0)
    failed = [case for case in report["cases"] if case["status"] == "error"]
    assert not failed, failed
    markdown = md_path.read_text()
    assert markdown.startswith("# chatledger benchmarks")
    assert "| system | messages | median ms |" in markdown
