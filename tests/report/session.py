"""A demo session with every thing the audit page shows, written through the contract."""

from __future__ import annotations

import json
from pathlib import Path

from store.contract import HistoryBackend
from store.demo import DemoConfig, run_demo
from store.formats import ORIGINAL_ID_KEY
from store.importing import import_sources
from store.usage import Usage
from strategies import SummarizationStrategy, ToolResultReductionStrategy, TruncationStrategy
from strategies.messages import FunctionCallContent, FunctionResultContent, Message
from strategies.summarizers import FakeSummarizer

SESSION = "demo-audit"
IMPORTED = "imported-chat"


async def imported_session(store: HistoryBackend, folder: Path, *, turns: int = 4) -> str:
    """An OpenAI chat of ``turns`` user turns, imported (stored in one go), then compacted
    by the command line's ``sliding-window`` strategy."""
    messages: list[dict[str, object]] = [{"role": "system", "content": "You are terse."}]
    for turn in range(1, turns + 1):
        messages += [
            {"role": "user", "content": f"question {turn} " + "word " * 20 * turn},
            {"role": "assistant", "content": f"answer {turn} " + "word " * 10},
        ]
    source = folder / "chat.jsonl"
    source.write_text(json.dumps({"id": IMPORTED, "messages": messages}) + "\n")
    await import_sources(store, [source], format="openai-chat")
    await store.compact(IMPORTED, "sliding-window:keep_last_turns=2")
    return IMPORTED


def _shorten(text: str) -> str:
    return text[:40] + " [cut]"


def tool_turn(index: int) -> list[Message]:
    """A user turn with one call of ``fetch`` and its long result."""
    call = f"fetch-{index}"
    return [
        Message.text_message("user", f"fetch page {index}"),
        Message(
            role="assistant",
            contents=[FunctionCallContent(call_id=call, name="fetch", arguments={"page": index})],
        ),
        Message(
            role="tool",
            contents=[FunctionResultContent(call_id=call, result="line of output " * 60)],
        ),
        Message.text_message("assistant", f"page {index} fetched"),
    ]


async def demo_session(store: HistoryBackend, *, turns: int = 12) -> str:
    """Play the demo (tool-result summaries and truncation on write), then add a reduced
    tool result, a pin, a failed and a blocked compaction, and a summary of old groups."""
    await run_demo(
        store,
        DemoConfig(turns=turns, session_id=SESSION, max_context_window_tokens=4096),
    )
    for index in range(3):
        await store.append(SESSION, tool_turn(index))
    await store.compact(SESSION, ToolResultReductionStrategy(reducers={"fetch": _shorten}))
    failing = SummarizationStrategy(client=FakeSummarizer(fail="error"), target_count=4)
    failed = await store.compact(SESSION, failing)
    assert failed is not None and failed.outcome == "failed"
    summarized = await store.compact(
        SESSION, SummarizationStrategy(client=FakeSummarizer(), target_count=6, threshold=0)
    )
    assert summarized is not None and summarized.summarized
    view = await store.view(SESSION)
    await store.pin(SESSION, [g.group_id for g in view.groups[-3:]])
    truncation = TruncationStrategy(max_n=1, compact_to=1)
    await store.compact(SESSION, truncation)  # excludes what it may, the pins stay
    blocked = await store.compact(SESSION, truncation)
    assert blocked is not None and blocked.outcome == "blocked"
    return SESSION


USAGE_SESSION = "usage-audit"
GPT = "gpt-4.1"
CLAUDE = "claude-sonnet-4-5"
PRICES = {GPT: {"input": 2.0, "output": 8.0, "cache_read": 0.5}}
"""Prices of gpt-4.1 only (its cache writes at the input price); claude is unpriced."""


async def usage_session(store: HistoryBackend) -> dict[int, int | None]:
    """A session of three user turns with model calls recorded through the contract:

    * turn 1: a call recorded before any message (no projection), the call that
      produced ``a-1``, recorded before ``a-1`` is stored, and a late call naming
      ``a-1`` recorded during turn 2;
    * turn 2: a call naming no message (the turn of the newest message then stored);
    * turn 3: after a compaction, a call of claude naming the provider's id of a
      message the store gave another id (kept as its original id): a cache break.

    Returns the local count of each turn's paired calls (None: no paired call)."""
    session = USAGE_SESSION
    await store.record_usage(session, Usage(model=GPT, input_tokens=100, output_tokens=10))
    await store.append(session, [Message.text_message("user", "question one " + "word " * 30)])
    await store.context(session)
    await store.record_usage(
        session,
        Usage(model=GPT, input_tokens=1000, cache_read_tokens=0, output_tokens=50),
        message_id="a-1",
    )
    await store.append(session, [Message.text_message("assistant", "answer one", message_id="a-1")])
    await store.append(session, [Message.text_message("user", "question two " + "word " * 30)])
    await store.context(session)
    await store.record_usage(
        session, Usage(model=GPT, input_tokens=1200, cache_read_tokens=900, output_tokens=60)
    )
    await store.record_usage(
        session,
        Usage(model=GPT, input_tokens=300, output_tokens=5),
        message_id="a-1",
        call_id="late",
    )
    await store.append(
        session,
        [
            Message.text_message("assistant", "answer two"),
            Message.text_message("user", "question three " + "word " * 30),
            Message.text_message(
                "assistant",
                "answer three",
                message_id="m-stored-3",
                metadata={ORIGINAL_ID_KEY: "provider-msg-3"},
            ),
        ],
    )
    event = await store.compact(session, "sliding-window:keep_last_turns=1")
    assert event is not None and event.outcome == "applied"
    await store.context(session)
    await store.record_usage(
        session,
        Usage(
            model=CLAUDE,
            input_tokens=800,
            cache_read_tokens=0,
            cache_write_tokens=700,
            output_tokens=40,
        ),
        message_id="provider-msg-3",
    )
    calls = await store.usage_calls(session)
    kept = [c.prefix_kept for c in calls]
    assert kept == [None, None, True, None, False], kept  # the seed is as said
    local = [c.local_tokens for c in calls]
    assert local[0] is None and local[3] is None
    return {1: local[1], 2: local[2], 3: local[4]}
