"""``chatledger compact SESSION --reason WHY [--focus WHAT] [--strategy SPEC]``: a request
that waits for the session's next compaction, or one run now; bad input refused in one
line."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from store import HistoryStore
from store.models import CompactionEvent
from tests.cli.helpers import api, assert_one_line_error, conversation, invoke, ok, run_api

QUIET = "truncation:max_n=400,compact_to=4"
"""Never fires on the session by itself: only a request makes it act."""


@pytest.fixture
def cli_url(db_url: str) -> Iterator[str]:
    """``db_url`` with session ``alpha`` (3 tool turns)."""

    async def fill(store: HistoryStore) -> None:
        await store.append("alpha", conversation(3))

    run_api(db_url, fill)
    yield db_url


def test_a_request_waits_for_the_next_compaction(cli_url: str) -> None:
    assert ok("compact", "alpha", "--strategy", QUIET, "--url", cli_url, "--json").json() is None
    asked = ok(
        "compact", "alpha", "--reason", "topic changed", "--focus", "names", "--url", cli_url
    )
    assert asked.stdout == "Compaction asked for in alpha (topic changed): the next one runs it.\n"
    assert api(cli_url, "audit", "alpha") == []  # nothing ran yet
    done = ok("compact", "alpha", "--strategy", QUIET, "--url", cli_url)
    assert done.stdout.endswith("asked for: topic changed)\n")
    (event,) = api(cli_url, "audit", "alpha")
    assert (event.reason, event.focus, event.phase) == ("topic changed", "names", "manual")
    assert api(cli_url, "stats", "alpha").active_messages <= 4  # whole groups go
    # consumed: the strategy is back to its triggers
    again = ok("compact", "alpha", "--strategy", QUIET, "--url", cli_url)
    assert again.stdout.startswith("Nothing to compact")


def test_a_request_with_a_strategy_runs_now(cli_url: str) -> None:
    shown = ok(
        "compact", "alpha", "--reason", "too long", "--strategy", QUIET, "--url", cli_url, "--json"
    ).json()
    event = CompactionEvent.model_validate(shown)
    assert (event.reason, event.focus) == ("too long", None)
    assert shown["params"]["request"] == {"reason": "too long", "focus": None}
    assert api(cli_url, "audit", "alpha") == [event]


def test_focus_alone_asks_with_reason_manual(cli_url: str) -> None:
    waiting = ok("compact", "alpha", "--focus", "the plan", "--url", cli_url, "--json").json()
    assert waiting == {
        "session_id": "alpha",
        "requested": True,
        "reason": "manual",
        "focus": "the plan",
    }


@pytest.mark.parametrize(
    ("args", "says", "code"),
    [
        ((), "give --strategy SPEC", 2),
        (("--reason", "x", "--dry-run"), "--dry-run", 2),
        (("--reason", "a" * 201), "1 to 200", 1),
        (("--reason", "x", "--strategy", "nonesuch"), "strategy", 2),
    ],
)
def test_bad_requests_are_refused_in_one_line(
    cli_url: str, args: tuple[str, ...], says: str, code: int
) -> None:
    result = invoke("compact", "alpha", "--url", cli_url, *args)
    assert_one_line_error(result, contains=says)
    assert result.returncode == code


def test_an_unknown_session_is_refused(cli_url: str) -> None:
    result = invoke("compact", "nope", "--reason", "x", "--url", cli_url)
    assert_one_line_error(result, contains="not found")
