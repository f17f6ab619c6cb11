"""Pydantic AI messages: what each part becomes, the error flag of results, and messages
from other formats written as Pydantic AI reads them."""

from __future__ import annotations

from typing import Any

import pytest

from store.formats import FormatError, from_openai_chat, from_pydantic_ai, to_pydantic_ai
from strategies.messages import FunctionResultContent, OtherContent, UriContent


def _return(outcome: str) -> dict[str, Any]:
    return {
        "tool_name": "get_weather",
        "content": "boom",
        "tool_call_id": "c1",
        "outcome": outcome,
        "part_kind": "tool-return",
    }


@pytest.mark.parametrize(
    ("outcome", "is_error"),
    [("success", False), ("failed", True), ("retried", True), ("denied", True)],
)
def test_the_outcome_of_a_return_is_its_error_flag(outcome: str, is_error: bool) -> None:
    items = [{"kind": "request", "parts": [_return(outcome)]}]
    (message,) = from_pydantic_ai(items)
    result = message.contents[0]
    assert message.role == "tool"
    assert isinstance(result, FunctionResultContent)
    assert (result.call_id, result.result, result.is_error) == ("c1", "boom", is_error)
    assert to_pydantic_ai([message]) == items


def test_a_legacy_retry_prompt_is_an_error_result_or_kept_whole_without_a_tool() -> None:
    retry = {
        "content": "city must be a string",
        "tool_name": "get_weather",
        "tool_call_id": "c1",
        "timestamp": "2025-01-02T03:04:05Z",
        "part_kind": "retry-prompt",
    }
    feedback = {
        "content": "answer in JSON",
        "tool_name": None,
        "tool_call_id": "x",
        "part_kind": "retry-prompt",
    }
    items = [{"kind": "request", "parts": [retry, feedback], "instructions": None}]
    tool, user = from_pydantic_ai(items)
    result = tool.contents[0]
    assert isinstance(result, FunctionResultContent)
    assert (result.result, result.is_error) == ("city must be a string", True)
    assert (
        tool.created_at is not None and tool.created_at.isoformat() == "2025-01-02T03:04:05+00:00"
    )
    assert user.role == "user"
    assert isinstance(user.contents[0], OtherContent)
    assert user.contents[0].kind == "retry-prompt"
    assert to_pydantic_ai([tool, user]) == items


def test_user_prompt_files_are_uri_contents_and_come_back() -> None:
    part = {
        "content": [
            "Look:",
            {"url": "https://x/cat.png", "media_type": "image/png", "kind": "image-url"},
        ],
        "timestamp": "2025-01-02T03:04:05.250000Z",
        "part_kind": "user-prompt",
    }
    items = [{"kind": "request", "parts": [part]}]
    (message,) = from_pydantic_ai(items)
    assert message.text == "Look:"
    image = message.contents[1]
    assert isinstance(image, UriContent)
    assert (image.uri, image.media_type) == ("https://x/cat.png", "image/png")
    assert to_pydantic_ai([message]) == items


def test_messages_from_elsewhere_alternate_requests_and_responses() -> None:
    chat = from_openai_chat(
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
            {"role": "tool", "tool_call_id": "nowhere", "content": "lost"},
            {"role": "assistant", "content": "Sunny."},
        ]
    )
    written = to_pydantic_ai(chat)
    assert [item["kind"] for item in written] == ["request", "response", "request", "response"]
    assert [p["part_kind"] for p in written[0]["parts"]] == ["system-prompt", "user-prompt"]
    assert written[1]["parts"] == [
        {"tool_name": "w", "tool_call_id": "c1", "args": "{}", "part_kind": "tool-call"}
    ]
    assert written[2]["parts"] == [
        {
            "tool_name": "w",
            "content": "sunny",
            "tool_call_id": "c1",
            "outcome": "success",
            "part_kind": "tool-return",
        }
    ]  # the result of no written call is left out
    assert written[3]["parts"] == [{"content": "Sunny.", "part_kind": "text"}]


@pytest.mark.parametrize(
    ("items", "problem"),
    [
        ([{"kind": "request"}], "item 0: expected a request or response"),
        ([{"kind": "response", "parts": [{"content": "x"}]}], r"parts\[0\] has no part_kind"),
        (
            [{"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "w"}]}],
            "tool_call_id",
        ),
    ],
)
def test_what_cannot_be_read_names_the_item(items: list[Any], problem: str) -> None:
    with pytest.raises(FormatError, match=problem):
        from_pydantic_ai(items)
