"""Vercel AI SDK UI messages: tool parts cut into calls and results, their error flags,
and messages from other formats written as the SDK keeps them."""

from __future__ import annotations

from typing import Any

import pytest

from store.formats import FormatError, from_openai_chat, from_vercel_ai, to_vercel_ai
from strategies.messages import FunctionCallContent, FunctionResultContent


def _assistant(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"id": "a1", "role": "assistant", "parts": list(parts), "metadata": {"model": "m"}}


def test_a_denied_call_is_an_error_result_and_comes_back() -> None:
    part = {
        "type": "tool-book",
        "toolCallId": "c1",
        "state": "output-denied",
        "input": {"people": 2},
        "approval": {"id": "ap1", "approved": False, "reason": "too late"},
    }
    items = [_assistant(part)]
    call_message, result_message = from_vercel_ai(items)
    call, result = call_message.contents[0], result_message.contents[0]
    assert isinstance(call, FunctionCallContent) and call.name == "book"
    assert isinstance(result, FunctionResultContent)
    assert (result.result, result.is_error) == ("too late", True)
    assert result_message.message_id == "a1/c1"
    assert to_vercel_ai([call_message, result_message]) == items


def test_results_come_before_what_the_model_wrote_after_them() -> None:
    items = [
        _assistant(
            {
                "type": "tool-w",
                "toolCallId": "c1",
                "state": "output-available",
                "input": {},
                "output": 1,
            },
            {"type": "text", "text": "done"},
            {"type": "tool-w", "toolCallId": "c2", "state": "input-available", "input": {}},
        )
    ]
    messages = from_vercel_ai(items)
    assert [(m.message_id, m.role) for m in messages] == [
        ("a1", "assistant"),
        ("a1/c1", "tool"),
        ("a1#2", "assistant"),
    ]
    assert to_vercel_ai(messages) == items


def test_messages_from_elsewhere_are_one_assistant_message_a_response() -> None:
    chat = from_openai_chat(
        [
            {"role": "user", "content": "Weather?", "id": "u1"},
            {
                "role": "assistant",
                "content": None,
                "id": "a1",
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "sunny", "id": "t1"},
            {"role": "assistant", "content": "Sunny.", "id": "a2"},
        ]
    )
    assert to_vercel_ai(chat) == [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Weather?"}]},
        {
            "id": "a1",
            "role": "assistant",
            "parts": [
                {
                    "type": "tool-w",
                    "toolCallId": "c1",
                    "input": "{}",
                    "state": "output-available",
                    "output": "sunny",
                },
                {"type": "text", "text": "Sunny."},
            ],
        },
    ]


@pytest.mark.parametrize(
    ("items", "problem"),
    [
        ([{"id": "x", "role": "user"}], "item 0: expected a UI message"),
        ([{"role": "user", "parts": []}], "needs a non-empty string id"),
        ([_assistant({"type": "tool-w", "state": "input-available"})], "toolCallId"),
        (
            [_assistant({"type": "tool-w", "toolCallId": "c", "state": "lost"})],
            "unknown tool state",
        ),
    ],
)
def test_what_cannot_be_read_names_the_item(items: list[Any], problem: str) -> None:
    with pytest.raises(FormatError, match=problem):
        from_vercel_ai(items)
