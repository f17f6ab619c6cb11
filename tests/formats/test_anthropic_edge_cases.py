"""Anthropic edge cases: declined blocks kept verbatim, odd system values, foreign shapes."""

from __future__ import annotations

from typing import Any

import pytest

from store.formats import FormatError, anthropic_request, from_anthropic, to_anthropic
from strategies.messages import (
    FunctionCallContent,
    FunctionResultContent,
    Message,
    OtherContent,
    ReasoningContent,
    TextContent,
)


def _assistant(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


@pytest.mark.parametrize(
    "block",
    [
        pytest.param({"type": "thinking", "signature": "sig"}, id="thinking without text"),
        pytest.param({"type": "redacted_thinking", "data": 7}, id="redacted without data"),
        pytest.param({"type": "image", "source": "not an object"}, id="image source not a map"),
        pytest.param(
            {"type": "document", "source": {"type": "file", "file_id": "f_1"}},
            id="document file source",
        ),
    ],
)
def test_a_block_its_reader_declines_is_kept_as_other_content(block: dict[str, Any]) -> None:
    item = _assistant(block)
    [message] = from_anthropic([item])
    [content] = message.contents
    assert isinstance(content, OtherContent)
    assert content.kind == block["type"]
    assert content.payload == {k: v for k, v in block.items() if k != "type"}
    assert to_anthropic([message]) == [item]


def test_tool_use_without_input_is_kept_verbatim_as_a_paired_call() -> None:
    item = _assistant({"type": "tool_use", "id": "toolu_1", "name": "now"})
    [message] = from_anthropic([item])
    [call] = message.contents
    # written back, a FunctionCallContent would gain ``input: {}``; so the block is kept
    assert isinstance(call, OtherContent)
    assert (call.kind, call.call_id, call.pairing) == ("tool_use", "toolu_1", "call")
    assert to_anthropic([message]) == [item]


def test_user_blocks_without_results_stay_one_user_message() -> None:
    item = {
        "role": "user",
        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
    }
    [message] = from_anthropic([item])
    assert message.role == "user"
    assert [c.text for c in message.contents if isinstance(c, TextContent)] == ["a", "b"]
    assert to_anthropic([message]) == [item]


def test_a_non_object_item_is_rejected_with_its_type() -> None:
    with pytest.raises(FormatError, match=r"^item 1: expected a message object, got str$"):
        from_anthropic([{"role": "user", "content": "hi"}, "hello"])  # type: ignore[list-item]


def test_a_system_that_is_neither_string_nor_list_is_rejected() -> None:
    with pytest.raises(FormatError, match=r"^item -1: system must be a string or a list"):
        from_anthropic([], system={"text": "be brief"})


def test_a_request_without_system_messages_has_no_system_key() -> None:
    body = anthropic_request(from_anthropic([{"role": "user", "content": "hi"}]))
    assert body == {"messages": [{"role": "user", "content": "hi"}]}


def test_an_empty_request_reads_to_no_messages() -> None:
    assert from_anthropic([]) == []


def test_foreign_reasoning_without_signature_is_left_out() -> None:
    message = Message(role="assistant", contents=[ReasoningContent(text="hmm")])
    assert to_anthropic([message]) == []  # a thinking block needs its signature
    answer = Message(
        role="assistant", contents=[ReasoningContent(text="hmm"), TextContent(text="a")]
    )
    assert to_anthropic([answer]) == [{"role": "assistant", "content": "a"}]
    signed = ReasoningContent(text="hmm", payload={"signature": "sig"})
    assert to_anthropic([Message(role="assistant", contents=[signed])]) == [
        {
            "role": "assistant",
            "content": [{"type": "thinking", "thinking": "hmm", "signature": "sig"}],
        }
    ]


def test_foreign_result_without_value_has_no_content_key() -> None:
    tool = Message(role="tool", contents=[FunctionResultContent(call_id="c1", result=None)])
    assert to_anthropic([tool]) == [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1"}]}
    ]


@pytest.mark.parametrize(
    ("arguments", "written"),
    [
        pytest.param("", {}, id="empty string"),
        pytest.param(None, {}, id="none"),
        pytest.param("not json", {"input": "not json"}, id="not json"),
        pytest.param("[1, 2]", {"input": [1, 2]}, id="json list"),
    ],
)
def test_foreign_call_arguments_become_an_input_object(
    arguments: str | None, written: dict[str, Any]
) -> None:
    call = FunctionCallContent(call_id="c1", name="f", arguments=arguments)
    message = Message(role="assistant", contents=[call])
    [block] = to_anthropic([message])[0]["content"]
    assert block["input"] == written


@pytest.mark.parametrize(
    ("result", "content"),
    [
        pytest.param(
            [{"type": "text", "text": "sunny"}], [{"type": "text", "text": "sunny"}], id="blocks"
        ),
        pytest.param(["sunny", "warm"], '["sunny", "warm"]', id="untyped list"),
        pytest.param({"temp": 21}, '{"temp": 21}', id="object"),
    ],
)
def test_foreign_result_values_become_blocks_or_json_text(result: Any, content: Any) -> None:
    tool = Message(role="tool", contents=[FunctionResultContent(call_id="c1", result=result)])
    [block] = to_anthropic([tool])[0]["content"]
    assert block["content"] == content


def test_a_foreign_user_message_after_a_string_user_turn_joins_it_as_blocks() -> None:
    first = Message(role="user", contents=[TextContent(text="hi")])
    second = Message(role="user", contents=[TextContent(text="again")])
    assert to_anthropic([first, second]) == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": "again"}],
        }
    ]


def test_a_native_turn_continuation_after_a_string_turn_turns_it_into_blocks() -> None:
    [question] = from_anthropic([{"role": "user", "content": "hi"}])
    [_, result] = from_anthropic(
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "x"},
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"},
                ],
            }
        ]
    )
    # the result continues a turn; written after a string-form turn it joins that turn
    assert to_anthropic([question, result]) == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "hi"},
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"},
            ],
        }
    ]
