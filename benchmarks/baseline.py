"""chatledger at another commit, for ``--baseline``: a temporary git worktree.

:func:`checkout` adds a detached worktree of the commit in a temporary directory and
removes it on the way out, whether the run ends, fails or is interrupted. Beside the
worktree, an import directory holds only ``store`` and ``strategies`` (links into the
worktree): a baseline child runs with that directory first on its path, then the
working tree for ``benchmarks`` itself, so that both sides run the same harness and
only the library differs. The child checks where ``store`` and ``strategies`` came
from (:func:`imported_elsewhere`) before it measures anything.
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LIBRARY", "Checkout", "checkout", "imported_elsewhere"]

LIBRARY = ("store", "strategies")
"""The packages taken from the baseline commit; everything else is the working tree's."""


@dataclass(frozen=True, slots=True)
class Checkout:
    """A commit checked out in a temporary worktree."""

    commit: str
    """Full hash."""
    short: str
    """Abbreviated hash, as in the baseline systems' names."""
    root: Path
    """The worktree; ``store`` and ``strategies`` must be imported from inside it."""
    path: Path
    """The import directory: ``store`` and ``strategies`` only."""

    def child_env(self, repo: Path) -> dict[str, str]:
        """The environment of a child: the import directory first, then ``repo``."""
        paths = [str(self.path), str(repo)]
        if os.environ.get("PYTHONPATH"):
            paths.append(os.environ["PYTHONPATH"])
        return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


@contextmanager
def checkout(rev: str, *, repo: Path, work_dir: Path | None = None) -> Iterator[Checkout]:
    """Check out ``rev`` of ``repo`` in a temporary worktree, removed on the way out."""
    commit = _git(repo, "rev-parse", "--verify", f"{rev}^{{commit}}")
    short = _git(repo, "rev-parse", "--short", commit)
    temporary = Path(tempfile.mkdtemp(prefix=f"clbench-{short}-", dir=work_dir))
    root, path = temporary / "worktree", temporary / "python"
    try:
        _git(repo, "worktree", "add", "--detach", "--quiet", str(root), commit)
        path.mkdir()
        for package in LIBRARY:
            if not (root / package / "__init__.py").is_file():
                raise SystemExit(f"commit {short} ({rev}) has no {package} package")
            (path / package).symlink_to(root / package, target_is_directory=True)
        yield Checkout(commit, short, root, path)
    finally:
        _remove(repo, root)
        shutil.rmtree(temporary, ignore_errors=True)


def _remove(repo: Path, root: Path) -> None:
    if not root.exists():
        return
    command = ["git", "-C", str(repo), "worktree", "remove", "--force", str(root)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(
            f"git worktree remove {root}: {done.stderr.strip()} "
            "(`git worktree prune` drops the entry once the directory is gone)",
            file=sys.stderr,
        )


def imported_elsewhere(root: str) -> str | None:
    """None when ``store`` and ``strategies`` are imported from inside ``root``, else
    where one of them came from instead."""
    inside = Path(root).resolve()
    for package in LIBRARY:
        module = importlib.import_module(package)
        if module.__file__ is None:
            return f"{package} is a namespace package here, not the baseline's at {inside}"
        where = Path(module.__file__).resolve()
        if not where.is_relative_to(inside):
            return f"{package} imported from {where}, not from the baseline at {inside}"
    return None
