"""``fork``, ``rewind`` and ``branches`` through the real entry point, on SQLite and
PostgreSQL, and ``show`` and ``report`` of a fork (``docs/branches.md``).

``alpha`` is a system prompt and three tool turns (13 messages: seq 1 the prompt, then
per turn a question, a call, its result and an answer); the cut used most is the answer
of turn 1 (seq 5), which leaves two whole turns after it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from store import HistoryStore
from store.models import BranchInfo, CompactionEvent, SessionInfo, StoredMessage
from strategies.messages import Message
from tests.cli import helpers
from tests.cli.helpers import (
    Result,
    api,
    assert_one_line_error,
    conversation,
    invoke,
    rows,
    run_api,
)


@pytest.fixture
def cli_url(db_url: str) -> Iterator[str]:
    """``db_url`` with ``alpha`` (3 tool turns) and ``beta`` (1 turn), tenant default, and
    ``gamma`` (1 turn) of tenant ``other``."""

    async def fill(store: HistoryStore) -> None:
        await store.append("alpha", conversation(3))
        await store.append("beta", conversation(1))

    async def fill_other(store: HistoryStore) -> None:
        await store.append("gamma", conversation(1))

    run_api(db_url, fill)
    run_api(db_url, fill_other, tenant="other")
    yield db_url


def ok(*args: str) -> Result:
    """Run a command that must succeed, with nothing on stderr."""
    result = helpers.ok(*args)
    assert result.stderr == "", result.stderr
    return result


def stored(url: str, session_id: str) -> list[StoredMessage]:
    return list(api(url, "history", session_id, include_excluded=True))


def first_answer(url: str) -> StoredMessage:
    """The answer of ``alpha``'s first turn (seq 5): a cut between whole turns."""
    message = stored(url, "alpha")[4]
    assert message.seq == 5 and message.role == "assistant" and message.kind == "assistant_text"
    return message


def first_call(url: str) -> tuple[StoredMessage, StoredMessage]:
    """The call of ``alpha``'s first turn and its result, right after it."""
    call, result = stored(url, "alpha")[2:4]
    assert call.kind == "tool_call" and result.role == "tool"
    return call, result


# -- fork ------------------------------------------------------------------------------


def test_fork_at_a_message_prints_the_new_session_and_what_it_inherited(cli_url: str) -> None:
    cut = first_answer(cli_url)
    done = ok("fork", "alpha", "--at", cut.message_id, "--as", "alpha-retry", "--url", cli_url)
    lines = done.stdout.splitlines()
    assert lines[0] == f"forked alpha at {cut.message_id} as alpha-retry"
    assert lines[1].startswith("5 messages, ") and "inherited 4 groups" in lines[1]
    info = api(cli_url, "session", "alpha-retry")
    assert info.parent_session_id == "alpha" and info.fork_message_id == cut.message_id
    assert [m.message_id for m in stored(cli_url, "alpha-retry")] == [
        m.message_id for m in stored(cli_url, "alpha")[:5]
    ]
    assert api(cli_url, "session", "alpha").stored_messages == 13  # the parent is untouched


def test_fork_json_is_the_forks_session_info(cli_url: str) -> None:
    cut = first_answer(cli_url)
    shown = ok("fork", "alpha", "--at", cut.message_id, "--as", "f1", "--url", cli_url, "--json")
    info = SessionInfo.model_validate(shown.json())
    assert info == api(cli_url, "session", "f1")
    assert (info.session_id, info.parent_session_id, info.fork_message_id) == (
        "f1",
        "alpha",
        cut.message_id,
    )
    assert info.stored_messages == 5
    whole = ok("fork", "alpha", "--url", cli_url, "--json").json()  # at the last message
    assert whole["session_id"].startswith("fork-")
    assert whole["fork_message_id"] == stored(cli_url, "alpha")[-1].message_id
    assert whole["stored_messages"] == 13
    listed = {s.session_id for s in api(cli_url, "sessions")}
    assert {"alpha", "beta", "f1", whole["session_id"]} == listed


def test_fork_refuses_bad_input_in_one_line_and_writes_nothing(cli_url: str) -> None:
    cut = first_answer(cli_url)
    call, result = first_call(cli_url)
    unknown = invoke("fork", "nope", "--url", cli_url)
    assert_one_line_error(unknown, contains="'nope' not found")
    assert unknown.returncode == 1
    for args, named in (
        (("--at", "m-nope"), "m-nope"),
        (("--at", cut.message_id, "--as", "beta"), "beta"),
        (("--at", call.message_id), call.message_id),
    ):
        refused = invoke("fork", "alpha", *args, "--url", cli_url)
        assert_one_line_error(refused, contains=named)
        assert refused.returncode == 1, args
    parted = invoke("fork", "alpha", "--at", call.message_id, "--url", cli_url)
    assert result.message_id in parted.stderr  # the cut names both halves of the exchange
    assert {s.session_id for s in api(cli_url, "sessions")} == {"alpha", "beta"}
    other = invoke("fork", "gamma", "--url", cli_url)  # another tenant's session
    assert_one_line_error(other, contains="not found")
    assert ok("fork", "gamma", "--as", "g2", "--url", cli_url, "--tenant", "other").stdout


# -- rewind ----------------------------------------------------------------------------


def test_rewind_asks_or_needs_yes_then_sets_the_rest_aside(cli_url: str) -> None:
    cut = first_answer(cli_url)
    refused = invoke("rewind", "alpha", "--to", cut.message_id, "--url", cli_url)
    assert_one_line_error(refused, contains="--yes")
    assert refused.returncode == 2
    assert "8 messages" in refused.stderr
    assert api(cli_url, "session", "alpha").stored_messages == 13
    done = ok("rewind", "alpha", "--to", cut.message_id, "--yes", "--url", cli_url)
    event = api(cli_url, "audit", "alpha", phase="rewind")[0]
    tail = event.params["tail_session_id"]
    assert isinstance(tail, str) and tail.startswith("tail-")
    assert done.stdout.splitlines() == [
        f"event {event.id}: rewound alpha to {cut.message_id}; 8 messages set aside as tail {tail}",
        f"bring them back: chatledger restore alpha --event {event.id}",
    ]
    assert [m.seq for m in stored(cli_url, "alpha")] == [1, 2, 3, 4, 5]
    ok("restore", "alpha", "--event", event.id, "--url", cli_url)
    assert len(stored(cli_url, "alpha")) == 13


def test_rewind_json_is_the_event_or_null(cli_url: str) -> None:
    cut = first_answer(cli_url)
    args = ("--yes", "--url", cli_url, "--json")
    shown = ok("rewind", "alpha", "--to", cut.message_id, *args).json()
    event = CompactionEvent.model_validate(shown)
    assert api(cli_url, "audit", "alpha", phase="rewind") == [event]
    assert (event.phase, event.strategy, event.outcome) == ("rewind", "rewind", "applied")
    assert event.params["to"] == cut.message_id and event.params["messages"] == 8
    assert ok("rewind", "alpha", "--to", cut.message_id, *args).json() is None
    same = ok("rewind", "alpha", "--to", cut.message_id, "--url", cli_url)
    assert same.stdout == f"Nothing to rewind: alpha holds no message after {cut.message_id}.\n"


def test_rewind_to_the_start_sets_every_message_aside(cli_url: str) -> None:
    shown = ok("rewind", "beta", "--to-start", "--yes", "--url", cli_url, "--json").json()
    assert shown["params"]["to"] is None and shown["params"]["messages"] == 5
    assert stored(cli_url, "beta") == []
    tail = api(cli_url, "branches", "beta")[0]
    assert (tail.relation, tail.session_id, tail.messages) == (
        "tail",
        shown["params"]["tail_session_id"],
        5,
    )
    again = ok("rewind", "beta", "--to-start", "--yes", "--url", cli_url)
    assert again.stdout == "Nothing to rewind: beta holds no message.\n"


def test_rewind_refuses_bad_input_in_one_line_and_changes_nothing(cli_url: str) -> None:
    cut = first_answer(cli_url)
    call, _ = first_call(cli_url)
    for args in ((), ("--to", cut.message_id, "--to-start")):
        usage = invoke("rewind", "alpha", "--yes", *args, "--url", cli_url)
        assert_one_line_error(usage, contains="--to")
        assert usage.returncode == 2, args
    for session, to, named in (
        ("nope", cut.message_id, "'nope' not found"),
        ("alpha", "m-nope", "m-nope"),
        ("alpha", call.message_id, call.message_id),
        ("gamma", cut.message_id, "not found"),
    ):
        refused = invoke("rewind", session, "--to", to, "--yes", "--url", cli_url)
        assert_one_line_error(refused, contains=named)
        assert refused.returncode == 1, (session, to)
    assert len(stored(cli_url, "alpha")) == 13
    assert api(cli_url, "audit", "alpha") == []


# -- branches --------------------------------------------------------------------------


def test_branches_lists_parent_forks_and_tails(cli_url: str) -> None:
    cut = first_answer(cli_url)
    nothing = ok("branches", "beta", "--url", cli_url)
    assert nothing.stdout == "beta has no parent, fork or superseded tail.\n"
    assert ok("branches", "beta", "--url", cli_url, "--json").json() == []
    ok("fork", "alpha", "--at", cut.message_id, "--as", "f1", "--url", cli_url)
    ok("rewind", "alpha", "--to", cut.message_id, "--yes", "--url", cli_url)
    listed = ok("branches", "alpha", "--url", cli_url, "--json").json()
    found = [BranchInfo.model_validate(b) for b in listed]
    assert found == api(cli_url, "branches", "alpha")
    assert [(b.relation, b.fork_message_id, b.messages) for b in found] == [
        ("fork", cut.message_id, 5),
        ("tail", cut.message_id, 8),
    ]
    assert found[0].session_id == "f1"
    table = rows(ok("branches", "alpha", "--url", cli_url).stdout)
    assert [cells[:4] for cells in table] == [
        [b.relation, b.session_id, cut.message_id, str(b.messages)] for b in found
    ]
    assert table[1][-1] == found[1].event_id
    parent = ok("branches", "f1", "--url", cli_url, "--json").json()
    assert [(b["relation"], b["session_id"]) for b in parent] == [("parent", "alpha")]
    assert_one_line_error(invoke("branches", "nope", "--url", cli_url), contains="'nope' not found")
    assert_one_line_error(invoke("branches", "gamma", "--url", cli_url), contains="not found")
    assert ok("branches", "gamma", "--url", cli_url, "--tenant", "other", "--json").json() == []


def test_audit_says_what_a_fork_inherited_and_a_rewind_set_aside(cli_url: str) -> None:
    cut = first_answer(cli_url)
    ok("fork", "alpha", "--at", cut.message_id, "--as", "f1", "--url", cli_url)
    forks = ok("audit", "f1", "--phase", "fork", "--url", cli_url, "--json").json()
    assert [e["strategy"] for e in forks] == ["fork"]
    said = ok("audit", "f1", "--url", cli_url).stdout
    assert f"forked from alpha at {cut.message_id}: inherited 4 groups" in said
    ok("rewind", "alpha", "--to", cut.message_id, "--yes", "--url", cli_url)
    rewinds = ok("audit", "alpha", "--phase", "rewind", "--url", cli_url, "--json").json()
    assert len(rewinds) == 1
    tail = rewinds[0]["params"]["tail_session_id"]
    said = ok("audit", "alpha", "--url", cli_url).stdout
    assert f"rewound to {cut.message_id}: 8 messages set aside as tail {tail}" in said


# -- show and report of a fork -----------------------------------------------------------


def _own(url: str, session_id: str) -> list[Message]:
    new = [Message.text_message("user", "try again"), Message.text_message("assistant", "ok")]
    api(url, "append", session_id, new)
    return new


def test_show_marks_where_a_forks_own_messages_start(cli_url: str) -> None:
    cut = first_answer(cli_url)
    ok("fork", "alpha", "--at", cut.message_id, "--as", "f1", "--url", cli_url)
    _own(cli_url, "f1")
    marker = f"— fork of alpha at {cut.message_id} —"
    lines = ok("show", "f1", "--url", cli_url).stdout.splitlines()
    assert lines.count(marker) == 1
    at = lines.index(marker)
    assert [line.split()[0] for line in lines[2:at]] == ["1", "2", "3", "4", "5"]
    assert len(lines[at + 1 :]) == 2 and "try again" in lines[at + 1]
    everything = ok("show", "f1", "--url", cli_url, "--json").json()
    assert len(everything) == 7  # --json is the messages only
    newest = ok("show", "f1", "--url", cli_url, "--limit", "2", "--json").json()
    assert [m["seq"] for m in newest] == [m.seq for m in stored(cli_url, "f1")[-2:]]
    own_only = ok("show", "f1", "--url", cli_url, "--limit", "2").stdout.splitlines()
    assert marker not in own_only and f"(fork of alpha at {cut.message_id})" in own_only[0]
    assert len(own_only) == 4
    three = ok("show", "f1", "--url", cli_url, "--limit", "3").stdout.splitlines()
    assert three[3] == marker and three[2].split()[0] == "5"
    parent = ok("show", "alpha", "--url", cli_url).stdout
    assert "fork of" not in parent


def test_show_of_a_fork_with_nothing_of_its_own_ends_with_the_marker(cli_url: str) -> None:
    cut = first_answer(cli_url)
    ok("fork", "alpha", "--at", cut.message_id, "--as", "f1", "--url", cli_url)
    lines = ok("show", "f1", "--url", cli_url, "--all").stdout.splitlines()
    assert lines[-1] == f"— fork of alpha at {cut.message_id} —"
    assert len(lines) == 2 + 5 + 1


def test_report_of_a_fork_names_its_parent_and_marks_the_fork_point(
    cli_url: str, tmp_path: Path
) -> None:
    cut = first_answer(cli_url)
    ok("fork", "alpha", "--at", cut.message_id, "--as", "f1", "--url", cli_url)
    _own(cli_url, "f1")
    target = tmp_path / "f1.html"
    ok("report", "f1", "-o", str(target), "--url", cli_url)
    page = target.read_text(encoding="utf-8")
    assert f"fork of <b>alpha</b> at <code>{cut.message_id}</code>" in page
    point = page.index('id="fork-point"')
    last_inherited = page.index(f'id="g-{stored(cli_url, "f1")[4].group_id}"')
    assert last_inherited < point < page.index("try again")
    ok("report", "alpha", "-o", str(tmp_path / "alpha.html"), "--url", cli_url)
    assert "fork-point" not in (tmp_path / "alpha.html").read_text(encoding="utf-8")


def test_delete_says_the_forks_keep_what_they_share(cli_url: str) -> None:
    ok("fork", "alpha", "--as", "f1", "--url", cli_url)
    deleted = ok("delete", "alpha", "--yes", "--url", cli_url)
    assert "its 1 fork keeps the messages shared with it" in deleted.stdout
    assert len(stored(cli_url, "f1")) == 13
    again = ok("delete", "f1", "--yes", "--json", "--url", cli_url)
    assert again.json() == {"deleted": "f1", "messages": 13, "forks": []}
