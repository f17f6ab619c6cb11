"""What the recall end-to-end tests share: the conversation, the fact and the checks.

Turn 0 states a fact; each later turn makes a lookup whose result is large against the
window, so that the window strategy excludes turn 0 after a few turns. The last turn
asks for the fact: the scripted model calls the recall tool with :data:`QUERY`, then
answers with the recall result it was sent.
"""

from __future__ import annotations

import json
from typing import Any

from store.contract import HistoryBackend
from store.search.recall import RECALL_KEY, is_recall_result, quoted_ids
from strategies.tokenizers import Tokenizer

FACT = "the locker code is 4417"
STATEMENT = f"remember this: {FACT}"
QUERY = "locker code"
ASK = "recall: what is the locker code?"
RECALL_TOKENS = 400
"""The recall budget of the tests (small, so that the requests stay in the window)."""
WINDOW = 3000
OUTPUT = 500
BUDGET = WINDOW - OUTPUT
FILLER_TURNS = 10
NOTE = "(Recall what this replaced.)"


def filler(turn: int) -> str:
    """The user's request of filler turn ``turn``."""
    return f"question {turn}"


def big_result(query: str, rows: int = 60) -> str:
    """A deterministic, large lookup result (words, so that tokenizers count it honestly)."""
    return " ".join(f"{query}-row{i}" for i in range(rows))


def answer_from(result: str) -> str:
    """The scripted model's answer once it was sent the recall result ``result``."""
    return f"recalled: {result}"


async def assert_fact_was_compacted_away(store: HistoryBackend, session_id: str) -> str:
    """The fact's message id, after checking it is excluded from the session's context."""
    stored = await store.history(session_id, include_excluded=True)
    [message] = [m for m in stored if FACT in m.message.text and m.message.role == "user"]
    assert message.excluded, "the fact was not compacted away: the test proves nothing"
    return message.message.message_id


def assert_recall_result(text: str, fact_id: str, tokenizer: Tokenizer) -> dict[str, Any]:
    """The recall result ``text`` holds the fact, excluded, within its budget."""
    assert is_recall_result(text), text
    assert tokenizer.count_tokens(text) <= RECALL_TOKENS
    assert fact_id in quoted_ids(text)
    result: dict[str, Any] = json.loads(text)
    first = result["hits"][0]
    assert FACT in first["text"]
    assert first["excluded"]["by"].startswith("evt_")
    assert result[RECALL_KEY]["quotes"][0] == fact_id
    return result
