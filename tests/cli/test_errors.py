"""Failures are one line on stderr and a non-zero exit, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from store import HistoryStore
from store.cli import main
from tests.cli.helpers import assert_one_line_error, chatledger


def test_missing_database_file_is_reported_and_not_created(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/absent.db"
    for args in (("sessions",), ("show", "s")):
        assert_one_line_error(chatledger(*args, "--url", url), contains="no database")
    assert not (tmp_path / "absent.db").exists()


def test_unknown_session(seeded: str) -> None:
    assert_one_line_error(chatledger("show", "nope", "--url", seeded), contains="'nope' not found")


@pytest.mark.parametrize(
    ("args", "contains", "code"),
    [
        (("bogus",), "no such command", 2),
        (("audit", "--phase", "sometimes"), "--phase", 2),
        (("audit", "--since", "last tuesday"), "--since", 2),
        (("sessions", "--url", "nosuchdialect://x"), "unsupported database", 1),
        (("demo", "--window", "2048", "--output-tokens", "1500"), "--output-tokens", 2),
    ],
)
def test_bad_input_is_one_line(
    seeded: str, args: tuple[str, ...], contains: str, code: int
) -> None:
    env = {"CHATLEDGER_URL": seeded} if "--url" not in args else {}
    result = chatledger(*args, env=env)
    assert_one_line_error(result, contains=contains)
    assert result.returncode == code


def test_unreachable_postgres_is_one_line(tmp_path: Path) -> None:
    url = "postgresql://nobody@127.0.0.1:9/none"
    assert_one_line_error(chatledger("sessions", "--url", url), contains="database")


def test_python_dash_m_is_the_same_entry_point(seeded: str) -> None:
    listed = chatledger("sessions", "--url", seeded, "--json", module=True)
    assert [item["session_id"] for item in listed.json()] == ["beta", "alpha"]  # newest first


def test_no_command_prints_help_and_exits_2() -> None:
    result = chatledger()
    assert result.returncode == 2
    assert "sessions" in result.stdout + result.stderr
    assert "Traceback" not in result.stderr


def test_a_file_that_is_not_a_database_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not a database, just some text" * 100)
    assert_one_line_error(chatledger("sessions", "--url", f"sqlite:///{path}"), contains="database")


def _boom(*args: object, **kwargs: object) -> object:
    raise RuntimeError("kaboom")


@pytest.mark.parametrize("debug", [False, True])
def test_unexpected_errors_are_one_line_unless_debugging(
    seeded: str, debug: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(HistoryStore, "sessions", _boom)
    if debug:
        monkeypatch.setenv("CHATLEDGER_DEBUG", "1")
    else:
        monkeypatch.delenv("CHATLEDGER_DEBUG", raising=False)
    with pytest.raises(SystemExit) as exited:
        main(["sessions", "--url", seeded])
    assert exited.value.code == 1
    err = capsys.readouterr().err
    assert "RuntimeError" in err and "kaboom" in err
    if debug:
        assert "Traceback" in err
    else:
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_the_cli_imports_no_integration() -> None:
    code = (
        "import sys, store.cli, store.demo; "
        "print(sorted(m for m in sys.modules "
        "if m.startswith(('store.integrations', 'agent_framework', 'agents', 'langchain'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
