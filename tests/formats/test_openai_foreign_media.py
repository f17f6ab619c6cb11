"""OpenAI Chat and Responses: media, results and odd parts from other formats."""

from __future__ import annotations

from typing import Any

import pytest

from store.formats import (
    from_openai_chat,
    from_openai_responses,
    to_openai_chat,
    to_openai_responses,
)
from strategies.messages import (
    Content,
    DataContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    OtherContent,
    ReasoningContent,
    TextContent,
    UriContent,
)

MEDIA: list[Content] = [
    DataContent(data="iVBO", media_type="image/png"),
    DataContent(data="UklG", media_type="audio/mp3"),
    DataContent(data="UklG"),
    DataContent(data="JVBE", media_type="application/pdf"),
    UriContent(uri="https://x.test/pic.png"),
]


def test_foreign_media_become_chat_image_audio_and_file_parts() -> None:
    message = Message(role="user", contents=[TextContent(text="look"), *MEDIA])
    [written] = to_openai_chat([message])
    assert written["content"] == [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}},
        {"type": "input_audio", "input_audio": {"data": "UklG", "format": "mp3"}},
        {
            "type": "file",
            "file": {"file_data": "data:application/octet-stream;base64,UklG"},
        },
        {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBE"}},
        {"type": "image_url", "image_url": {"url": "https://x.test/pic.png"}},
    ]


def test_chat_audio_part_without_data_is_kept_verbatim() -> None:
    part = {"type": "input_audio", "input_audio": {"format": "wav"}}
    item = {"role": "user", "content": [part]}
    [message] = from_openai_chat([item])
    [content] = message.contents
    assert isinstance(content, OtherContent)
    assert (content.kind, content.payload) == ("input_audio", {"input_audio": {"format": "wav"}})
    assert to_openai_chat([message]) == [item]


@pytest.mark.parametrize(
    ("result", "content"),
    [
        pytest.param(None, "", id="none"),
        pytest.param(
            [{"type": "text", "text": "sunny"}], [{"type": "text", "text": "sunny"}], id="parts"
        ),
        pytest.param(["a", 1], '["a", 1]', id="untyped list"),
    ],
)
def test_foreign_results_become_chat_tool_content(result: Any, content: Any) -> None:
    tool = Message(role="tool", contents=[FunctionResultContent(call_id="c1", result=result)])
    assert to_openai_chat([tool]) == [{"role": "tool", "tool_call_id": "c1", "content": content}]


def test_a_string_chat_message_edited_to_hold_media_is_written_as_parts() -> None:
    [message] = from_openai_chat([{"role": "user", "content": "hi"}])
    image = DataContent(data="iVBO", media_type="image/png")
    [written] = to_openai_chat([message.model_copy(update={"contents": [image]})])
    assert written == {
        "role": "user",
        "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}}],
    }


def test_foreign_media_become_responses_input_image_and_file_parts() -> None:
    message = Message(role="user", contents=[TextContent(text="look"), *MEDIA])
    [written] = to_openai_responses([message])
    assert written == {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "look"},
            {"type": "input_image", "detail": "auto", "image_url": "data:image/png;base64,iVBO"},
            {"type": "input_file", "file_data": "data:audio/mp3;base64,UklG"},
            {"type": "input_file", "file_data": "data:application/octet-stream;base64,UklG"},
            {"type": "input_file", "file_data": "data:application/pdf;base64,JVBE"},
            {"type": "input_image", "detail": "auto", "image_url": "https://x.test/pic.png"},
        ],
    }


def test_a_foreign_assistant_message_is_one_string_item_a_text_without_its_media() -> None:
    message = Message(
        role="assistant",
        contents=[
            TextContent(text="a"),
            UriContent(uri="https://x.test/d.pdf", media_type="application/pdf"),
            TextContent(text="b"),
        ],
    )
    assert to_openai_responses([message]) == [
        {"type": "message", "role": "assistant", "content": "a"},
        {"type": "message", "role": "assistant", "content": "b"},
    ]


def test_a_responses_text_part_without_text_is_kept_verbatim() -> None:
    item = {"role": "user", "content": [{"type": "input_text", "value": "x"}]}
    [message] = from_openai_responses([item])
    [content] = message.contents
    assert isinstance(content, OtherContent)
    assert (content.kind, content.payload) == ("input_text", {"value": "x"})
    assert to_openai_responses([message]) == [item]


def test_foreign_other_content_is_left_out_and_the_calls_keep_their_place() -> None:
    hosted = OtherContent(kind="computer_call", payload={"call_id": "cc_1", "action": {}})
    inline = OtherContent(kind="refusal", payload={"refusal": "no"})
    call = FunctionCallContent(call_id="c1", name="f", arguments="{}")
    message = Message(
        role="assistant",
        contents=[TextContent(text="a"), hosted, call, inline, TextContent(text="b")],
    )
    assert to_openai_responses([message]) == [
        {"type": "message", "role": "assistant", "content": "a"},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "message", "role": "assistant", "content": "b"},
    ]
    assert to_openai_responses([message.model_copy(update={"contents": [hosted]})]) == []


@pytest.mark.parametrize(
    ("result", "output"),
    [
        pytest.param(
            [{"type": "input_text", "text": "ok"}],
            [{"type": "input_text", "text": "ok"}],
            id="parts",
        ),
        pytest.param({"temp": 21}, '{"temp": 21}', id="object"),
        pytest.param(None, "", id="none"),
    ],
)
def test_foreign_results_become_function_call_outputs(result: Any, output: Any) -> None:
    tool = Message(role="tool", contents=[FunctionResultContent(call_id="c1", result=result)])
    assert to_openai_responses([tool]) == [
        {"type": "function_call_output", "call_id": "c1", "output": output}
    ]


def test_a_native_message_item_edited_to_hold_reasoning_writes_it_as_its_own_part() -> None:
    [message] = from_openai_responses(
        [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}]
    )
    edited = message.model_copy(
        update={"contents": [*message.contents, ReasoningContent(text="why")]}
    )
    [written] = to_openai_responses([edited])
    assert written["content"] == [
        {"type": "input_text", "text": "hi"},
        {"type": "reasoning", "text": "why", "payload": None},
    ]


def test_a_native_call_item_whose_contents_were_removed_writes_nothing() -> None:
    item = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}", "id": "fc_1"}
    [message] = from_openai_responses([item])
    assert isinstance(message.contents[0], FunctionCallContent)
    assert to_openai_responses([message.model_copy(update={"contents": []})]) == []
