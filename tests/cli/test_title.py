"""``chatledger title``: show, set and remove a session's title; ``sessions`` and
``show`` print it; bad titles and unknown sessions refused in one line."""

from __future__ import annotations

import re

import pytest

from tests.cli.helpers import assert_one_line_error, chatledger
from tests.cli.test_on_a_terminal import at_terminal

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def test_title_is_set_shown_listed_and_removed(seeded: str) -> None:
    assert chatledger("title", "alpha", "--url", seeded).stdout == ("Session alpha has no title.\n")
    listed = chatledger("sessions", "--url", seeded).stdout
    assert "title" not in listed.splitlines()[1]  # no column while no session has one
    done = chatledger("title", "alpha", "Quarterly report review", "--url", seeded)
    assert (done.returncode, done.stdout) == (0, "titled alpha: Quarterly report review\n")
    assert chatledger("title", "alpha", "--url", seeded).stdout == "Quarterly report review\n"
    rows = chatledger("sessions", "--url", seeded).stdout.splitlines()
    assert rows[1].split()[-1] == "title"
    assert next(r for r in rows if r.startswith("alpha")).endswith("Quarterly report review")
    heading = chatledger("show", "alpha", "--url", seeded).stdout.splitlines()[0]
    assert heading.startswith("Session alpha (Quarterly report review): ")
    as_json = chatledger("title", "alpha", "--url", seeded, "--json").json()
    assert (as_json["session_id"], as_json["title"]) == ("alpha", "Quarterly report review")
    cleared = chatledger("title", "alpha", "--clear", "--url", seeded)
    assert cleared.stdout == "removed the title of alpha\n"
    assert chatledger("sessions", "--url", seeded, "--json").json()[0]["title"] is None


def test_bad_titles_and_unknown_sessions_are_refused_in_one_line(seeded: str) -> None:
    assert_one_line_error(
        chatledger("title", "nosuch", "x", "--url", seeded), contains="'nosuch' not found"
    )
    assert_one_line_error(
        chatledger("title", "alpha", "two\nlines", "--url", seeded), contains="one line"
    )
    assert_one_line_error(
        chatledger("title", "alpha", "x" * 501, "--url", seeded), contains="at most 500"
    )
    both = chatledger("title", "alpha", "x", "--clear", "--url", seeded)
    assert both.returncode == 2 and "not both" in both.stderr
    missing = chatledger("sessions", "--url", seeded, "--json").json()
    assert {s["session_id"] for s in missing} == {"alpha", "beta"}  # nothing created
    assert all(s["title"] is None for s in missing)


@pytest.mark.usefixtures("terminal")
def test_a_long_title_is_shortened_to_fit_80_columns(
    seeded: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    long = "Weekend trip planning with a title that goes on well past the terminal's width"
    assert chatledger("title", "alpha", long, "--url", seeded).returncode == 0
    monkeypatch.setenv("COLUMNS", "80")
    shown = at_terminal(monkeypatch, "sessions", "--url", seeded)
    lines = ANSI.sub("", shown.stdout).splitlines()
    assert all(len(line) <= 80 for line in lines)
    row = next(line for line in lines if line.startswith("alpha"))
    assert "Weekend trip" in row and row.endswith("…")
