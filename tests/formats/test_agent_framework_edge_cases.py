"""Agent Framework edge cases: declined contents kept verbatim, odd annotations, foreign shapes."""

from __future__ import annotations

from typing import Any

import pytest

from store.formats import af_annotations, from_agent_framework, to_agent_framework
from strategies.messages import (
    FunctionResultContent,
    Message,
    OtherContent,
    ReasoningContent,
    TextContent,
)


def _af(*contents: dict[str, Any], **properties: Any) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "contents": list(contents),
        "additional_properties": properties,
    }


@pytest.mark.parametrize(
    "content",
    [
        pytest.param({"type": "function_result", "result": "ok"}, id="result without call_id"),
        pytest.param({"type": "uri", "media_type": "image/png"}, id="uri without uri"),
    ],
)
def test_a_content_its_reader_declines_is_kept_as_other_content(content: dict[str, Any]) -> None:
    original = _af(content)
    [message] = from_agent_framework([original])
    [kept] = message.contents
    assert isinstance(kept, OtherContent)
    assert kept.kind == content["type"]
    assert to_agent_framework([message]) == [original]


def test_boolean_index_and_token_count_read_as_absent() -> None:
    group = {
        "id": "g1",
        "kind": "user",
        "index": True,
        "token_count": False,
        "has_reasoning": False,
    }
    [message] = from_agent_framework([_af(_group=group)])
    annotations = af_annotations(message)
    assert annotations is not None
    assert (annotations.group_id, annotations.index, annotations.token_count) == ("g1", None, None)
    assert annotations.has_reasoning is False


def test_foreign_reasoning_without_text_writes_only_its_protected_data() -> None:
    message = Message(role="assistant", contents=[ReasoningContent(payload={"sig": "s"})])
    [written] = to_agent_framework([message])
    assert written["contents"] == [
        {"type": "text_reasoning", "protected_data": '{"sig": "s"}', "additional_properties": {}}
    ]


def test_foreign_result_without_value_has_no_result_key() -> None:
    tool = Message(role="tool", contents=[FunctionResultContent(call_id="c1", result=None)])
    [written] = to_agent_framework([tool])
    assert written["contents"] == [
        {"type": "function_result", "call_id": "c1", "additional_properties": {}}
    ]


def test_foreign_other_content_is_left_out() -> None:
    other = OtherContent(kind="citation", payload={"type": "ignored", "cited": "doc"})
    assert to_agent_framework([Message(role="assistant", contents=[other])]) == []
    with_text = Message(role="assistant", contents=[other, TextContent(text="a")])
    [written] = to_agent_framework([with_text])
    assert written["contents"] == [{"type": "text", "text": "a", "additional_properties": {}}]
