"""Stored text never controls the operator's terminal.

Sessions, messages, author and tool names, message ids and exclusion reasons written by
a chat participant (or an imported source) hold escape sequences that would clear the
screen, set the window title, write the clipboard, move the cursor to fake rows, or
reorder a line (bidirectional overrides), and rich markup. Every command that prints
them writes them as visible escapes (``\\x1b``), piped and on a terminal; ``--json``
reads back to the exact stored text.
"""

from __future__ import annotations

import io
import json
import re
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest

from store import HistoryStore
from store.formats import AF_ANNOTATIONS_KEY
from strategies.messages import (
    FunctionCallContent,
    FunctionResultContent,
    Message,
    TextContent,
)
from tests.cli.helpers import Result, invoke, run_api
from tests.cli.test_on_a_terminal import at_terminal

EVIL = (
    "\x1b[2J\x1b[H"  # clear the screen, cursor home
    "\x1b]0;owned\x07"  # window title
    "\x1b]52;c;ZXZpbA==\x1b\\"  # clipboard
    "\x9b31m"  # C1 CSI
    "\x7f\x00\x08\x0b\x0c\x1c\x85"  # DEL, NUL, backspace, VT, FF, FS, NEL
    "[red]markup[/red] :warning: "
    "\u202egnp.exe\u2028\r\nline 2\tcol"
)
"""One of everything a participant could send to a terminal."""

SESSION = "s-" + EVIL.replace("\x00", "")  # a session id holds no NUL (PostgreSQL text)
OTHER = "x-" + EVIL.replace("\x00", "")
MESSAGE_ID = "m-" + EVIL.replace("\x00", "")
VISIBLE = "\\x1b[2J\\x1b[H\\x1b]0;owned\\x07"
"""How the start of :data:`EVIL` reads on any output: escapes a person can see."""

SGR = re.compile(r"\x1b\[[0-9;]*m")
"""The colour and weight codes rich writes on a terminal (the only escapes allowed)."""
_BIDI = {
    "\u061c",
    "\u200e",
    "\u200f",
    *map(chr, range(0x202A, 0x202F)),
    *"\u2066\u2067\u2068\u2069",
}


def _controlling(character: str) -> bool:
    if character == "\n":
        return False  # the line breaks the command writes between its own lines
    return unicodedata.category(character) in ("Cc", "Zl", "Zp") or character in _BIDI


def assert_inert(result: Result, *, terminal: bool) -> None:
    """Nothing of what ``result`` printed controls a terminal (besides rich's styles on
    a terminal), and rich markup of stored text was not interpreted."""
    for stream in (result.stdout, result.stderr):
        text = SGR.sub("", stream) if terminal else stream
        leaked = sorted({f"U+{ord(c):04X}" for c in text if _controlling(c)})
        assert not leaked, (leaked, stream)
    if "markup" in result.stdout:
        assert "[red]markup[/red]" in result.stdout
        assert ":warning:" in result.stdout


@pytest.fixture
def hostile(url: str) -> str:
    """``url`` with session :data:`SESSION` (a user message, an assistant tool call of
    a hostile name and author, its result) and :data:`OTHER`, imported with a message
    that its source excluded for a hostile reason."""

    async def fill(store: HistoryStore) -> None:
        await store.append(
            SESSION,
            [
                Message.text_message("user", "hello " + EVIL),
                Message(
                    role="assistant",
                    author_name="bob " + EVIL.replace("\x00", ""),
                    contents=[
                        FunctionCallContent(call_id="c1", name="tool" + EVIL, arguments={"q": EVIL})
                    ],
                    message_id=MESSAGE_ID,
                ),
                Message(role="tool", contents=[FunctionResultContent(call_id="c1", result=EVIL)]),
            ],
        )
        excluded = {AF_ANNOTATIONS_KEY: {"_excluded": True, "_exclude_reason": "why " + EVIL}}
        old = TextContent(text="old " + EVIL)
        await store.import_messages(
            OTHER,
            [
                Message(role="user", contents=[old], message_id="u1", metadata=excluded),
                Message(role="user", contents=[TextContent(text="new")], message_id="u2"),
            ],
        )

    run_api(url, fill)
    return url


COMMANDS = {
    "sessions": ["sessions"],
    "show": ["show", SESSION],
    "show-all": ["show", SESSION, "--all"],
    "show-other-all": ["show", OTHER, "--all"],
    "show-context": ["show", SESSION, "--context"],
    "why": ["why", SESSION, MESSAGE_ID],
    "why-excluded": ["why", OTHER, "u1"],
    "excluded": ["excluded", OTHER],
    "audit": ["audit"],
    "audit-session": ["audit", OTHER],
    "stats": ["stats", SESSION],
    "pin": ["pin", SESSION, "group_" + MESSAGE_ID],
    "purge": ["purge", "--older-than", "0s", "--dry-run"],
    "redact": ["redact", SESSION, MESSAGE_ID, "--reason", "asked", "--yes"],
}
"""Every command that prints stored text, and the arguments that make it print some."""


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_piped_output_shows_control_characters_as_escapes(hostile: str, command: str) -> None:
    result = invoke(*COMMANDS[command], "--url", hostile)
    assert_inert(result, terminal=False)
    assert VISIBLE in result.stdout + result.stderr


@pytest.mark.usefixtures("terminal")
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_terminal_output_shows_control_characters_as_escapes(
    hostile: str, command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "1000")  # wide enough that no id or text is shortened
    result = at_terminal(monkeypatch, *COMMANDS[command], "--url", hostile)
    assert_inert(result, terminal=True)
    assert VISIBLE in result.stdout + result.stderr


def test_a_session_id_stays_on_its_line(hostile: str) -> None:
    result = invoke("sessions", "--url", hostile)
    lines = result.stdout.splitlines()
    assert len(lines) == 2 + 2, result.stdout  # title, header, a row for each session
    assert "\\r\\nline 2\\tcol" in lines[2] + lines[3]


def test_show_writes_message_text_on_one_line(hostile: str) -> None:
    """In ``show`` a message's line breaks and tabs are spaces (the row is one line);
    every other control character is an escape."""
    result = invoke("show", SESSION, "--url", hostile)
    (first,) = [line for line in result.stdout.splitlines() if "hello" in line]
    assert first.endswith("\\u202egnp.exe line 2 col")
    assert "\\x1b]52;c;ZXZpbA==\\x1b\\" in first


JSON_TEXT = {
    "show": (["show", SESSION, "--all"], "hello " + EVIL),
    "sessions": (["sessions"], SESSION),
    "why": (["why", SESSION, MESSAGE_ID], MESSAGE_ID),
    "excluded": (["excluded", OTHER], "why " + EVIL),
}


@pytest.mark.parametrize("command", sorted(JSON_TEXT))
def test_json_keeps_the_exact_text_and_sends_no_control_character(
    hostile: str, command: str
) -> None:
    args, stored = JSON_TEXT[command]
    result = invoke(*args, "--url", hostile, "--json")
    assert result.returncode == 0, result
    assert_inert(result, terminal=False)
    assert any(stored in text for text in _texts(result.json()))


def _texts(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _texts(item)
    elif isinstance(value, list):
        for item in value:
            yield from _texts(item)


def test_json_reads_back_to_the_stored_text(hostile: str) -> None:
    result = invoke("show", SESSION, "--url", hostile, "--json")
    stored = result.json()
    assert stored[0]["session_id"] == SESSION
    assert stored[0]["message"]["contents"][0]["text"] == "hello " + EVIL
    assert stored[1]["message"]["author_name"] == "bob " + EVIL.replace("\x00", "")
    assert "\\u009b" in result.stdout and "\\u202e" in result.stdout


def test_export_to_stdout_reads_back_exactly(hostile: str) -> None:
    result = invoke("export", SESSION, "--format", "jsonl", "--url", hostile)
    assert result.returncode == 0, result
    assert_inert(result, terminal=False)
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert lines[0]["session_id"] == SESSION
    assert lines[0]["message"]["contents"][0]["text"] == "hello " + EVIL


def test_report_names_the_session_in_escapes(hostile: str, tmp_path: Path) -> None:
    target = tmp_path / "page.html"
    result = invoke("report", SESSION, "-o", str(target), "--url", hostile)
    assert result.returncode == 0, result
    assert_inert(result, terminal=False)
    assert VISIBLE in result.stdout


def test_delete_asks_and_says_in_escapes(
    hostile: str, monkeypatch: pytest.MonkeyPatch, terminal: None
) -> None:
    result = at_terminal(monkeypatch, "delete", SESSION, "--url", hostile, answer="y\n")
    assert result.returncode == 0, result
    assert_inert(result, terminal=True)
    assert VISIBLE in result.stdout


def test_an_import_refusal_naming_a_hostile_file_is_inert(url: str, tmp_path: Path) -> None:
    """A history folder's file names are data: a refusal that names one stays inert."""
    folder = tmp_path / "histories"
    folder.mkdir()
    (folder / "\x1b[2J\x1b[H\x1b]0;owned\x07.jsonl").write_text("{broken\n", encoding="utf-8")
    result = invoke("import", str(folder), "--url", url)
    assert result.returncode == 1
    assert_inert(result, terminal=False)
    assert VISIBLE + ".jsonl: line 1: not JSON" in result.stderr


def test_an_unexpected_error_quoting_stored_text_is_inert(monkeypatch: pytest.MonkeyPatch) -> None:
    from store.cli import _read

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("failed on " + EVIL)

    monkeypatch.setattr(_read, "with_store", broken)
    result = invoke("sessions")
    assert result.returncode == 1
    assert_inert(result, terminal=False)
    assert VISIBLE in result.stderr


def test_rich_markup_in_a_styled_line_is_not_interpreted(monkeypatch: pytest.MonkeyPatch) -> None:
    from store.cli._output import echo

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    out = Terminal()
    monkeypatch.setattr("sys.stdout", out)
    echo("[red]markup[/red] :warning: " + EVIL, style="bold")
    assert "[red]markup[/red] :warning:" in out.getvalue()
    assert VISIBLE in out.getvalue()
    assert not [c for c in SGR.sub("", out.getvalue()) if _controlling(c)]
