"""The demo: in process on the in-memory store, and through ``chatledger demo`` on SQLite."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from store import HistoryStore
from store.demo import DemoConfig, MissingResult, TurnRecord, run_demo
from store.demo._script import ScriptedModel
from store.demo.tools import calculate
from store.memory import InMemoryHistoryStore
from store.models import StoredMessage
from strategies.base import CompactionStrategy
from strategies.messages import FunctionCallContent, FunctionResultContent, Message
from tests.cli.conftest import requires_compaction
from tests.cli.helpers import chatledger, run_api


def assert_demo_promises(turns: Sequence[TurnRecord]) -> None:
    """Every request within the budget; stored tokens grow every turn."""
    assert turns
    for record in turns:
        assert record.sent_tokens, record
        assert max(record.sent_tokens) <= record.budget, record
    stored = [record.stored_tokens for record in turns]
    assert all(b > a for a, b in itertools.pairwise(stored)), stored


async def test_demo_on_the_memory_store_keeps_its_promises() -> None:
    store = InMemoryHistoryStore()
    seen: list[TurnRecord] = []
    report = await run_demo(store, DemoConfig(turns=40, session_id="m"), on_turn=seen.append)
    assert report.ok, report.violations
    assert list(report.turns) == seen
    assert_demo_promises(report.turns)
    # The conversation outgrew the window, so the after phase compacted it.
    assert report.events
    assert report.turns[-1].stored_tokens > report.budget >= report.turns[-1].active_tokens
    # No message lost: every appended message is stored, once.
    assert sorted(report.appended_ids) == sorted(report.stored_ids)
    assert sum(t.appended for t in report.turns) == len(report.appended_ids)
    stored = [m async for m in store.aiter_history("m", include_excluded=True)]
    assert {m.message_id for m in stored if m.kind != "summary"} == set(report.appended_ids)


async def test_demo_is_deterministic_for_a_seed() -> None:
    first = await run_demo(InMemoryHistoryStore(), DemoConfig(turns=6, seed=3))
    second = await run_demo(InMemoryHistoryStore(), DemoConfig(turns=6, seed=3))
    assert [t.sent_tokens for t in first.turns] == [t.sent_tokens for t in second.turns]
    assert [t.request for t in first.turns] == [t.request for t in second.turns]


class _DropsResults(InMemoryHistoryStore):
    """A broken provider backend: its projection loses tool results."""

    async def context(
        self,
        session_id: str,
        *,
        strategy: CompactionStrategy | None = None,
        pending: Sequence[Message] = (),
    ) -> list[Message]:
        messages = await super().context(session_id, strategy=strategy, pending=pending)
        return [
            m for m in messages if not any(isinstance(c, FunctionResultContent) for c in m.contents)
        ]


async def test_demo_fails_loudly_when_a_call_is_sent_without_its_result() -> None:
    with pytest.raises(MissingResult, match="without its result"):
        await run_demo(_DropsResults(), DemoConfig(turns=5))


async def test_demo_reports_requests_over_the_budget() -> None:
    config = DemoConfig(turns=4, max_context_window_tokens=1024, max_output_tokens=256)
    report = await run_demo(InMemoryHistoryStore(), config)
    over = [t for t in report.turns if not t.within_budget]
    assert over, [t.sent_tokens for t in report.turns]
    assert not report.ok
    assert len([v for v in report.violations if "over the input budget" in v]) == len(over)


def test_scripted_model_answers_from_the_results_it_was_sent() -> None:
    model = ScriptedModel(seed=1)
    plan = next(p for p in (model.plan(t) for t in range(1, 50)) if p.kind == "review")
    ask = model.respond(plan, [])
    assert [c.name for c in ask.contents if isinstance(c, FunctionCallContent)] == ["read_file"]
    source = "x\ndef handler_0():\n    pass\ndef handler_1():\n"
    result = Message(
        role="tool",
        contents=[FunctionResultContent(call_id=plan.made[0], result=source)],
    )
    answer = model.respond(plan, [ask, result])
    assert answer.text.endswith("defines 2 handlers.")
    assert calculate("3 * 100 / 4") == "75"
    with pytest.raises(ValueError, match="unsupported"):
        calculate("__import__('os')")


def _stored(url: str, session_id: str) -> list[StoredMessage]:
    async def read(store: HistoryStore) -> list[StoredMessage]:
        return [m async for m in store.aiter_history(session_id, include_excluded=True)]

    return run_api(url, read)


def _check_run(url: str, session_id: str, records: list[dict[str, Any]], turns: int) -> None:
    parsed = [TurnRecord.model_validate(item) for item in records]
    assert [t.turn for t in parsed] == list(range(1, turns + 1))
    assert_demo_promises(parsed)
    stored = [m for m in _stored(url, session_id) if m.kind != "summary"]
    assert len(stored) == sum(t.appended for t in parsed)
    assert len({m.message_id for m in stored}) == len(stored)
    assert parsed[-1].stored_messages >= len(stored)


@requires_compaction
def test_demo_command_on_sqlite(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/demo.db"
    result = chatledger("demo", "--turns", "12", "--url", url, "--session", "d1", "--json")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    _check_run(url, "d1", result.json(), 12)
    listed = chatledger("sessions", "--url", url, "--json")
    assert [item["session_id"] for item in listed.json()] == ["d1"]


@requires_compaction
def test_demo_command_prints_turns_events_and_next_commands(tmp_path: Path) -> None:
    result = chatledger("demo", "--turns", "10", "--session", "d2", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "chatledger.db").is_file()  # the default URL
    lines = [line for line in result.stdout.splitlines() if line.startswith("turn ")]
    assert len(lines) == 10
    assert "compaction events" in result.stdout
    for command in ("chatledger sessions", "chatledger show d2 --context", "chatledger audit d2"):
        assert command in result.stdout


@requires_compaction
def test_demo_command_exits_non_zero_when_over_budget(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/tight.db"
    result = chatledger(
        "demo", "--turns", "3", "--window", "1024", "--output-tokens", "256", "--url", url
    )
    assert result.returncode == 1
    assert "over the input budget" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
@requires_compaction
def test_demo_200_turns(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/long.db"
    result = chatledger("demo", "--turns", "200", "--url", url, "--session", "long", "--json")
    assert result.returncode == 0, result.stderr
    _check_run(url, "long", result.json(), 200)
