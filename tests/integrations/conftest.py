"""Fixtures for the Agent Framework integration tests: stores, a tool, a checker."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest

pytest.importorskip("agent_framework")

from agent_framework import Message as AFMessage

from store.integrations.agent_framework import from_af_messages
from store.memory import InMemoryHistoryStore, MemoryDatabase
from strategies.messages import FunctionCallContent, FunctionResultContent
from strategies.tokenizers import TiktokenTokenizer, Tokenizer, count_messages_tokens
from tests.integrations.scripted_client import Recorded, big_result

WINDOW = 3000
OUTPUT = 500
BUDGET = WINDOW - OUTPUT
RESULT_WORDS = 100


def lookup(query: str) -> str:
    """Look ``query`` up (returns a large, deterministic result)."""
    return big_result(query, RESULT_WORDS)


@pytest.fixture(scope="session")
def tokenizer() -> Tokenizer:
    return TiktokenTokenizer("o200k_base")


@pytest.fixture
def database() -> MemoryDatabase:
    return MemoryDatabase()


@pytest.fixture
def memory_store(database: MemoryDatabase, tokenizer: Tokenizer) -> InMemoryHistoryStore:
    return InMemoryHistoryStore(database, tokenizer=tokenizer)


@dataclass
class CallCheck:
    """What one recorded model call showed."""

    tokens: int
    newest_user: str | None


def check_call(call: Recorded, tokenizer: Tokenizer, *, budget: int) -> CallCheck:
    """Assert the per-call invariants on what the client received; return its figures."""
    ours = from_af_messages(call.messages)
    calls = {c.call_id for m in ours for c in m.contents if isinstance(c, FunctionCallContent)}
    results = {c.call_id for m in ours for c in m.contents if isinstance(c, FunctionResultContent)}
    assert results <= calls, f"results without their call: {results - calls}"
    # The framework answers every call before the next model call, so nothing is pending.
    assert calls <= results, f"calls without their result: {calls - results}"
    tokens = count_messages_tokens(ours, tokenizer)
    assert tokens <= budget, f"{tokens} tokens sent, budget {budget}"
    users = [m.text for m in ours if m.role == "user"]
    return CallCheck(tokens=tokens, newest_user=users[-1] if users else None)


def texts(messages: Sequence[AFMessage]) -> list[str]:
    """The text of each message."""
    return [m.text for m in messages]
