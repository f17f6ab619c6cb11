"""The audit page: what it shows, built from any backend, self-contained."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

import pytest

from store.contract import HistoryBackend
from store.errors import InvalidInput, SessionNotFound
from store.report import build_report, write_report
from store.report.page import EVENTS_SHOWN, RUN
from store.report.timeline import collect
from store.usage import read_prices
from strategies import SummarizationStrategy, TruncationStrategy
from strategies.summarizers import FakeSummarizer
from tests.report.session import PRICES, USAGE_SESSION, demo_session, tool_turn, usage_session


def _text(fragment: str) -> str:
    return unescape(re.sub(r"<[^>]+>", "", fragment))


def _count(page: str, key: str) -> str:
    found = re.search(rf'id="count-{key}">([^<]*)<', page)
    assert found is not None, key
    return unescape(found.group(1))


async def test_the_counts_are_the_stores(any_store: HistoryBackend) -> None:
    session = await demo_session(any_store)
    page = await build_report(any_store, session)
    info = await any_store.session(session)
    excluded = await any_store.excluded(session)
    assert int(_count(page, "groups")) == info.stored_groups
    assert int(_count(page, "sent")) == info.active_groups
    summarized = sum(1 for g in excluded if g.reason == "summarized")
    assert int(_count(page, "summarized")) == summarized
    assert int(_count(page, "excluded")) == len(excluded) - summarized
    assert _count(page, "tokens") == f"{info.stored_tokens:,} / {info.active_tokens:,}"
    assert int(_count(page, "pinned")) == 3
    assert int(_count(page, "outcome-failed")) == 1
    assert int(_count(page, "outcome-blocked")) == 1


async def test_every_excluded_group_shows_its_reason_and_event(
    any_store: HistoryBackend,
) -> None:
    session = await demo_session(any_store)
    page = await build_report(any_store, session)
    for group in await any_store.excluded(session):
        row = re.search(
            rf'<div class="group [a-z]+" id="g-{re.escape(group.group_id)}".*?</div>', page
        )
        assert row is not None, group.group_id
        assert group.reason is not None and group.reason in _text(row.group(0))
        assert f'href="#e-{group.event_id}"' in row.group(0)
        assert f'id="e-{group.event_id}"' in page


async def test_summaries_link_to_their_groups_and_back(any_store: HistoryBackend) -> None:
    session = await demo_session(any_store)
    page = await build_report(any_store, session)
    summaries = {
        summary: replaced
        for event in await any_store.audit(session)
        for summary, replaced in event.summarized.items()
    }
    assert summaries
    for summary, replaced in summaries.items():
        for group in replaced:
            assert f'href="#g-{group}"' in page and f'id="g-{group}"' in page
        back = re.findall(rf'summarized by <a href="#g-{re.escape(summary)}">', page)
        assert len(back) == len(replaced)


async def test_reduced_results_beside_their_originals(any_store: HistoryBackend) -> None:
    session = await demo_session(any_store)
    page = await build_report(any_store, session)
    reduced = [
        m
        async for m in any_store.aiter_history(session, include_excluded=True)
        if m.reduced is not None and not m.excluded
    ]
    assert reduced
    assert page.count('<div class="reduction">') >= len(reduced)
    assert "[cut]" in page  # the reduced text, beside the original's


async def test_failed_and_blocked_compactions_are_marked_in_the_timeline(
    any_store: HistoryBackend,
) -> None:
    session = await demo_session(any_store)
    page = await build_report(any_store, session)
    markers = [_text(m) for m in re.findall(r'<div class="marker [a-z]+">.*?</div>', page)]
    assert any(m.startswith("compaction failed") and "FakeSummarizerError" in m for m in markers)
    assert any(m.startswith("compaction blocked") and "pinned" in m for m in markers)


async def test_the_token_chart_ends_at_the_stored_and_active_tokens(
    any_store: HistoryBackend,
) -> None:
    session = await demo_session(any_store)
    timeline = await collect(any_store, session)
    stats = await any_store.stats(session)
    last = timeline.points[-1]
    assert (last.stored, last.sent) == (stats.stored_tokens, stats.active_tokens)
    assert all(p.sent <= p.stored for p in timeline.points)
    page = await build_report(any_store, session)
    assert '<svg id="token-chart"' in page and page.count("<polyline") == 2


async def test_the_page_needs_nothing_from_outside(any_store: HistoryBackend) -> None:
    session = await demo_session(any_store)
    page = await build_report(any_store, session)
    assert re.findall(r"\b(?:src|href)=\"(?!#)[^\"]*\"", page) == []
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in page and "@import" not in page
    assert "default-src 'none'" in page


async def test_long_runs_fold_into_one_line(any_store: HistoryBackend) -> None:
    """A long session stays readable: alike groups in a row fold into one line."""
    for index in range(40):
        await any_store.append("long", tool_turn(index))
    await any_store.compact("long", TruncationStrategy(max_n=12, compact_to=8))
    page = await build_report(any_store, "long")
    folded = re.findall(r'<details class="run [a-z]+"><summary>([^<]*)</summary>', page)
    assert folded and any("not sent" in f and "truncation" in f for f in folded)
    top = re.sub(r"<details.*?</details>", "", page, flags=re.S)
    shown = top.count('<div class="group ')
    groups = (await any_store.session("long")).stored_groups
    assert shown <= groups - RUN


async def test_an_unknown_session_and_a_missing_folder_are_refused(
    any_store: HistoryBackend, tmp_path: Path
) -> None:
    with pytest.raises(SessionNotFound):
        await build_report(any_store, "nobody")
    await any_store.append("s", tool_turn(0))
    with pytest.raises(InvalidInput, match="no folder"):
        await write_report(any_store, "s", tmp_path / "missing" / "page.html")
    out = tmp_path / "pages"
    out.mkdir()
    written = await write_report(any_store, "s", out / "page.html")
    assert written.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert [p.name for p in out.iterdir()] == ["page.html"]  # no temporary left


async def test_older_applied_events_fold_and_the_others_stay_listed(
    any_store: HistoryBackend,
) -> None:
    failing = SummarizationStrategy(client=FakeSummarizer(fail="error"), target_count=2)
    for index in range(EVENTS_SHOWN + 4):
        await any_store.append("many", tool_turn(index))
        if index == 1:
            failed = await any_store.compact("many", failing)
            assert failed is not None and failed.outcome == "failed"
        await any_store.compact("many", TruncationStrategy(max_n=3, compact_to=2))
    page = await build_report(any_store, "many")
    shown, _, folded = page.partition('<table id="events-older">')
    assert shown.count('<tr class="event"') == EVENTS_SHOWN + 1  # the newest, and the failure
    assert "failed</span>" in shown
    applied = [e for e in await any_store.audit("many") if e.outcome == "applied"]
    older = folded.split("</table>")[0].count('<tr class="event"')
    assert older == len(applied) - EVENTS_SHOWN > 0


def _usage_rows(page: str) -> dict[str, dict[str, str]]:
    """The per-turn rows of the model-calls table (and ``total``): each cell by class."""
    table = re.search(r'<table id="usage">.*?</table>', page, flags=re.S)
    assert table is not None
    found: dict[str, dict[str, str]] = {}
    for row in re.findall(r"<tr class=\"(?:turn-usage[^\"]*|usage-total)\".*?</tr>", table[0]):
        turn = re.search(r'data-turn="(\d+)"', row)
        cells = dict(re.findall(r'<td class="(?:num )?([a-z-]+)">(.*?)</td>', row))
        found[turn[1] if turn else "total"] = {k: _text(v) for k, v in cells.items()}
        found[turn[1] if turn else "total"]["row"] = row  # the markup, classes and all
    return found


async def test_each_turn_shows_its_model_calls_and_cost(any_store: HistoryBackend) -> None:
    local = await usage_session(any_store)
    page = await build_report(any_store, USAGE_SESSION, prices=read_prices(PRICES))
    rows = _usage_rows(page)
    assert list(rows) == ["1", "2", "3", "total"]
    one, two, three = rows["1"], rows["2"], rows["3"]
    # turn 1: the call before any message, the call of a-1 (stored after it) and the
    # late call naming a-1; only the second was paired with a projection
    assert (one["calls"], one["input"], one["cache-read"], one["output"]) == (
        "3",
        "1,400",
        "0",
        "65",
    )
    assert one["sent"] == f"{local[1]:,}"
    # cost by hand: (uncached x 2 + cache reads x 0.5 + output x 8) / 1e6, call by call
    cost_one = (100 * 2 + 10 * 8 + 1000 * 2 + 50 * 8 + 300 * 2 + 5 * 8) / 1e6
    assert float(one["cost"]) == pytest.approx(cost_one, abs=1e-4)
    # turn 2: the call naming no message belongs to the newest message's turn
    assert (two["calls"], two["input"], two["cache-read"], two["output"]) == (
        "1",
        "1,200",
        "900",
        "60",
    )
    assert two["sent"] == f"{local[2]:,}"
    cost_two = ((1200 - 900) * 2 + 900 * 0.5 + 60 * 8) / 1e6
    assert float(two["cost"]) == pytest.approx(cost_two, abs=1e-4)
    # turn 3: claude, found by the provider's id of its message; after a compaction
    assert (three["input"], three["cache-read"], three["output"]) == ("800", "0", "40")
    assert three["sent"] == f"{local[3]:,}" and three["cost"] == "-"  # not priced
    assert "broken" in three["row"] and "cache break" in three["cache"]
    assert "cache break" not in one["cache"] + two["cache"]
    assert rows["total"]["calls"] == "5"
    assert float(rows["total"]["cost"]) == pytest.approx(cost_one + cost_two, abs=1e-4)
    assert "no price for claude-sonnet-4-5" in _text(page)
    assert _count(page, "usage-calls") == "5"
    assert _count(page, "cache-reads") == "900"
    assert _count(page, "cache-breaks") == "1"
    assert float(_count(page, "cost")) == pytest.approx(cost_one + cost_two, abs=1e-4)


async def test_without_prices_no_cost_and_without_calls_a_line(
    any_store: HistoryBackend,
) -> None:
    await usage_session(any_store)
    page = await build_report(any_store, USAGE_SESSION)
    rows = _usage_rows(page)
    assert rows["1"]["input"] == "1,400" and "cost" not in rows["1"]
    assert "<th>cost</th>" not in page and 'id="count-cost"' not in page
    await any_store.append("quiet", tool_turn(0))
    quiet = await build_report(any_store, "quiet")
    assert "No model call recorded." in quiet and '<table id="usage">' not in quiet
    assert 'id="count-usage-calls"' not in quiet
