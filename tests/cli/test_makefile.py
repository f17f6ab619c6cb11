"""``make demo`` installs what the demo needs, ``make test`` every extra (dry runs of the
Makefile's stamps, ``make -n``: nothing is installed)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the Makefile and pyproject.toml with a venv whose interpreter exists."""
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").touch()
    _age(tmp_path / "pyproject.toml", 100)
    return tmp_path


def _age(path: Path, seconds: int) -> None:
    stamp = path.stat().st_mtime - seconds
    os.utime(path, (stamp, stamp))


def _plan(project: Path, target: str) -> list[str]:
    """The pip commands ``make TARGET`` would run."""
    done = subprocess.run(
        ["make", "-n", target], cwd=project, capture_output=True, text=True, check=True
    )
    return [line for line in done.stdout.splitlines() if "pip install" in line]


def test_demo_installs_chatledger_alone_and_visibly(project: Path) -> None:
    [install] = _plan(project, "demo")
    assert install.endswith("pip install -e .") and "--quiet" not in install


def test_test_installs_every_extra_after_a_demo(project: Path) -> None:
    (project / ".venv" / ".installed-demo").touch()
    assert _plan(project, "demo") == []
    planned = _plan(project, "test")
    [install] = [line for line in planned if line.startswith(".venv/bin/")]
    assert "-e '.[dev,agent-framework,openai-agents,langchain,bench]'" in install
    # and the second environment, for the oldest Agent Framework the adapters support
    [oldest] = [line for line in planned if "-r .venv-af123/requirements.txt" in line]
    assert oldest.startswith(".venv-af123/bin/") and "'agent-framework-core==1.23.0'" in oldest


def test_a_full_install_serves_the_demo_until_pyproject_changes(project: Path) -> None:
    for stamp in (".installed", ".installed-demo"):
        (project / ".venv" / stamp).touch()
    assert _plan(project, "demo") == [] and _plan(project, "pytest") == []
    (project / "pyproject.toml").touch()
    assert [line.rsplit(" ", 1)[1] for line in _plan(project, "demo")] == ["."]
    assert len(_plan(project, "pytest")) == 1
