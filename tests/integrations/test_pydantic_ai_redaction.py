"""Redacting any message of a Pydantic AI entry erases that part's only copy: the stored
database holds none of its text, ``load`` reads it back as the tombstone's part, and the
entry's other parts read back equal (issue #40 review, finding 1)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai.conversation import Conversation
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from store import HistoryStore
from store.integrations.pydantic_ai import ChatledgerConversationStore
from store.memory import InMemoryHistoryStore, MemoryDatabase
from strategies.tokenizers import TiktokenTokenizer

AT = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def conversation() -> list[ModelMessage]:
    """Two requests of several parts, each part with a secret of its own."""
    return [
        ModelRequest(
            parts=[
                SystemPromptPart("system secret-S0", timestamp=AT),
                UserPromptPart("my ssn is secret-S1", timestamp=AT),
                UserPromptPart("and my pin secret-S2", timestamp=AT),
            ],
            timestamp=AT,
        ),
        ModelResponse(
            parts=[
                ToolCallPart("lookup", {"q": "a"}, tool_call_id="t1"),
                ToolCallPart("check", {"q": "b"}, tool_call_id="t2"),
            ],
            timestamp=AT,
        ),
        ModelRequest(
            parts=[
                ToolReturnPart("lookup", "token secret-T0", tool_call_id="t1", timestamp=AT),
                ToolReturnPart(
                    "check", "bad secret-T1", tool_call_id="t2", outcome="failed", timestamp=AT
                ),
            ],
            timestamp=AT,
        ),
        ModelResponse(parts=[TextPart("answer secret-A0")], timestamp=AT),
    ]


SECRETS = {(0, 0): "secret-S0", (0, 1): "secret-S1", (0, 2): "secret-S2"}
SECRETS |= {(2, 0): "secret-T0", (2, 1): "secret-T1", (3, 0): "secret-A0"}


def _dump(path: Path) -> str:
    with sqlite3.connect(path) as connection:
        return "\n".join(connection.iterdump())


def _file_bytes(path: Path) -> bytes:
    """The database file's bytes and its write-ahead log's."""
    return b"".join(p.read_bytes() for p in path.parent.iterdir() if p.name.startswith(path.name))


@pytest.mark.parametrize("where", sorted(SECRETS))
async def test_redacting_any_message_of_an_entry_erases_its_only_copy(
    tmp_path: Path, where: tuple[int, int]
) -> None:
    path = tmp_path / "redact.db"
    async with HistoryStore.open(f"sqlite:///{path}") as backend:
        store = ChatledgerConversationStore(backend)
        messages = conversation()
        entries = await store.save(Conversation(conversation_id="c", messages=messages))
        assert SECRETS[where] in _dump(path)
        index, n = where
        message_id = entries[index].id if n == 0 else f"{entries[index].id}:{n}"
        await backend.redact("c", [message_id], reason="asked to forget")
        loaded = await store.load("c")
    assert loaded is not None and len(loaded.messages) == len(messages)
    secret = SECRETS[where]
    assert secret not in repr(loaded.messages)
    assert secret not in _dump(path)
    assert secret.encode() not in _file_bytes(path)  # nor in its free pages or its log
    for other, text in SECRETS.items():
        if other != where:
            assert text in repr(loaded.messages), other
    for i, (mine, saved) in enumerate(zip(loaded.messages, messages, strict=True)):
        assert type(mine) is type(saved)
        if i != index:
            assert mine == saved, i
            continue
        assert len(mine.parts) == len(saved.parts)
        for p, (part, original) in enumerate(zip(mine.parts, saved.parts, strict=True)):
            if p == n or isinstance(saved, ModelResponse):
                assert type(part) is type(original) or isinstance(part, TextPart)
                assert getattr(part, "tool_call_id", None) == getattr(
                    original, "tool_call_id", None
                )
                assert getattr(part, "tool_name", None) == getattr(original, "tool_name", None)
            else:
                assert part == original, (i, p)


async def test_a_redacted_entry_still_continues_on_memory() -> None:
    backend = InMemoryHistoryStore(MemoryDatabase(), tokenizer=TiktokenTokenizer("o200k_base"))
    store = ChatledgerConversationStore(backend)
    entries = await store.save(Conversation(conversation_id="c", messages=conversation()))
    await backend.redact("c", [entries[0].id, f"{entries[2].id}:1"], reason="forget")
    loaded = await store.load("c")
    assert loaded is not None
    text = repr(loaded.messages)
    assert "secret-S0" not in text and "secret-T1" not in text
    assert "secret-S1" in text and "secret-T0" in text
    loaded.messages.append(ModelRequest(parts=[UserPromptPart("more", timestamp=AT)]))
    await store.save(loaded)
    again = await store.load("c")
    assert again is not None and again.messages == loaded.messages
    assert (
        await store.read_history((await store.load_entries("c") or [])[-1].id, limit=3)
        == (await store.load_entries("c") or [])[-3:]
    )
