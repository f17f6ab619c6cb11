"""Anthropic Messages API: round trips, turn splitting, pairing, errors, foreign shapes."""

from __future__ import annotations

from typing import Any

import pytest

from store.formats import (
    FormatError,
    anthropic_request,
    from_anthropic,
    from_openai_chat,
    to_anthropic,
    to_openai_chat,
)
from strategies.groups import annotate
from strategies.messages import (
    MESSAGES_ADAPTER,
    DataContent,
    FunctionCallContent,
    FunctionResultContent,
    OtherContent,
    ReasoningContent,
    TextContent,
)

USE = {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}}
RESULT = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}

VARIANTS: dict[str, dict[str, Any]] = {
    "user string": {"role": "user", "content": "hi"},
    "user blocks": {"role": "user", "content": [{"type": "text", "text": "hi"}]},
    "text extras": {
        "role": "user",
        "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}],
    },
    "image base64": {
        "role": "user",
        "content": [
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"},
            }
        ],
    },
    "document url": {
        "role": "user",
        "content": [
            {
                "type": "document",
                "source": {"type": "url", "url": "https://x.test/a.pdf"},
                "title": "a",
            }
        ],
    },
    "assistant calls": {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "sig"},
            {"type": "text", "text": "looking"},
            USE,
            {**USE, "id": "toolu_2"},
        ],
    },
    "redacted": {"role": "assistant", "content": [{"type": "redacted_thinking", "data": "xx"}]},
    "server tool": {
        "role": "assistant",
        "content": [
            {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {}},
            {"type": "web_search_tool_result", "tool_use_id": "srv_1", "content": []},
        ],
    },
    "results only": {"role": "user", "content": [RESULT, {**RESULT, "tool_use_id": "toolu_2"}]},
    "result error": {"role": "user", "content": [{**RESULT, "is_error": True}]},
    "result blocks": {
        "role": "user",
        "content": [{**RESULT, "content": [{"type": "text", "text": "sunny"}]}],
    },
    "results then text": {"role": "user", "content": [RESULT, {"type": "text", "text": "and?"}]},
    "unknown block": {"role": "user", "content": [{"type": "future", "x": 1}]},
    "unknown key": {"role": "user", "content": "hi", "x_note": 1},
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_round_trip_each_variant(name: str) -> None:
    original = VARIANTS[name]
    messages = from_anthropic([original])
    assert to_anthropic(messages) == [original]
    stored = MESSAGES_ADAPTER.validate_json(MESSAGES_ADAPTER.dump_json(messages))
    assert to_anthropic(stored) == [original]


def test_request_body_round_trip_keeps_system_apart() -> None:
    body = {
        "system": "be brief",
        "messages": [VARIANTS["user string"], VARIANTS["assistant calls"]],
    }
    messages = from_anthropic(body["messages"], system=body["system"])
    assert [m.role for m in messages] == ["system", "user", "assistant"]
    assert anthropic_request(messages) == body


def test_mapping() -> None:
    (assistant,) = from_anthropic([VARIANTS["assistant calls"]])
    thinking, text, first, second = assistant.contents
    assert isinstance(thinking, ReasoningContent) and thinking.text == "hmm"
    assert text == TextContent(text="looking")
    assert isinstance(first, FunctionCallContent) and isinstance(second, FunctionCallContent)
    assert (first.call_id, first.name, first.arguments) == ("toolu_1", "weather", {"city": "Oslo"})
    tools = from_anthropic([VARIANTS["results only"]])
    assert [m.role for m in tools] == ["tool", "tool"]
    assert [c.call_id for m in tools for c in m.contents] == ["toolu_1", "toolu_2"]  # type: ignore[union-attr]
    (failed,) = from_anthropic([VARIANTS["result error"]])
    assert failed.contents == [
        FunctionResultContent(call_id="toolu_1", result="sunny", is_error=True)
    ]
    tool, user = from_anthropic([VARIANTS["results then text"]])
    assert (tool.role, user.role, user.text) == ("tool", "user", "and?")
    (image,) = from_anthropic([VARIANTS["image base64"]])[0].contents
    assert isinstance(image, DataContent) and image.media_type == "image/png"
    server = from_anthropic([VARIANTS["server tool"]])[0].contents
    assert all(isinstance(c, OtherContent) for c in server)
    assert [(c.pairing, c.call_id) for c in server] == [("call", "srv_1"), ("result", "srv_1")]  # type: ignore[union-attr]


def test_calls_and_results_form_groups() -> None:
    messages = from_anthropic(
        [VARIANTS["user string"], VARIANTS["assistant calls"], VARIANTS["results only"]]
    )
    groups = [group for _, group in annotate(messages).message_groups]
    assert groups[1] == groups[2] == groups[3] != groups[0]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("hi", "expected a message object"),
        ({"content": "x"}, "role must be a string"),
        ({"role": "user", "content": 3}, "content must be"),
        ({"role": "assistant", "content": [{"type": "tool_use", "name": "f"}]}, "id and name"),
        ({"role": "user", "content": [{"type": "tool_result"}]}, "needs a tool_use_id"),
        ({"role": "critic", "content": "x"}, "'critic'"),
    ],
)
def test_bad_input_names_the_item(bad: Any, message: str) -> None:
    with pytest.raises(FormatError, match=message) as caught:
        from_anthropic([VARIANTS["user string"], bad])
    assert caught.value.index == 1


def test_chat_and_anthropic_keep_calls_paired_both_ways() -> None:
    anthropic = [VARIANTS["user string"], VARIANTS["assistant calls"], VARIANTS["results only"]]
    chat = to_openai_chat(from_anthropic(anthropic))
    assert [m["role"] for m in chat] == ["user", "assistant", "tool", "tool"]
    assert [c["id"] for c in chat[1]["tool_calls"]] == ["toolu_1", "toolu_2"]
    assert [m["tool_call_id"] for m in chat[2:]] == ["toolu_1", "toolu_2"]
    back = to_anthropic(from_openai_chat(chat))
    assert [m["role"] for m in back] == ["user", "assistant", "user"]
    uses = [b["id"] for b in back[1]["content"] if b["type"] == "tool_use"]
    results = [b["tool_use_id"] for b in back[2]["content"]]
    assert uses == results == ["toolu_1", "toolu_2"]
    assert back[1]["content"][-1]["input"] == {"city": "Oslo"}
