"""Ids as people type them: a whole id first, else a unique start of one (as a terminal
shows it), else for a message its seq; display widths of wide text and emoji."""

from __future__ import annotations

from pathlib import Path

import pytest

from store.cli._prefix import MIN_ID, matching, unique_lengths
from store.cli._width import cut, width
from tests.cli.helpers import api, conversation, invoke, ok


def test_unique_lengths_are_the_shortest_unshared_starts() -> None:
    ids = ["m-abc123456", "m-abd999999", "m-zzzzzzzzzzzz", "short"]
    lengths = unique_lengths(ids, among=["m-abc123499"])
    assert lengths["m-abc123456"] == len("m-abc1234") + 1  # shares m-abc1234 with one among
    assert lengths["m-abd999999"] == MIN_ID
    assert lengths["short"] == len("short")  # never more than the whole id
    assert unique_lengths(["ab", "abcdefghijk"]) == {"ab": 2, "abcdefghijk": MIN_ID}


def test_matching_prefers_the_whole_id() -> None:
    assert matching("ab", ["ab", "abc"]) == ["ab"]
    assert matching("a", ["ab", "abc", "b"]) == ["ab", "abc"]
    assert matching("x", ["ab"]) == []


def test_display_width_counts_wide_characters_and_emoji_twice() -> None:
    assert width("abc") == 3
    assert width("✅") == 2
    assert width("漢字") == 4
    assert width("❤️") == 2  # a text heart asked to be an emoji
    assert width("e\u0301") == 1  # a combining accent takes no cell
    assert cut("漢字漢字", 5) == "漢字…"
    assert width(cut("✅✅✅", 4)) <= 4
    assert cut("short", 10) == "short"


@pytest.fixture
def ids(seeded: str) -> dict[str, str]:
    """The ids of session ``alpha``'s first tool result (its message, seq and group)."""
    stored = api(seeded, "history", "alpha", include_excluded=True)
    tool = next(m for m in stored if m.role == "tool")
    return {"message": tool.message_id, "seq": str(tool.seq), "group": tool.group_id}


def test_why_takes_an_id_a_unique_start_or_a_seq(seeded: str, ids: dict[str, str]) -> None:
    whole = ok("why", "alpha", ids["message"], "--url", seeded, "--json").json()
    by_seq = ok("why", "alpha", ids["seq"], "--url", seeded, "--json").json()
    by_start = ok("why", "alpha", ids["message"][:12], "--url", seeded, "--json").json()
    assert whole == by_seq == by_start
    assert whole["message_id"] == ids["message"]
    said = ok("why", "alpha", ids["seq"], "--url", seeded).stdout
    assert said.startswith(ids["message"])


def test_an_ambiguous_start_is_refused_with_the_ids_it_starts(seeded: str) -> None:
    done = invoke("why", "alpha", "m", "--url", seeded)
    assert done.returncode == 2
    assert "is the start of" in done.stderr and "type more of it" in done.stderr


def test_a_start_of_nothing_is_not_found_in_the_stores_words(seeded: str) -> None:
    done = invoke("why", "alpha", "nothing-like-it", "--url", seeded)
    assert done.returncode == 1
    assert "nothing-like-it" in done.stderr


def test_session_arguments_take_a_unique_start(seeded: str) -> None:
    assert ok("stats", "alp", "--url", seeded, "--json").json()["session_id"] == "alpha"
    shown = ok("show", "alp", "--url", seeded).stdout
    assert shown.startswith("Session alpha:")
    assert invoke("stats", "zeta", "--url", seeded).returncode == 1


def test_pin_and_restore_take_a_unique_start_of_a_group(seeded: str, ids: dict[str, str]) -> None:
    start = ids["group"][:14]
    pinned = ok("pin", "alpha", start, "--url", seeded, "--json").json()
    assert pinned == {"changed": [ids["group"]]}
    unpinned = ok("unpin", "alpha", start, "--url", seeded, "--json").json()
    assert unpinned == {"changed": [ids["group"]]}


@pytest.mark.parametrize(
    "args",
    [
        ("audit", "alp"),
        ("excluded", "alp"),
        ("branches", "alp"),
        ("doctor", "alp"),
        ("show", "alp", "--context"),
        ("compact", "alp", "--strategy", "truncation:max_n=4,compact_to=2", "--dry-run"),
        ("recount", "alp", "--tokenizer", "character_estimator"),
    ],
)
def test_every_session_argument_takes_a_unique_start(seeded: str, args: tuple[str, ...]) -> None:
    done = ok(*args, "--url", seeded)
    assert "alpha" in done.stdout or "1 sessions" in done.stdout, done.stdout


def test_export_and_report_take_a_unique_start(seeded: str, tmp_path: Path) -> None:
    exported = ok("export", "alp", "--format", "jsonl", "--url", seeded).stdout
    assert '"alpha"' in exported
    written = ok("report", "alp", "-o", str(tmp_path / "r.html"), "--url", seeded).stdout
    assert "session alpha" in written


def test_a_start_two_sessions_share_is_refused(seeded: str) -> None:
    api(seeded, "append", "alps", conversation(1))
    done = invoke("stats", "al", "--url", seeded)
    assert done.returncode == 2 and "alpha, alps" in done.stderr
