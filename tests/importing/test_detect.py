"""detect_format: the documented rules, one source of each kind."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from store.errors import InvalidSource
from store.importing import detect_format
from tests.importing.sources import anthropic_body, responses_items, weather_chat

LANGCHAIN_MESSAGE = {"type": "human", "data": {"content": "hi", "type": "human"}}

CASES: dict[str, tuple[str, Any]] = {
    "chatledger.jsonl": ("jsonl", {"format": "chatledger", "version": 1}),
    "session.json": ("agent-framework", {"type": "session", "session_id": "s", "state": {}}),
    "af-history.jsonl": ("agent-framework", {"role": "user", "contents": []}),
    "lc.jsonl": ("langchain", {"session_id": "s", "messages": [LANGCHAIN_MESSAGE]}),
    "body.json": ("anthropic", anthropic_body(1)),
    "body-no-system.jsonl": (
        "anthropic",
        {"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]}]},
    ),
    "responses.json": ("openai-responses", responses_items(1)),
    "responses-input.jsonl": ("openai-responses", {"input": responses_items(1)}),
    "responses-item.jsonl": ("openai-responses", {"type": "function_call", "call_id": "c"}),
    "chat.jsonl": ("openai-chat", {"messages": weather_chat(1)}),
    "chat-list.json": ("openai-chat", weather_chat(1)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_rule(tmp_path: Path, name: str) -> None:
    expected, record = CASES[name]
    path = tmp_path / name
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    assert detect_format(path) == expected


def test_a_folder_is_agent_framework(tmp_path: Path) -> None:
    assert detect_format(tmp_path) == "agent-framework"


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"", "empty"), (b'{"x": 1}\n', "not a chat log"), (b"\xff\xfe\x00", "not UTF-16 text")],
)
def test_unknown_content_is_refused(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(content)
    with pytest.raises(InvalidSource, match=message):
        detect_format(path)


def test_missing_source(tmp_path: Path) -> None:
    with pytest.raises(InvalidSource, match="no such file"):
        detect_format(tmp_path / "nope.jsonl")
