"""Stored text is inert in the audit page (``chatledger report``), on every backend.

Any chat participant writes message text, ids, author names, tool names and results; a
strategy writes exclusion reasons, summaries, reductions and the message of a failed
compaction. Here each of them is markup meant to run or to hide: the page keeps exactly
the elements and attributes of a harmless page, its one script is its own, every such
text is shown as text, and in Chromium none of it runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from store.contract import HistoryBackend
from store.memory import InMemoryHistoryStore
from store.report import build_report, write_report
from strategies.changeset import ChangeSet, Exclusion, Reduction, SummaryInsert
from strategies.messages import FunctionCallContent, FunctionResultContent, Message
from strategies.view import View
from tests.conformance.toy_strategies import Fixed
from tests.report.browser import browser_page, chromium
from tests.report.session import demo_session

__all__ = ["browser_page", "chromium"]


def _payload(n: int) -> str:
    return f'"><script>window.__pwned={n}</script><img src=x onerror="window.__pwned={n}">'


SESSION = f"s{_payload(1)}"
HOSTILE = {
    "session id": SESSION,
    "message id": f"u{_payload(2)}",
    "text": f"</span></div></details>{_payload(3)}<!--",
    "author name": f"<svg onload=window.__pwned=4>{_payload(4)}",
    "tool name": f"tool{_payload(5)}",
    "tool result": f"javascript:window.__pwned=6 {_payload(6)}",
    "reason": f"why{_payload(7)}",
    "summary": f"]]><style>body{{display:none}}</style>{_payload(8)}",
    "reduced": f"<base href='https://evil.example/'>{_payload(9)}",
    "summarizer model": f"model{_payload(10)}",
    "failure": f"boom{_payload(11)}",
}


@dataclass
class _Failing:
    """A strategy whose plan fails with a hostile message."""

    @property
    def name(self) -> str:
        return "failing"

    def params(self) -> dict[str, Any]:
        return {}

    async def plan(self, view: View) -> ChangeSet:
        raise RuntimeError(HOSTILE["failure"])


async def _hostile_session(store: HistoryBackend) -> str:
    mid = HOSTILE["message id"]
    call = FunctionCallContent(call_id="c1", name=HOSTILE["tool name"], arguments={"q": 1})
    turn = [
        Message.text_message("user", HOSTILE["text"], message_id=mid),
        Message(role="assistant", contents=[call], message_id="a1"),
        Message(
            role="tool",
            contents=[FunctionResultContent(call_id="c1", result=HOSTILE["tool result"])],
            message_id="t1",
        ),
        Message.text_message(
            "assistant", "answer", message_id="a2", author_name=HOSTILE["author name"]
        ),
        Message.text_message("user", "next", message_id="u2"),
        Message.text_message("assistant", "ok", message_id="a3"),
    ]
    await store.append(SESSION, turn)
    reduced = turn[2].model_copy(
        update={"contents": [FunctionResultContent(call_id="c1", result=HOSTILE["reduced"])]}
    )
    summary = Message.text_message("assistant", HOSTILE["summary"], message_id="sum")
    changes = ChangeSet(
        exclusions=(Exclusion("group_u2", HOSTILE["reason"]),),
        summaries=(
            SummaryInsert(
                summary, (f"group_{mid}",), summarizer="fake", model=HOSTILE["summarizer model"]
            ),
        ),
        reductions=(Reduction("group_a1", reduced, HOSTILE["reason"], 20, 5),),
        strategy="fixed",
    )
    assert await store.compact(SESSION, Fixed(changes)) is not None
    try:
        await store.compact(SESSION, _Failing())
    except Exception as error:  # the failure is recorded either way; its kind is not the point
        assert HOSTILE["failure"] in str(error)
    return SESSION


class _Elements(HTMLParser):
    """The elements of a page: each start tag with its attribute names, and the text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.shapes: set[tuple[str, tuple[str, ...]]] = set()
        self.attributes: list[tuple[str, str, str]] = []
        self.scripts: list[str] = []
        self.text: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.shapes.add((tag, tuple(sorted(name for name, _ in attrs))))
        self.attributes += [(tag, name, value or "") for name, value in attrs]
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        (self.scripts if self._in_script else self.text).append(data)

    def handle_comment(self, data: str) -> None:
        raise AssertionError(f"stored text opened a comment: {data[:80]!r}")


def _parse(page: str) -> _Elements:
    parsed = _Elements()
    parsed.feed(page)
    parsed.close()
    return parsed


async def _harmless_shapes() -> set[tuple[str, tuple[str, ...]]]:
    store = InMemoryHistoryStore()
    return _parse(await build_report(store, await demo_session(store))).shapes


def _values(parsed: _Elements) -> Iterator[str]:
    for _tag, name, value in parsed.attributes:
        if name in ("href", "src", "action", "formaction", "srcdoc"):
            yield value


async def test_stored_markup_is_shown_as_text_and_never_becomes_an_element(
    any_store: HistoryBackend,
) -> None:
    page = await build_report(any_store, await _hostile_session(any_store))
    parsed = _parse(page)
    assert len(parsed.scripts) == 1 and "__pwned" not in parsed.scripts[0]
    assert parsed.shapes <= await _harmless_shapes() | {("span", ("class",))}
    assert not [a for a in parsed.attributes if a[1].startswith("on")]
    assert all(v.startswith("#") for v in _values(parsed)), list(_values(parsed))
    shown = "".join(parsed.text)
    for name in ("session id", "text", "tool result", "reason", "summary", "reduced"):
        assert HOSTILE[name][:60] in shown, name


async def test_stored_markup_does_not_run_in_a_browser(browser_page: Any, tmp_path: Path) -> None:
    store = InMemoryHistoryStore()
    written = await write_report(store, await _hostile_session(store), tmp_path / "page.html")
    page = browser_page
    errors: list[str] = []
    dialogs: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("dialog", lambda dialog: dialogs.append(dialog.message))
    await page.goto(written.as_uri())
    await page.goto(f"{written.as_uri()}#{HOSTILE['message id']}")  # the page's own script
    assert await page.evaluate("typeof window.__pwned") == "undefined"
    assert await page.locator("img, iframe, base, svg[onload], style:not(head style)").count() == 0
    assert (errors, dialogs, page.blocked) == ([], [], [])
    assert HOSTILE["text"][:60] in await page.locator("body").inner_text()
    assert await page.title() == f"chatledger audit: {SESSION}"
