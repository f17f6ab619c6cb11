"""The Pydantic AI example runs offline, end to end, on a SQLite file, and quietly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pydantic_ai")

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )


def test_the_example_runs_branches_and_forks(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'example.db'}"
    example = str(ROOT / "examples" / "pydantic_ai_store.py")
    done = _run(example, "--url", url, "--conversation", "ex", "--turns", "3", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr
    lines = done.stdout.strip().splitlines()
    assert [line.split(": ", 1)[0] for line in lines[:-1]] == ["turn 0", "turn 1", "turn 2"]
    report = json.loads(lines[-1])
    assert report == {
        "conversation": "ex",
        "messages": 3 * 4,  # the branch replaced the last turn
        "recent": 4,
        "branches_left": 1,
        "conversations": 2,
    }
    listed = _run("-m", "store.cli", "branches", "ex", "--url", url, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    relations = [line.split()[0] for line in listed.stdout.splitlines()[2:]]
    assert relations == ["fork", "tail"]
