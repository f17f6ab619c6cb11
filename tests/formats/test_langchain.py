"""LangChain messages: round trips of the dict form and of real objects, mapping, errors."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store.formats import (
    ORIGINAL_ID_KEY,
    FormatError,
    from_agent_framework,
    from_langchain,
    from_openai_chat,
    to_langchain,
    to_openai_chat,
)
from store.formats.langchain import LANGCHAIN_EXTRA_KEY, LANGCHAIN_TYPE_KEY
from strategies.messages import (
    MESSAGES_ADAPTER,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    OtherContent,
    TextContent,
)

lc = pytest.importorskip("langchain_core.messages", reason="the langchain extra is not installed")

COMMON: dict[str, Any] = {"additional_kwargs": {}, "response_metadata": {}, "name": None}


def _dict(kind: str, **data: Any) -> dict[str, Any]:
    fields = {**COMMON, "id": None, **data, "type": kind}
    if kind in ("ai", "AIMessageChunk"):
        fields = {"tool_calls": [], "invalid_tool_calls": [], "usage_metadata": None, **fields}
    return {"type": kind, "data": fields}


CALL = {"name": "weather", "args": {"city": "Oslo"}, "id": "call_1", "type": "tool_call"}

VARIANTS: dict[str, dict[str, Any]] = {
    "system": _dict("system", content="be brief"),
    "human": _dict("human", content="hi", id="h-1"),
    "human blocks": _dict(
        "human",
        content=[{"type": "text", "text": "a"}, "b", {"type": "image", "url": "https://x/a.png"}],
    ),
    "human named": _dict("human", content="hi", name="ann"),
    "ai text": _dict("ai", content="hello", response_metadata={"model_name": "m"}),
    "ai calls": _dict("ai", content="", tool_calls=[CALL, {**CALL, "id": "call_2"}]),
    "ai call without id": _dict("ai", content="", tool_calls=[{**CALL, "id": None}]),
    "ai invalid calls": _dict(
        "ai",
        content="",
        invalid_tool_calls=[{"name": "f", "args": "{", "id": "x", "error": "bad", "type": "x"}],
    ),
    "ai usage": _dict(
        "ai",
        content="ok",
        usage_metadata={"input_tokens": 1, "output_tokens": 2, "total_tokens": 3},
    ),
    "tool": _dict("tool", content="sunny", tool_call_id="call_1", artifact=None, status="success"),
    "tool error": _dict(
        "tool", content="boom", tool_call_id="call_1", artifact=None, status="error"
    ),
    "tool blocks": _dict(
        "tool",
        content=[{"type": "text", "text": "sunny"}],
        tool_call_id="call_1",
        artifact={"raw": [1, 2]},
        status="success",
    ),
    "chat user": _dict("chat", content="x", role="user"),
    "function": _dict("function", content="42", name="f"),
    "ai chunk": _dict("AIMessageChunk", content="x", tool_call_chunks=[], chunk_position=None),
    "empty id": _dict("human", content="hi", id=""),
    "no id key": {"type": "human", "data": {"content": "hi", "type": "human"}},
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_round_trip_each_variant(name: str) -> None:
    original = VARIANTS[name]
    messages = from_langchain([original])
    assert to_langchain(messages) == [original]
    stored = MESSAGES_ADAPTER.validate_json(MESSAGES_ADAPTER.dump_json(messages))
    assert to_langchain(stored) == [original]


def _real_messages() -> list[Any]:
    return [
        lc.SystemMessage("be brief"),
        lc.HumanMessage("weather in Oslo?", id="h-1"),
        lc.AIMessage("", tool_calls=[{"name": "weather", "args": {"city": "Oslo"}, "id": "c1"}]),
        lc.ToolMessage("sunny", tool_call_id="c1"),
        lc.ToolMessage("failed", tool_call_id="c2", status="error"),
        lc.AIMessage("It is sunny.", id="a-1"),
        lc.ChatMessage(role="user", content="thanks"),
        lc.FunctionMessage(name="f", content="1"),
    ]


def test_real_objects_read_and_come_back() -> None:
    objects = _real_messages()
    messages = from_langchain(objects)
    assert [m.role for m in messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "user",
        "tool",
    ]
    assert messages[1].message_id == "h-1" and messages[5].message_id == "a-1"
    (call,) = messages[2].contents
    assert isinstance(call, FunctionCallContent)
    assert (call.call_id, call.name, call.arguments) == ("c1", "weather", {"city": "Oslo"})
    assert messages[3].contents == [FunctionResultContent(call_id="c1", result="sunny")]
    assert messages[4].contents == [
        FunctionResultContent(call_id="c2", result="failed", is_error=True)
    ]
    assert messages[6].metadata[LANGCHAIN_TYPE_KEY] == "chat"
    written = to_langchain(messages)
    assert written == [lc.message_to_dict(m) for m in objects]
    assert lc.messages_from_dict(written) == objects


def test_message_fields() -> None:
    (named,) = from_langchain([VARIANTS["human named"]])
    assert named.author_name == "ann"
    (blocks,) = from_langchain([VARIANTS["human blocks"]])
    first, second, image = blocks.contents
    assert (first.text, second.text) == ("a", "b")  # type: ignore[union-attr]
    assert isinstance(image, OtherContent) and image.kind == "image"
    (usage,) = from_langchain([VARIANTS["ai usage"]])
    assert usage.metadata[LANGCHAIN_EXTRA_KEY]["usage_metadata"]["total_tokens"] == 3  # type: ignore[index,call-overload]
    (no_id,) = from_langchain([VARIANTS["ai call without id"]])
    (kept,) = no_id.contents
    assert isinstance(kept, OtherContent) and kept.pairing == "none"
    (function,) = from_langchain([VARIANTS["function"]])
    assert (function.role, function.author_name, function.text) == ("tool", "f", "42")


def test_ids() -> None:
    with_id, without, empty = from_langchain(
        [VARIANTS["human"], VARIANTS["system"], VARIANTS["empty id"]]
    )
    assert with_id.message_id == "h-1" and ORIGINAL_ID_KEY not in with_id.metadata
    assert without.metadata[ORIGINAL_ID_KEY] is None and without.message_id
    assert empty.metadata[ORIGINAL_ID_KEY] == ""


def test_custom_roles_are_refused_unless_allowed() -> None:
    item = _dict("chat", content="once", role="narrator")
    with pytest.raises(FormatError, match=r"item 1: .*'narrator'") as caught:
        from_langchain([VARIANTS["system"], item])
    assert caught.value.index == 1
    (kept,) = from_langchain([item], allow_custom_roles=True)
    assert kept.role == "narrator"
    assert to_langchain([kept]) == [item]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("hi", "expected a LangChain message"),
        ({"type": "human"}, "message_to_dict"),
        ({"type": "robot", "data": {"content": "x"}}, "unknown LangChain message type"),
        ({"type": "chat", "data": {"content": "x"}}, "needs a string role"),
        ({"type": "human", "data": {"content": 5}}, "content must be a string"),
        ({"type": "human", "data": {"content": [5]}}, r"content\[0\] is not a string"),
        ({"type": "human", "data": {"content": [{"text": "x"}]}}, "no block type"),
        ({"type": "tool", "data": {"content": "x"}}, "needs a string tool_call_id"),
    ],
)
def test_bad_input_names_the_item(bad: Any, message: str) -> None:
    with pytest.raises(FormatError, match=message) as caught:
        from_langchain([VARIANTS["system"], bad])
    assert caught.value.index == 1


def test_messages_from_elsewhere_get_langchain_shapes() -> None:
    af_messages = from_agent_framework(
        [
            {
                "role": "assistant",
                "contents": [
                    {"type": "text", "text": "looking"},
                    {"type": "function_call", "call_id": "a", "name": "f", "arguments": '{"x": 1}'},
                    {"type": "function_call", "call_id": "b", "name": "g"},
                ],
            },
            {
                "role": "tool",
                "contents": [
                    {"type": "function_result", "call_id": "a", "result": "ra"},
                    {"type": "function_result", "call_id": "b", "result": {"v": 2}},
                ],
            },
        ]
    )
    written = to_langchain(af_messages)
    objects = lc.messages_from_dict(written)
    assert [type(o).__name__ for o in objects] == ["AIMessage", "ToolMessage", "ToolMessage"]
    assert objects[0].content == "looking"
    assert objects[0].tool_calls == [
        {"name": "f", "args": {"x": 1}, "id": "a", "type": "tool_call"},
        {"name": "g", "args": {}, "id": "b", "type": "tool_call"},
    ]
    assert (objects[1].tool_call_id, objects[1].content) == ("a", "ra")
    assert (objects[2].tool_call_id, objects[2].content) == ("b", json.dumps({"v": 2}))
    plain = Message.text_message("user", "hi")
    (human,) = lc.messages_from_dict(to_langchain([plain], with_ids=True))
    assert (human.type, human.content, human.id) == ("human", "hi", plain.message_id)


def test_chat_export_keeps_calls_with_their_results() -> None:
    chat = to_openai_chat(from_langchain(_real_messages()[:4]))
    assert [m["role"] for m in chat] == ["system", "user", "assistant", "tool"]
    assert chat[2]["tool_calls"][0]["id"] == chat[3]["tool_call_id"] == "c1"
    back = from_langchain(to_langchain(from_openai_chat(chat)))
    assert [m.role for m in back] == ["system", "user", "assistant", "tool"]
    assert back[3].contents == [FunctionResultContent(call_id="c1", result="sunny")]
    assert isinstance(back[1].contents[0], TextContent)


# -- generated conversations ----------------------------------------------------------

_ids = st.text(min_size=1, max_size=6)
_text = st.text(max_size=10)
_block = (
    _text
    | st.builds(lambda t: {"type": "text", "text": t}, _text)
    | st.builds(lambda k: {"type": k, "url": "u"}, st.sampled_from(["image", "file", "x"]))
)
_content = _text | st.lists(_block, max_size=3)
_call = st.builds(
    lambda i, n, a: {"name": n, "args": a, "id": i, "type": "tool_call"},
    _ids | st.none(),
    _ids,
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@st.composite
def _message(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["system", "human", "ai", "tool", "chat", "function"]))
    if kind == "tool":
        status = draw(st.sampled_from(["success", "error"]))
        return lc.ToolMessage(draw(_content), tool_call_id=draw(_ids), status=status)
    if kind == "ai":
        calls = draw(st.lists(_call.filter(lambda c: c["id"] is not None), max_size=2))
        return lc.AIMessage(draw(_content), tool_calls=calls, id=draw(_ids | st.none()))
    if kind == "chat":
        return lc.ChatMessage(role=draw(st.sampled_from(["user", "assistant"])), content="x")
    if kind == "function":
        return lc.FunctionMessage(name=draw(_ids), content=draw(_text))
    cls = lc.SystemMessage if kind == "system" else lc.HumanMessage
    return cls(draw(_content), id=draw(_ids | st.none()), name=draw(_ids | st.none()))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_message(), max_size=6))
def test_generated_objects_round_trip(objects: list[Any]) -> None:
    messages = from_langchain(objects)
    stored = MESSAGES_ADAPTER.validate_json(MESSAGES_ADAPTER.dump_json(messages))
    written = to_langchain(stored)
    assert written == [lc.message_to_dict(m) for m in objects]
    assert lc.messages_from_dict(written) == objects
