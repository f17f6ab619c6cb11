"""The framework examples run offline, end to end, on a SQLite file, and quietly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = {
    "openai_agents_session.py": ("agents", "stored_items", "context_items"),
    "langchain_agent.py": ("langchain", "stored_messages", "context_messages"),
}


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_example_runs_and_compacts(example: str, tmp_path: Path) -> None:
    needs, stored_key, context_key = EXAMPLES[example]
    pytest.importorskip(needs)
    url = f"sqlite:///{tmp_path / 'example.db'}"
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / example), "--url", url, "--session", "ex"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr  # quiet: no warning on any model call
    lines = done.stdout.strip().splitlines()
    report = json.loads(lines[-1])
    assert [line.split(": ", 1)[1] for line in lines[:-1]] == ["Everything is in stock."] * 6
    assert report[stored_key] == 6 * 6  # question, two lookups and their results, answer
    assert 0 < report[context_key] < report[stored_key]
    assert report["excluded_groups"] > 0 and report["events"] > 0
    listed = subprocess.run(
        [sys.executable, "-m", "store.cli", "audit", "ex", "--url", url],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert listed.returncode == 0, listed.stderr
    assert "after_run" in listed.stdout
