"""What the commands do when a person sits at a terminal: ``redact`` asks and obeys the
answer, tables are drawn with styles; :func:`store.cli.main` runs in this process with
streams that say they are terminals, on SQLite and PostgreSQL."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from store import HistoryStore
from store.cli import main
from store.models import StoredMessage
from store.rules.erasure import REDACTED_TEXT
from tests.cli.helpers import Result, conversation, run_api

ANSI = re.compile(r"\x1b\[[0-9;]*m")


class Terminal(io.StringIO):
    """A captured stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def cli_url(db_url: str) -> Iterator[str]:
    """``db_url`` with session ``alpha`` (2 tool turns) of tenant default."""

    async def fill(store: HistoryStore) -> None:
        await store.append("alpha", conversation(2))

    run_api(db_url, fill)
    yield db_url


def at_terminal(monkeypatch: pytest.MonkeyPatch, *args: str, answer: str = "") -> Result:
    """Run ``chatledger ARGS`` with a person at the terminal who types ``answer``."""
    monkeypatch.setattr("sys.stdin", Terminal(answer))
    out, err = Terminal(), Terminal()
    code: int | str | None = 0
    with redirect_stdout(out), redirect_stderr(err):
        try:
            main(list(args))
        except SystemExit as exited:
            code = exited.code
    returncode = code if isinstance(code, int) else (0 if code is None else 1)
    return Result(tuple(args), returncode, out.getvalue(), err.getvalue())


def _history(url: str) -> dict[str, StoredMessage]:
    async def read(store: HistoryStore) -> list[StoredMessage]:
        return await store.history("alpha", include_excluded=True)

    return {m.message_id: m for m in run_api(url, read)}


def _first_question(url: str) -> str:
    return next(m.message_id for m in _history(url).values() if m.role == "user")


@pytest.mark.usefixtures("terminal")
def test_redact_asks_and_a_no_changes_nothing(
    cli_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _first_question(cli_url)
    refused = at_terminal(
        monkeypatch, "redact", "alpha", first, "--reason", "gdpr", "--url", cli_url, answer="n\n"
    )
    assert refused.returncode == 1
    assert "Redact 1 message of session alpha (tenant default) for good?" in refused.stdout
    assert ANSI.sub("", refused.stderr).strip() == (
        "chatledger: error: not confirmed: nothing changed"
    )
    assert _history(cli_url)[first].message.text == "question 1"


@pytest.mark.usefixtures("terminal")
def test_redact_asks_and_a_yes_redacts(cli_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    first = _first_question(cli_url)
    done = at_terminal(
        monkeypatch, "redact", "alpha", first, "--reason", "gdpr", "--url", cli_url, answer="y\n"
    )
    assert done.returncode == 0, done
    assert "redacted 1 message" in ANSI.sub("", done.stdout)
    assert _history(cli_url)[first].message.text == REDACTED_TEXT


@pytest.mark.usefixtures("terminal")
def test_show_draws_a_styled_table_with_the_same_rows(
    cli_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    shown = at_terminal(monkeypatch, "show", "alpha", "--url", cli_url)
    assert shown.returncode == 0, shown
    assert ANSI.search(shown.stdout), "no styles on a colour terminal"
    lines = ANSI.sub("", shown.stdout).splitlines()
    assert lines[0].startswith("Session alpha")
    stored = list(_history(cli_url).values())
    assert [line.split()[0] for line in lines[2:]] == [str(n) for n in range(1, len(stored) + 1)]
    assert all(m.role in line for m, line in zip(stored, lines[2:], strict=True))
    assert "question 1" in lines[3] and "answer 2" in lines[-1]
    assert all(len(line) <= 120 for line in lines)
    monkeypatch.setenv("NO_COLOR", "1")
    plain = at_terminal(monkeypatch, "show", "alpha", "--url", cli_url)
    assert not ANSI.search(plain.stdout)
    assert plain.stdout.splitlines() == lines


@pytest.mark.usefixtures("terminal")
def test_import_on_a_terminal_shows_a_transient_bar_and_imports(
    db_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    source = tmp_path / "chats.jsonl"
    conversations = [
        {"id": f"c{n}", "messages": [{"role": "user", "content": f"hello {n}"}]} for n in range(3)
    ]
    source.write_text("".join(json.dumps(c) + "\n" for c in conversations))
    done = at_terminal(
        monkeypatch, "import", str(source), "--format", "openai-chat", "--create", "--url", db_url
    )
    assert done.returncode == 0, done
    assert ANSI.sub("", done.stdout).startswith("3 sessions, 3 messages")
    assert "chatledger: validate:" not in done.stderr  # the bar, not the plain lines of a pipe
    assert "Traceback" not in done.stderr

    async def sessions(store: HistoryStore) -> list[str]:
        return sorted(s.session_id for s in await store.sessions())

    assert run_api(db_url, sessions) == ["c0", "c1", "c2"]
