"""The Agent Framework examples, run as a user would, with their offline scripted clients."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from store import HistoryStore
from store.models import StoredMessage
from strategies.messages import FunctionCallContent, FunctionResultContent
from strategies.tokenizers import TiktokenTokenizer
from tests.cli.conftest import requires_compaction
from tests.cli.helpers import run_api

pytest.importorskip("agent_framework")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EXAMPLE = EXAMPLES / "agent_framework_agent.py"
SEARCH_EXAMPLE = EXAMPLES / "bounded_search_tool.py"
TOOL_TOKENS, TURN_TOKENS = 1_500, 3_000  # as in the search example


def _run(*args: str, cwd: Path, example: Path = EXAMPLE) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CHATLEDGER_"))}
    return subprocess.run(
        [sys.executable, str(example), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
        check=False,
    )


def test_example_runs_offline_on_the_memory_store(tmp_path: Path) -> None:
    done = _run("--memory", "--turns", "3", "--session", "ex", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "error lines found." in done.stdout
    assert "p99 is" in done.stdout and "handlers." in done.stdout
    assert "chatledger show" not in done.stdout  # nothing was kept to show
    assert not (tmp_path / "chatledger.db").exists()


@requires_compaction
def test_example_stores_every_message_in_sqlite(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/ex.db"
    done = _run("--url", url, "--turns", "7", "--session", "ex", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"chatledger show ex --context --url {url}" in done.stdout  # the hint reaches it

    async def read(store: HistoryStore) -> list[StoredMessage]:
        return [m async for m in store.aiter_history("ex", include_excluded=True)]

    stored = [m for m in run_api(url, read) if m.kind != "summary"]
    # Per turn: the request, one call, its result, the answer.
    assert [m.role for m in stored if m.role != "system"] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ] * 7


def test_search_example_bounds_every_result_offline(tmp_path: Path) -> None:
    done = _run("--memory", "--session", "ex", cwd=tmp_path, example=SEARCH_EXAMPLE)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "Found 60 tickets" in out and "Found 80 tickets" in out
    assert "more than the 1500 this tool may return" in out  # the tool's own budget
    assert "left of the turn's 3000 tokens" in out  # the response's shared allowance
    lines = [line for line in out.splitlines() if line.startswith("  call_")]
    assert len(lines) == 9
    tokens = [int(line.split(" tokens")[0].rsplit(" ", 1)[1]) for line in lines]
    assert all(t <= TOOL_TOKENS for t in tokens)
    assert not (tmp_path / "chatledger.db").exists()


def test_search_example_stores_bounded_results_in_sqlite(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/search.db"
    done = _run("--url", url, "--session", "ex", cwd=tmp_path, example=SEARCH_EXAMPLE)
    assert done.returncode == 0, done.stderr
    assert f"chatledger show ex --url {url}" in done.stdout

    async def read(store: HistoryStore) -> list[StoredMessage]:
        return [m async for m in store.aiter_history("ex", include_excluded=True)]

    stored = run_api(url, read)
    tokenizer = TiktokenTokenizer("o200k_base")
    batches = [
        {c.call_id for c in m.message.contents if isinstance(c, FunctionCallContent)}
        for m in stored
    ]
    results = {
        c.call_id: tokenizer.count_tokens(str(c.result))
        for m in stored
        for c in m.message.contents
        if isinstance(c, FunctionResultContent)
    }
    assert len(results) == 9 and all(t <= TOOL_TOKENS for t in results.values())
    for batch in filter(None, batches):  # the results of one model response, together
        assert sum(results[call_id] for call_id in batch) <= TURN_TOKENS
