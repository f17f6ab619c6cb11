"""Fast start, by the modules a command loads (never by a timing): ``--help`` and
``--version`` load neither SQLAlchemy nor tiktoken, and reads that count nothing load
no tokenizer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.helpers import conversation, run_api

HEAVY = ("sqlalchemy", "tiktoken", "alembic", "pydantic", "asyncpg", "aiosqlite", "rich")
PROBE = """
import json, sys
from store.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exited:
    code = exited.code
print(json.dumps({"code": code, "modules": sorted({m.split(".")[0] for m in sys.modules})}),
      file=sys.stderr)
"""


def _loaded(*args: str) -> set[str]:
    """The top-level packages loaded by ``chatledger ARGS``, which must succeed."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, check=False
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    assert report["code"] == 0, done.stderr
    return set(report["modules"])


@pytest.mark.parametrize("args", [("--help",), ("-h",), ("--version",), ("db", "--help")])
def test_help_and_version_load_nothing_heavy(args: tuple[str, ...]) -> None:
    loaded = _loaded(*args)
    assert "click" in loaded
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_reads_that_count_nothing_load_no_tokenizer(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    run_api(url, lambda s: s.append("s", conversation(2)))
    for args in (("sessions",), ("show", "s"), ("audit",), ("stats", "s"), ("excluded", "s")):
        loaded = _loaded(*args, "--url", url)
        assert "sqlalchemy" in loaded, args  # the store did run
        assert "tiktoken" not in loaded, args
    assert "tiktoken" in _loaded("show", "s", "--context", "--url", url)  # it counts
