"""The audit page in a real browser: Debian's headless Chromium, driven by playwright.

Every request other than ``file:`` is aborted, so the page must show everything from
itself. The test checks what a person sees and saves a screenshot in its tmp dir. It
skips when no Chromium is found, unless ``CHATLEDGER_REQUIRE_BROWSER=1`` (CI).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from store.memory import InMemoryHistoryStore
from store.report import write_report
from store.usage import read_prices
from tests.report.browser import browser_page, chromium
from tests.report.session import (
    PRICES,
    USAGE_SESSION,
    demo_session,
    imported_session,
    usage_session,
)

__all__ = ["browser_page", "chromium"]


@pytest.fixture
async def page_file(tmp_path: Path) -> Path:
    """The report of the demo session, written by the library."""
    store = InMemoryHistoryStore()
    session = await demo_session(store)
    return await write_report(store, session, tmp_path / "demo.report.html")


async def test_a_person_sees_the_audit(browser_page: Any, page_file: Path, tmp_path: Path) -> None:
    page = browser_page
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    await page.goto(page_file.as_uri())

    # the counts at the top
    assert await page.locator("#counts").is_visible()
    groups = int(await page.locator("#count-groups").inner_text())
    assert groups == await page.locator("#timeline .group").count() > 0
    sent = int(await page.locator("#count-sent").inner_text())
    assert sent == await page.locator('#timeline .group[data-state="sent"]').count()
    assert await page.locator("#count-outcome-failed").inner_text() == "1"

    # an excluded group's reason, visible once the link to it opens its folded run
    excluded = page.locator('#timeline .group[data-state="excluded"]').first
    group_id = await excluded.get_attribute("id")
    await page.goto(f"{page_file.as_uri()}#{group_id}")
    assert await excluded.is_visible()
    reason = await excluded.locator(".reason").inner_text()
    assert reason in {"truncation", "start_at_user", "token_budget_fallback"}
    assert (await excluded.locator(".why a").first.inner_text()).startswith("evt_")

    # a summary linked to its groups: following a link shows the replaced group, which
    # links back to the summary
    summary = page.locator('#timeline .group[data-kind="summary"]').first
    link = summary.locator(".replaces a").first
    replaced_id = await link.inner_text()
    await link.click()
    replaced = page.locator(f'[id="g-{replaced_id}"]')
    assert await replaced.is_visible()
    back = await replaced.locator(".summarized-by a").inner_text()
    assert f"g-{back}" == await summary.get_attribute("id")

    # the token chart, with its two lines
    chart = page.locator("#token-chart")
    assert await chart.is_visible()
    assert await chart.locator("polyline").count() == 2
    box = await chart.bounding_box()
    assert box is not None and box["width"] > 300 and box["height"] > 80

    # failed compactions are marked where they happened
    assert await page.locator(".marker.failed").first.is_visible()

    shot = tmp_path / "audit-report.png"
    await page.goto(page_file.as_uri())
    await page.screenshot(path=str(shot), full_page=True)
    print(f"screenshot: {shot}")
    assert shot.stat().st_size > 0
    assert page.blocked == [] and errors == []


async def _points(page: Any) -> list[tuple[int, int, int]]:
    circles = page.locator("#token-chart circle.point")
    found = []
    for index in range(await circles.count()):
        circle = circles.nth(index)
        found.append(
            (
                int(await circle.get_attribute("data-turn")),
                int(await circle.get_attribute("data-stored")),
                int(await circle.get_attribute("data-sent")),
            )
        )
    return found


async def test_the_page_fits_1280_pixels_and_tells_each_event_and_turn(
    browser_page: Any, tmp_path: Path
) -> None:
    page = browser_page
    await page.set_viewport_size({"width": 1280, "height": 900})
    store = InMemoryHistoryStore()
    native = await demo_session(store)
    imported = await imported_session(store, tmp_path)
    for session in (native, imported):
        written = await write_report(store, session, tmp_path / f"{session}.html")
        await page.goto(written.as_uri())
        width = await page.evaluate(
            "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
        )
        assert width[0] <= width[1] <= 1280, (session, width)
        info = await store.session(session)
        points = await _points(page)
        assert points[-1][1:] == (info.stored_tokens, info.active_tokens), session
        assert all(stored > 0 for _, stored, _ in points), (session, points)
        assert [s for _, s, _ in points] == sorted(s for _, s, _ in points)
        # newest first, as `chatledger audit`, each saying why
        rows = page.locator("#events tr.event")
        shown = [await rows.nth(i).get_attribute("id") for i in range(await rows.count())]
        newest = [f"e-{e.id}" for e in await store.audit(session)]
        assert shown == [i for i in newest if i in shown] and shown
        reasons = [await rows.nth(i).locator(".reason").inner_text() for i in range(len(shown))]
        assert all(r.strip() not in ("", "-") for r in reasons), reasons
        assert await page.locator("#excluded").is_visible()
    turns = [t for t, _, _ in await _points(page)]
    assert turns == [1, 2, 3, 4]  # the imported chat's user turns


async def test_a_person_sees_each_turns_model_calls_and_cost(
    browser_page: Any, tmp_path: Path
) -> None:
    page = browser_page
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    store = InMemoryHistoryStore()
    local = await usage_session(store)
    written = await write_report(
        store, USAGE_SESSION, tmp_path / "usage.report.html", prices=read_prices(PRICES)
    )
    await page.goto(written.as_uri())

    table = page.locator("#usage")
    assert await table.is_visible()
    headers = await table.locator("th").all_inner_texts()
    assert headers[:8] == [
        "turn",
        "calls",
        "tokens sent (local)",
        "input reported",
        "cache reads",
        "output",
        "cost",
        "cache",
    ]
    turns = table.locator("tr.turn-usage")
    assert await turns.count() == 3
    first = table.locator('tr[data-turn="1"]')
    assert await first.is_visible()
    cells = await first.locator("td").all_inner_texts()
    cost_one = (100 * 2 + 10 * 8 + 1000 * 2 + 50 * 8 + 300 * 2 + 5 * 8) / 1e6
    assert cells[:6] == ["1", "3", f"{local[1]:,}", "1,400", "0", "65"]
    assert float(cells[6]) == pytest.approx(cost_one, abs=1e-4)
    # the turn after the compaction is marked: its call broke the provider's cache
    broken = table.locator("tr.turn-usage.broken")
    assert await broken.count() == 1
    assert await broken.get_attribute("data-turn") == "3"
    badge = broken.locator(".badge.cache-break")
    assert await badge.is_visible() and await badge.inner_text() == "cache break"
    assert await broken.locator("td.cost").inner_text() == "-"  # claude is not priced
    assert "no price for claude-sonnet-4-5" in await page.locator("#unpriced").inner_text()
    assert await page.locator("#count-usage-calls").inner_text() == "5"
    assert await page.locator("#count-cache-breaks").inner_text() == "1"
    assert await page.locator("#count-cache-reads").inner_text() == "900"
    width = await page.evaluate(
        "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )
    assert width[0] <= width[1]
    shot = tmp_path / "usage-report.png"
    await table.screenshot(path=str(shot))
    print(f"screenshot: {shot}")
    assert page.blocked == [] and errors == []
