"""``--baseline``: chatledger at another commit, beside the working tree, in one run.

No timing is asserted: only that the library comes from the right source, and that
the temporary worktree is gone afterwards.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from benchmarks.baseline import checkout
from benchmarks.child import ChildSpec, run_spec

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
