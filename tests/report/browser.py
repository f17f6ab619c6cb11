"""Debian's headless Chromium, driven by playwright, for the tests of the audit page.

``browser_page`` is a page on which every request other than ``file:`` is aborted (the
aborted URLs are kept in ``page.blocked``), so a page must show everything from itself.
It skips when no Chromium is found, unless ``CHATLEDGER_REQUIRE_BROWSER=1`` (CI).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from typing import Any

import pytest


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture
def chromium() -> str:
    """The path of the system's Chromium (skip, or fail in CI, without one)."""
    found = _chromium()
    if found is None:
        if os.environ.get("CHATLEDGER_REQUIRE_BROWSER") == "1":
            pytest.fail("CHATLEDGER_REQUIRE_BROWSER=1 but no chromium on PATH")
        pytest.skip("no chromium on PATH: apt-get install -y chromium to run the browser test")
    return found


@pytest.fixture
async def browser_page(chromium: str) -> AsyncIterator[Any]:
    """A page of headless Chromium on which every non-``file:`` request is aborted (the
    aborted URLs are kept in ``page.blocked``)."""
    playwright_api = pytest.importorskip("playwright.async_api")
    async with playwright_api.async_playwright() as driver:
        browser = await driver.chromium.launch(executable_path=chromium, headless=True)
        try:
            context = await browser.new_context(viewport={"width": 1200, "height": 900})
            blocked: list[str] = []

            async def route(request_route: Any) -> None:
                if request_route.request.url.startswith("file:"):
                    await request_route.continue_()
                else:
                    blocked.append(request_route.request.url)
                    await request_route.abort()

            await context.route("**/*", route)
            page = await context.new_page()
            page.blocked = blocked
            yield page
        finally:
            await browser.close()
