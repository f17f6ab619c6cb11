"""``--baseline``: chatledger at another commit, beside the working tree, in one run.

No timing is asserted: only that both systems ran, from the right sources, and that
the temporary worktree is gone afterwards.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.baseline import checkout
from benchmarks.child import ChildSpec, run_spec
from benchmarks.peers import WORKING_TREE_ONLY, spec_for
from benchmarks.pg import PgAdmin
from benchmarks.runner import Config

REPO = Path(__file__).resolve().parents[2]

needs_git = pytest.mark.skipif(not (REPO / ".git").exists(), reason="needs a git checkout")


def _git(*args: str) -> str:
    command = ["git", "-C", str(REPO), *args]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _worktrees_under(directory: Path) -> list[str]:
    listing = _git("worktree", "list", "--porcelain").splitlines()
    paths = [Path(line.split(" ", 1)[1]) for line in listing if line.startswith("worktree ")]
    resolved = (path.resolve() for path in paths)
    return [str(path) for path in resolved if path.is_relative_to(directory.resolve())]


def test_each_chatledger_system_gets_a_twin_right_after_it() -> None:
    config = Config(systems=("chatledger", "limit", "chatledger_pg"), baseline="abc1234")
    assert config.all_systems() == (
        "chatledger",
        "chatledger@abc1234",
        "limit",
        "chatledger_pg",
        "chatledger_pg@abc1234",
    )
    assert Config(systems=("chatledger",)).all_systems() == ("chatledger",)
    twin = spec_for("chatledger_pg@abc1234")
    assert twin.backend == "postgresql"
    assert not twin.peer
    # the workloads of scale run the working tree alone (their harness needs its store)
    assert twin.workloads == spec_for("chatledger_pg").workloads - WORKING_TREE_ONLY
    assert "per_turn" in twin.workloads
    assert PgAdmin("", prefix="clbench_1").name("chatledger_pg@abc1234", "tpl", 200) == (
        "clbench_1_chatledger_pg_abc1234_tpl_200"
    )


async def test_a_child_measures_nothing_with_the_library_from_elsewhere(tmp_path: Path) -> None:
    answer = await run_spec(ChildSpec("probe", "chatledger", "file", "", source=str(tmp_path)))
    assert answer["status"] == "error"
    assert answer["reason"].startswith("store imported from")


@needs_git
def test_checkout_is_removed_when_interrupted(tmp_path: Path) -> None:
    with pytest.raises(KeyboardInterrupt), checkout("HEAD", repo=REPO, work_dir=tmp_path) as co:
        assert co.commit == _git("rev-parse", "HEAD")
        assert sorted(p.name for p in co.path.iterdir()) == ["store", "strategies"]
        assert (co.path / "store").resolve() == (co.root / "store").resolve()
        assert _worktrees_under(tmp_path) == [str(co.root.resolve())]
        raise KeyboardInterrupt
    assert not any(tmp_path.iterdir())
    assert _worktrees_under(tmp_path) == []


@needs_git
def test_baseline_runs_beside_the_working_tree(tmp_path: Path) -> None:
    out, work = tmp_path / "results", tmp_path / "work"
    work.mkdir()
    command = [sys.executable, "-m", "benchmarks", "--smoke", "--baseline", "HEAD"]
    command += ["--systems", "chatledger", "--workloads", "per_turn,bulk_import"]
    command += ["--out", str(out), "--work-dir", str(work)]
    done = subprocess.run(
        command, cwd=REPO, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3_000:]
    md_path, json_path = (Path(line) for line in done.stdout.split())
    report = json.loads(json_path.read_text())
    twin = f"chatledger@{_git('rev-parse', '--short', 'HEAD')}"
    assert report["config"]["baseline"] == twin.partition("@")[2]
    assert list(report["systems"]) == ["chatledger", twin]
    assert not report["skipped_systems"]
    failed = [case for case in report["cases"] if case["status"] != "ok"]
    assert not failed, failed
    for workload in ("per_turn", "bulk_import"):
        rows = {r["system"]: r for r in report["rows"] if r["workload"] == workload}
        assert set(rows) == {"chatledger", twin}, workload
        assert all(row["summary"]["median"] > 0 for row in rows.values())
        assert rows["chatledger"]["vs_chatledger"] == pytest.approx(1.0)
        assert rows[twin]["vs_chatledger"] > 0
    markdown = md_path.read_text()
    assert f"| {twin} | 200 |" in markdown
    assert "| chatledger | 200 |" in markdown
    assert not any(work.iterdir())
    assert _worktrees_under(work) == []
