"""The page of an imported chat (a turn starts at each user message, though the whole
chat was stored at once) and the events section: newest first, named as the command
line names strategies, each saying why it ran and what it did."""

from __future__ import annotations

from pathlib import Path

from store.contract import HistoryBackend
from store.memory import InMemoryHistoryStore
from store.report import build_report
from store.report.page import event_why, strategy_label
from store.report.timeline import collect
from tests.report.session import demo_session, imported_session


async def test_an_imported_chat_has_a_point_for_each_user_turn(tmp_path: Path) -> None:
    store = InMemoryHistoryStore()
    session = await imported_session(store, tmp_path)
    timeline = await collect(store, session)
    history = await store.history(session, include_excluded=True)
    appended = [m for m in history if m.kind != "summary"]
    users = [m.seq for m in appended if m.role == "user"]
    assert [p.turn for p in timeline.points] == list(range(1, len(users) + 1))
    for point, start in zip(timeline.points, [*users[1:], 10**9], strict=True):
        expected = sum(m.token_count for m in history if m.seq < start)
        assert point.stored == expected > 0
    last = timeline.points[-1]
    info = await store.session(session)
    assert (last.stored, last.sent) == (info.stored_tokens, info.active_tokens)
    assert last.sent < last.stored  # the compaction shows


async def test_events_run_newest_first_with_the_clis_names_and_reasons() -> None:
    store: HistoryBackend = InMemoryHistoryStore()
    session = await demo_session(store)
    page = await build_report(store, session)
    events = await store.audit(session)  # newest first
    listed = page.split('<table id="events">', 1)[1].split("</table>", 1)[0]
    positions = [listed.find(f'id="e-{e.id}"') for e in events]
    shown = [p for p in positions if p >= 0]
    assert shown == sorted(shown) and len(shown) >= 2
    assert "ContextWindowCompactionStrategy" not in listed
    assert ">context-window<" in listed
    context = [e for e in events if strategy_label(e.strategy) == "context-window"]
    assert context and all("input budget of" in event_why(e) for e in context)
    truncated = next(e for e in context if "truncation" in e.reasons.values())
    assert "truncated toward" in event_why(truncated) and "reason truncation" in event_why(
        truncated
    )


async def test_the_page_lists_the_groups_not_sent_with_their_reasons() -> None:
    store: HistoryBackend = InMemoryHistoryStore()
    session = await demo_session(store)
    page = await build_report(store, session)
    table = page.split('<table id="excluded">', 1)[1].split("</table>", 1)[0]
    excluded = await store.excluded(session)
    assert table.count("<tr>") == len(excluded) + 1  # the header and a row each
    for group in excluded:
        assert f'href="#g-{group.group_id}"' in table
    summarized = next(g for g in excluded if g.summary_group_id)
    assert f'href="#g-{summarized.summary_group_id}"' in table
