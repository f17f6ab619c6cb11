"""How the command line and the audit page draw branches, from models alone: the fork
marker of ``show``, what the audit says of fork and rewind events, the branches table,
and the report's fork point (the commands themselves: ``test_branches.py``)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from store.cli import _audit
from store.cli._output import render
from store.cli._render import branches_table, event_outcome, fork_of, history_table
from store.memory import InMemoryHistoryStore
from store.models import PHASES, BranchInfo, CompactionEvent, SessionInfo, StoredMessage
from store.report.page import render as render_page
from store.report.timeline import build_timeline
from tests.cli.helpers import conversation

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)


@pytest.fixture
async def two_turns() -> tuple[SessionInfo, list[StoredMessage]]:
    """A session of a system prompt and two tool turns (seq 1 to 9), stored."""
    store = InMemoryHistoryStore()
    await store.append("s", conversation(2))
    return await store.session("s"), [m async for m in store.aiter_history("s")]


def _lines(
    title: str,
    messages: list[StoredMessage],
    *,
    fork: tuple[str, int] | None = None,
    whole: bool = True,
) -> list[str]:
    _, lines = render(history_table(title, messages, fork=fork, whole=whole), None)
    return lines


def test_the_audit_command_offers_every_phase() -> None:
    assert _audit.PHASES == PHASES


def test_fork_of_says_what_a_fork_was_forked_from() -> None:
    info = SessionInfo(
        session_id="f", tenant="t", created_at=NOW, updated_at=NOW, tokenizer="x", revision=1
    )
    assert fork_of(info) is None
    assert fork_of(info.model_copy(update={"parent_session_id": "p", "fork_message_id": "m"})) == (
        "fork of p at m"
    )
    assert fork_of(info.model_copy(update={"parent_session_id": "p"})) == (
        "fork of p (empty when forked)"
    )
    assert fork_of(info.model_copy(update={"fork_message_id": "m"})) == (
        "fork at m of a deleted session"
    )


async def test_the_fork_marker_stands_before_the_first_message_past_the_cut(
    two_turns: tuple[SessionInfo, list[StoredMessage]],
) -> None:
    _, messages = two_turns
    plain = _lines("t", messages)
    marked = _lines("t", messages, fork=("fork of p at m", 5))
    assert marked == [*plain[:6], "— fork of p at m —", *plain[6:]]  # the header, seq 1 to 5
    assert _lines("t", messages, fork=("fork of p at m", 9))[-1] == "— fork of p at m —"
    assert _lines("t", messages, fork=("fork of p at m", 0))[1] == "— fork of p at m —"
    newest = messages[-3:]  # seq 7 to 9, all past the cut: the fork's start is not shown
    assert _lines("t", newest, fork=("fork of p at m", 5), whole=False) == _lines("t", newest)
    assert _lines("t", newest, fork=("fork of p at m", 7), whole=False)[2] == "— fork of p at m —"


async def test_the_marker_is_written_visibly_and_never_widens_a_column(
    two_turns: tuple[SessionInfo, list[StoredMessage]],
) -> None:
    _, messages = two_turns
    origin = "fork of p\x1b[2J" + "x" * 300 + " at m"
    lines = _lines("t", messages, fork=(origin, 5))
    assert "\x1b" not in "".join(lines) and "\\x1b[2J" in lines[6]
    assert lines[0] == _lines("t", messages)[0]


def _event(phase: str, params: dict[str, object], **kw: object) -> CompactionEvent:
    return CompactionEvent.model_validate(
        {
            "id": "evt_1",
            "session_id": "s",
            "tenant": "t",
            "phase": phase,
            "strategy": phase,
            "params": params,
            "messages_before": 0,
            "messages_after": 0,
            "groups_before": 0,
            "groups_after": 0,
            "tokens_before": 0,
            "tokens_after": 0,
            "created_at": NOW,
            **kw,
        }
    )


def test_the_audit_says_what_a_fork_inherited_and_a_rewind_set_aside() -> None:
    inherited = {"groups": 17, "excluded_groups": 6, "summaries": 1, "reductions": 0, "pins": 2}
    fork = _event("fork", {"source_session_id": "p", "at": "m-4", "inherited": inherited})
    assert event_outcome(fork) == (
        "forked from p at m-4: inherited 17 groups (6 excluded), 1 summary, 2 pins"
    )
    dropped = _event(
        "fork",
        {
            "source_session_id": "p",
            "at": "m-4",
            "inherited": {"groups": 1},
            "dropped_summaries": ["g"],
        },
    )
    assert event_outcome(dropped).endswith(
        "inherited 1 group, left out 1 summary of later messages "
        "(the groups it replaced are active)"
    )
    rewind = _event("rewind", {"to": "m-4", "tail_session_id": "tail-1", "messages": 8})
    assert event_outcome(rewind) == "rewound to m-4: 8 messages set aside as tail tail-1"
    start = _event("rewind", {"to": None, "tail_session_id": "tail-2", "messages": 1})
    assert event_outcome(start) == "rewound to the start: 1 message set aside as tail tail-2"
    back = _event("restore", {"event_id": "evt_0", "tail_session_id": "tail-3"})
    assert event_outcome(back) == "tail brought back; what followed is tail tail-3"
    plain_restore = _event("restore", {"event_id": "evt_0"}, restored=("g1",))
    assert event_outcome(plain_restore) == "1 restored"


def test_the_branches_table_has_a_row_a_branch() -> None:
    found = [
        BranchInfo(
            session_id="p",
            relation="parent",
            fork_message_id=None,
            event_id="evt_f",
            messages=0,
            created_at=NOW,
        ),
        BranchInfo(
            session_id="tail-1",
            relation="tail",
            fork_message_id="m-4",
            event_id="evt_r",
            messages=1_200,
            created_at=NOW,
        ),
    ]
    _, lines = render(branches_table(found, "Branches of s"), None)
    assert lines[0].split() == [
        "relation",
        "session",
        "fork",
        "message",
        "messages",
        "created",
        "event",
    ]
    assert lines[1].split() == ["parent", "p", "-", "0", "2026-12-05T12:00:00Z", "evt_f"]
    assert lines[2].split() == ["tail", "tail-1", "m-4", "1,200", "2026-12-05T12:00:00Z", "evt_r"]


async def test_the_report_of_a_fork_marks_its_fork_point(
    two_turns: tuple[SessionInfo, list[StoredMessage]],
) -> None:
    info, messages = two_turns
    cut = messages[4]  # the answer of turn 1
    fork = info.model_copy(update={"parent_session_id": "p<x>", "fork_message_id": cut.message_id})
    timeline = build_timeline(fork, messages, [], set())
    assert timeline.cut == cut.seq
    page = render_page(timeline)
    assert f"fork of <b>p&lt;x&gt;</b> at <code>{cut.message_id}</code>" in page
    point = page.index('id="fork-point"')
    assert (
        page.index(f'id="g-{cut.group_id}"') < point < page.index(f'id="g-{messages[5].group_id}"')
    )
    assert build_timeline(info, messages, [], set()).cut is None
    assert "fork-point" not in render_page(build_timeline(info, messages, [], set()))
    gone = fork.model_copy(update={"fork_message_id": "m-gone"})  # rewound away
    page = render_page(build_timeline(gone, messages, [], set()))
    assert "fork-point" not in page and "fork of <b>p&lt;x&gt;</b> at <code>m-gone</code>" in page
