"""Every table at a real terminal 60, 80 and 120 columns wide (a pseudo-terminal running
the console script): no line is longer than the terminal, every id is a unique start
of the id ``--json`` gives, every number is whole; piped, every id and text is whole."""

from __future__ import annotations

import subprocess
from collections.abc import Iterable, Iterator
from typing import Any

import pytest

from store import HistoryStore
from store.cli._output import number
from store.cli._prefix import MIN_ID, matching
from store.cli._visible import flowing
from store.cli._width import width
from strategies.messages import Message
from tests.cli.helpers import SCRIPT, chatledger, conversation, run_api
from tests.cli.pseudo_terminal import Screen, on_terminal

SESSION = "demo-9c7a53279f60"
LONG = "b" * 40
WIDE = "wide-✅"
WIDE_TEXT = "✅ done — 漢字とかな ❤️ ok " * 6
DRY_RUN = ("--strategy", "sliding-window:keep_last_groups=1", "--dry-run")
WIDTHS = [60, 80, 120]


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A demo session (compacted many times), a session with a 40-character id, one of
    wide characters and emoji, and a second tenant."""
    value = f"sqlite:///{tmp_path_factory.mktemp('pty')}/pty.db"
    done = subprocess.run(
        [str(SCRIPT), "demo", "--turns", "30", "--session", SESSION, "--url", value],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr

    async def fill(store: HistoryStore) -> None:
        await store.append(LONG, conversation(2))
        await store.append(WIDE, [Message.text_message("user", WIDE_TEXT)] * 1)

    run_api(value, fill)
    run_api(value, lambda s: s.append("other-session", conversation(1)), tenant="t2")
    yield value


COMMANDS: dict[str, tuple[str, ...]] = {
    "help": ("--help",),
    "sessions": ("sessions",),
    "tenants": ("tenants",),
    "show": ("show", SESSION),
    "show-all": ("show", SESSION, "--all"),
    "show-context": ("show", SESSION, "--context"),
    "show-wide": ("show", WIDE, "--all"),
    "show-long": ("show", LONG),
    "audit": ("audit", SESSION),
    "audit-tenant": ("audit",),
    "excluded": ("excluded", SESSION),
    "stats": ("stats", SESSION),
    "stats-tenant": ("stats",),
    "dry-run": ("compact", SESSION, *DRY_RUN),
    "why": ("why", SESSION, "5"),
    "branches": ("branches", SESSION),
    "db-history": ("db", "history"),
    "doctor": ("doctor", SESSION),
    "redact-dry-run": ("redact", SESSION, "2", "3", "--reason", "erasure", "--dry-run"),
    "purge-dry-run": ("purge", "--older-than", "1d", "--dry-run"),
    "version": ("version",),
    "search": ("search", "tool"),
    "search-wide": ("search", "done", "--session", WIDE),
}


def _screen(url: str, args: tuple[str, ...], columns: int) -> Screen:
    url_args = () if args in (("--help",), ("version",)) else ("--url", url)
    screen = on_terminal(*args, *url_args, columns=columns)
    assert screen.returncode == 0, screen.text
    return screen


@pytest.mark.parametrize("columns", WIDTHS)
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_no_line_is_longer_than_the_terminal(url: str, command: str, columns: int) -> None:
    screen = _screen(url, COMMANDS[command], columns)
    too_long = [line for line in screen.lines if width(line) > columns]
    assert not too_long, screen.text


def _json(url: str, *args: str) -> Any:
    done = chatledger(*args, "--url", url, "--json")
    assert done.returncode == 0, done.stderr
    return done.json()


def _assert_rows(
    screen: Screen, expected: Iterable[tuple[list[str], list[str]]], ids: Iterable[str]
) -> None:
    """Each expected row (its ids, its numbers) is one line of ``screen``: each number a
    whole word, each id a word that starts it and no other id of ``ids``."""
    known = set(ids)
    words = [line.split() for line in screen.lines]
    for wanted_ids, numbers in expected:

        def holds(
            line: list[str], wanted_ids: list[str] = wanted_ids, numbers: list[str] = numbers
        ) -> bool:
            return all(n in line for n in numbers) and all(
                any((w == i or len(w) >= MIN_ID) and matching(w, known) == [i] for w in line)
                for i in wanted_ids
            )

        assert any(holds(line) for line in words), (wanted_ids, numbers, screen.text)


@pytest.mark.parametrize("columns", WIDTHS)
def test_show_all_rows_carry_seq_id_and_tokens(url: str, columns: int) -> None:
    stored = _json(url, "show", SESSION, "--all")
    screen = _screen(url, ("show", SESSION, "--all"), columns)
    _assert_rows(
        screen,
        [
            (
                [m["message"]["message_id"]],
                [str(m["seq"]), number(m["reduced_token_count"] or m["token_count"])],
            )
            for m in stored
        ],
        [m["message"]["message_id"] for m in stored],
    )
    assert len(screen.lines) == 2 + len(stored)


@pytest.mark.parametrize("columns", WIDTHS)
def test_sessions_rows_carry_ids_and_numbers(url: str, columns: int) -> None:
    sessions = _json(url, "sessions")
    screen = _screen(url, ("sessions",), columns)
    _assert_rows(
        screen,
        [
            ([s["session_id"]], [number(s["stored_messages"]), number(s["stored_tokens"])])
            for s in sessions
        ],
        [s["session_id"] for s in sessions],
    )


@pytest.mark.parametrize("columns", WIDTHS)
def test_excluded_audit_and_dry_run_rows_carry_ids_and_numbers(url: str, columns: int) -> None:
    groups = {m["group_id"] for m in _json(url, "show", SESSION, "--all")}
    excluded = _json(url, "excluded", SESSION)
    _assert_rows(
        _screen(url, ("excluded", SESSION), columns),
        [([g["group_id"]], [number(g["tokens"])]) for g in excluded],
        groups,
    )
    events = _json(url, "audit", SESSION)
    _assert_rows(
        _screen(url, ("audit", SESSION), columns),
        [([e["id"]], [number(e["tokens_before"]), number(e["tokens_after"])]) for e in events],
        [e["id"] for e in events],
    )
    what_if = _json(url, "compact", SESSION, *DRY_RUN)
    _assert_rows(
        _screen(url, ("compact", SESSION, *DRY_RUN), columns),
        [([g["group_id"]], [number(g["tokens_before"])]) for g in what_if["groups"]],
        groups | {g["group_id"] for g in what_if["groups"]},
    )


def test_every_id_a_terminal_shows_is_accepted_by_the_commands(url: str) -> None:
    screen = _screen(url, ("show", SESSION, "--all"), 60)
    stored = _json(url, "show", SESSION, "--all")
    shown = {line.split()[0]: line.split()[1] for line in screen.lines[2:]}
    excluded = next(m for m in stored if m["excluded"])
    prefix = shown[str(excluded["seq"])]
    assert prefix != excluded["message"]["message_id"], "nothing was shortened at 60"
    by_prefix = _json(url, "why", SESSION, prefix)
    by_seq = _json(url, "why", SESSION, str(excluded["seq"]))
    assert by_prefix == by_seq
    assert by_prefix["message_id"] == excluded["message"]["message_id"]
    session_prefix = SESSION[:9]
    assert _json(url, "stats", session_prefix)["session_id"] == SESSION


def test_piped_output_is_never_shortened(url: str) -> None:
    for session in (SESSION, WIDE, LONG):
        stored = _json(url, "show", session, "--all")
        lines = chatledger("show", session, "--all", "--url", url).stdout.splitlines()
        assert len(lines) == 2 + len(stored)
        for m in stored:
            (line,) = [row for row in lines[2:] if row.split()[0] == str(m["seq"])]
            assert line.split()[1] == m["message"]["message_id"]
            texts = [c["text"] for c in m["message"]["contents"] if c["type"] == "text"]
            if m["reduced"] is None and len(texts) == len(m["message"]["contents"]):
                assert line.endswith(flowing(" | ".join(texts))), line
    sessions = _json(url, "sessions")
    listed = chatledger("sessions", "--url", url).stdout.splitlines()[2:]
    assert sorted(line.split()[0] for line in listed) == sorted(s["session_id"] for s in sessions)
