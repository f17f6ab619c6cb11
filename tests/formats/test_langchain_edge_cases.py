"""LangChain edge cases: odd objects and calls, missing content, foreign content shapes."""

from __future__ import annotations

from typing import Any

import pytest

from store.formats import FormatError, from_langchain, to_langchain
from strategies.messages import (
    DataContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    OtherContent,
    ReasoningContent,
    TextContent,
    UriContent,
)

COMMON: dict[str, Any] = {"additional_kwargs": {}, "response_metadata": {}, "name": None}


def _dict(kind: str, **data: Any) -> dict[str, Any]:
    return {"type": kind, "data": {**COMMON, "id": None, **data, "type": kind}}


class _OddDump:
    """An object shaped like a LangChain message whose dump is not a mapping."""

    type = "human"

    def model_dump(self) -> list[str]:
        return ["not", "a", "dict"]


def test_an_object_whose_dump_is_not_a_dict_is_rejected() -> None:
    with pytest.raises(FormatError, match=r"^item 0: expected a LangChain message, got _OddDump$"):
        from_langchain([_OddDump()])


def test_a_tool_call_that_is_not_an_object_is_rejected_with_its_position() -> None:
    item = _dict("ai", content="", tool_calls=[{"id": "c1", "name": "f", "args": {}}, "oops"])
    with pytest.raises(FormatError, match=r"^item 0: tool_calls\[1\] is not an object$"):
        from_langchain([item])


def test_a_message_without_content_reads_to_no_contents_and_writes_none_back() -> None:
    item = {"type": "human", "data": {"id": "m1", "type": "human"}}
    [message] = from_langchain([item])
    assert message.contents == []
    assert to_langchain([message]) == [item]


def test_a_tool_message_without_content_or_status_round_trips() -> None:
    item = {"type": "tool", "data": {"tool_call_id": "c1", "id": "m1", "type": "tool"}}
    [message] = from_langchain([item])
    [result] = message.contents
    assert isinstance(result, FunctionResultContent)
    assert (result.call_id, result.result, result.is_error) == ("c1", None, False)
    # no status was given: it is written from is_error, the content stays absent
    assert to_langchain([message]) == [
        {
            "type": "tool",
            "data": {"tool_call_id": "c1", "status": "success", "id": "m1", "type": "tool"},
        }
    ]


def test_an_unknown_tool_status_is_kept_in_the_extra_keys() -> None:
    item = _dict("tool", content="ok", tool_call_id="c1", status="pending", id="m1")
    [message] = from_langchain([item])
    [result] = message.contents
    assert isinstance(result, FunctionResultContent)
    assert result.is_error is False
    assert message.metadata["langchain_extra"]["status"] == "pending"


def _foreign_body(*contents: Any) -> Any:
    [written] = to_langchain([Message(role="user", contents=list(contents))])
    return written["data"]["content"]


def test_foreign_content_without_a_langchain_block_gets_one_of_its_own_type() -> None:
    body = _foreign_body(
        TextContent(text="look"),
        ReasoningContent(text="because"),
        ReasoningContent(payload={"data": "opaque"}),
        DataContent(data="iVBO", media_type="image/png"),
        DataContent(data="JVBE", media_type="application/pdf"),
        DataContent(data="AAAA"),
        UriContent(uri="https://x.test/v.mp4", media_type="video/mp4"),
        UriContent(uri="https://x.test/a.txt", media_type="text/plain"),
        UriContent(uri="https://x.test/pic"),
        OtherContent(kind="citation", payload={"cited": "doc"}),
    )
    assert body == [
        {"type": "text", "text": "look"},
        {"type": "reasoning", "reasoning": "because"},
        {"type": "reasoning", "reasoning": ""},
        {"type": "image", "base64": "iVBO", "mime_type": "image/png"},
        {"type": "file", "base64": "JVBE", "mime_type": "application/pdf"},
        {"type": "file", "base64": "AAAA", "mime_type": None},
        {"type": "video", "url": "https://x.test/v.mp4"},
        {"type": "file", "url": "https://x.test/a.txt"},
        {"type": "image", "url": "https://x.test/pic"},
        {"type": "citation", "cited": "doc"},
    ]


def test_a_foreign_message_without_contents_has_an_empty_string_body() -> None:
    assert _foreign_body() == ""


def test_a_result_inside_a_native_non_tool_message_is_written_as_its_own_block() -> None:
    [message] = from_langchain([_dict("human", content=[{"type": "text", "text": "hi"}])])
    result = FunctionResultContent(call_id="c1", result="ok")
    edited = message.model_copy(update={"contents": [*message.contents, result]})
    [written] = to_langchain([edited])
    assert written["data"]["content"] == [
        {"type": "text", "text": "hi"},
        {"type": "function_result", "call_id": "c1", "result": "ok", "is_error": False},
    ]


@pytest.mark.parametrize(
    ("value", "content"),
    [
        pytest.param([{"type": "text", "text": "ok"}], [{"type": "text", "text": "ok"}], id="list"),
        pytest.param({"temp": 21}, '{"temp": 21}', id="object"),
        pytest.param(None, "", id="none"),
    ],
)
def test_foreign_result_values_become_langchain_tool_content(value: Any, content: Any) -> None:
    tool = Message(role="tool", contents=[FunctionResultContent(call_id="c1", result=value)])
    [written] = to_langchain([tool])
    assert written["type"] == "tool"
    assert written["data"]["content"] == content


def test_a_foreign_custom_role_is_written_as_a_chat_message_with_its_role() -> None:
    [message] = from_langchain(
        [_dict("chat", role="critic", content="too long")], allow_custom_roles=True
    )
    foreign = Message.model_validate(
        {"role": message.role, "contents": message.contents},
        context={"allow_custom_roles": True},
    )
    [written] = to_langchain([foreign])
    assert written["type"] == "chat"
    assert written["data"]["role"] == "critic"
    assert written["data"]["content"] == "too long"


def test_a_foreign_call_without_arguments_has_empty_args() -> None:
    call = FunctionCallContent(call_id="c1", name="now", arguments=None)
    [written] = to_langchain([Message(role="assistant", contents=[call])])
    assert written["data"]["tool_calls"] == [
        {"name": "now", "args": {}, "id": "c1", "type": "tool_call"}
    ]
