"""The Agent Framework example, run as a user would, with the offline scripted client."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from store import HistoryStore
from store.models import StoredMessage
from tests.cli.conftest import requires_compaction
from tests.cli.helpers import run_api

pytest.importorskip("agent_framework")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agent_framework_agent.py"


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CHATLEDGER_"))}
    return subprocess.run(
        [sys.executable, str(EXAMPLE), *args],
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
    assert not (tmp_path / "chatledger.db").exists()


@requires_compaction
def test_example_stores_every_message_in_sqlite(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/ex.db"
    done = _run("--url", url, "--turns", "7", "--session", "ex", cwd=tmp_path)
    assert done.returncode == 0, done.stderr

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
