"""A demo session with every thing the audit page shows, written through the contract."""

from __future__ import annotations

import json
from pathlib import Path

from store.contract import HistoryBackend
from store.demo import DemoConfig, run_demo
from store.importing import import_sources
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
