"""OpenAI Chat Completions format: round trips, mapping, ids, errors, generated conversations."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store.formats import (
    OPENAI_CONTENT_FORM_KEY,
    OPENAI_EXTRA_KEY,
    ORIGINAL_ID_KEY,
    FormatError,
    from_agent_framework,
    from_openai_chat,
    to_openai_chat,
)
from strategies.messages import (
    MESSAGES_ADAPTER,
    DataContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    OtherContent,
    TextContent,
    UriContent,
)

CALL = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}

VARIANTS: dict[str, dict[str, Any]] = {
    "system string": {"role": "system", "content": "be brief"},
    "developer parts": {"role": "developer", "content": [{"type": "text", "text": "rules"}]},
    "user one text part": {"role": "user", "content": [{"type": "text", "text": "hi"}]},
    "user string": {"role": "user", "content": "hi"},
    "user empty string": {"role": "user", "content": ""},
    "user null content": {"role": "user", "content": None},
    "user missing content": {"role": "user"},
    "user empty parts": {"role": "user", "content": []},
    "user name": {"role": "user", "content": "hi", "name": "ann"},
    "image url": {
        "role": "user",
        "content": [
            {"type": "image_url", "image_url": {"url": "https://x.test/a.png", "detail": "low"}}
        ],
    },
    "image data url": {
        "role": "user",
        "content": [{"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/AA=="}}],
    },
    "input audio": {
        "role": "user",
        "content": [{"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}],
    },
    "file data": {
        "role": "user",
        "content": [
            {
                "type": "file",
                "file": {"file_data": "data:application/pdf;base64,JVBERi0=", "filename": "a.pdf"},
            }
        ],
    },
    "file id": {"role": "user", "content": [{"type": "file", "file": {"file_id": "file-1"}}]},
    "file raw base64": {
        "role": "user",
        "content": [{"type": "file", "file": {"file_data": "JVBERi0=", "filename": "a.pdf"}}],
    },
    "odd image": {"role": "user", "content": [{"type": "image_url", "image_url": "https://x"}]},
    "unknown part": {"role": "user", "content": [{"type": "input_video", "video": {"id": 1}}]},
    "refusal part": {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]},
    "refusal field": {"role": "assistant", "content": None, "refusal": "I can't"},
    "audio field": {"role": "assistant", "content": None, "audio": {"id": "audio_1"}},
    "tool calls null content": {"role": "assistant", "content": None, "tool_calls": [CALL]},
    "tool calls no content": {"role": "assistant", "tool_calls": [CALL]},
    "tool calls with text": {
        "role": "assistant",
        "content": "let me look",
        "tool_calls": [CALL, {**CALL, "id": "call_2", "function": {"name": "g", "arguments": ""}}],
    },
    "tool call extras": {
        "role": "assistant",
        "content": None,
        "tool_calls": [{**CALL, "index": 0, "function": {**CALL["function"], "strict": True}}],
    },
    "custom tool call": {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_3", "type": "custom", "custom": {"name": "grep", "input": "x"}}
        ],
    },
    "empty tool calls": {"role": "assistant", "content": "x", "tool_calls": []},
    "null tool calls": {
        "role": "assistant",
        "content": "x",
        "tool_calls": None,
        "function_call": None,
        "refusal": None,
        "audio": None,
    },
    "legacy function call": {
        "role": "assistant",
        "content": None,
        "function_call": {"name": "f", "arguments": "{}"},
    },
    "legacy function result": {"role": "function", "name": "f", "content": "42"},
    "tool string": {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    "tool parts": {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": [{"type": "text", "text": "sunny"}],
    },
    "tool null": {"role": "tool", "tool_call_id": "call_1", "content": None},
    "tool missing content": {"role": "tool", "tool_call_id": "call_1"},
    "tool without call id": {"role": "tool", "content": "orphan"},
    "id": {"role": "user", "content": "hi", "id": "m-1"},
    "empty id": {"role": "user", "content": "hi", "id": ""},
    "null id": {"role": "user", "content": "hi", "id": None},
    "numeric id": {"role": "user", "content": "hi", "id": 7},
    "null name": {"role": "user", "content": "hi", "name": None},
    "unknown keys": {
        "role": "assistant",
        "content": "x",
        "annotations": [],
        "reasoning_content": "r",
    },
    "text part extras": {
        "role": "user",
        "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}],
    },
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_round_trip_each_variant(name: str) -> None:
    original = VARIANTS[name]
    messages = from_openai_chat([original])
    assert to_openai_chat(messages) == [original]
    stored = MESSAGES_ADAPTER.validate_json(MESSAGES_ADAPTER.dump_json(messages))
    assert to_openai_chat(stored) == [original]


def _contents(name: str) -> list[Any]:
    return from_openai_chat([VARIANTS[name]])[0].contents


def test_content_shapes_are_told_apart() -> None:
    forms = {
        name: from_openai_chat([VARIANTS[name]])[0].metadata[OPENAI_CONTENT_FORM_KEY]
        for name in (
            "user string",
            "user one text part",
            "user null content",
            "user missing content",
        )
    }
    assert forms == {
        "user string": "string",
        "user one text part": "parts",
        "user null content": "null",
        "user missing content": "missing",
    }
    assert _contents("user string") == _contents("user one text part") == [TextContent(text="hi")]
    assert _contents("user empty string") == [TextContent(text="")]
    assert _contents("user null content") == _contents("user missing content") == []


def test_tool_calls_and_results_map_to_function_contents() -> None:
    text, first, second = _contents("tool calls with text")
    assert text == TextContent(text="let me look")
    assert isinstance(first, FunctionCallContent) and isinstance(second, FunctionCallContent)
    assert (first.call_id, first.name, first.arguments) == ("call_1", "f", '{"a": 1}')
    assert (second.call_id, second.name, second.arguments) == ("call_2", "g", "")
    (custom,) = _contents("custom tool call")
    assert isinstance(custom, OtherContent)
    assert (custom.pairing, custom.call_id) == ("call", "call_3")
    (result,) = _contents("tool string")
    assert result == FunctionResultContent(call_id="call_1", result="sunny")
    (parts_result,) = _contents("tool parts")
    assert isinstance(parts_result, FunctionResultContent)
    assert parts_result.result == VARIANTS["tool parts"]["content"]
    assert _contents("tool without call id") == [TextContent(text="orphan")]


def test_media_parts_map_to_data_and_uri() -> None:
    (uri,) = _contents("image url")
    assert isinstance(uri, UriContent) and uri.uri == "https://x.test/a.png"
    (image,) = _contents("image data url")
    assert isinstance(image, DataContent)
    assert (image.media_type, image.data) == ("image/jpeg", "/9j/AA==")
    (audio,) = _contents("input audio")
    assert isinstance(audio, DataContent) and audio.media_type == "audio/wav"
    (pdf,) = _contents("file data")
    assert isinstance(pdf, DataContent) and pdf.media_type == "application/pdf"
    for name in ("file id", "file raw base64", "odd image", "unknown part", "refusal part"):
        (other,) = _contents(name)
        assert isinstance(other, OtherContent)
        assert other.kind == VARIANTS[name]["content"][0]["type"]


def test_message_fields() -> None:
    (named,) = from_openai_chat([VARIANTS["user name"]])
    assert named.author_name == "ann"
    (developer,) = from_openai_chat([VARIANTS["developer parts"]])
    assert developer.role == "system"
    (legacy,) = from_openai_chat([VARIANTS["legacy function result"]])
    assert legacy.role == "tool" and legacy.author_name == "f"
    (refusal,) = from_openai_chat([VARIANTS["refusal field"]])
    assert refusal.metadata[OPENAI_EXTRA_KEY] == {"refusal": "I can't"}


def test_ids() -> None:
    with_id, without, empty = from_openai_chat(
        [VARIANTS["id"], VARIANTS["user string"], VARIANTS["empty id"]]
    )
    assert with_id.message_id == "m-1" and ORIGINAL_ID_KEY not in with_id.metadata
    assert without.metadata[ORIGINAL_ID_KEY] is None and without.message_id
    assert empty.metadata[ORIGINAL_ID_KEY] == "" and empty.message_id
    assert "id" not in to_openai_chat([without])[0]


def test_custom_roles() -> None:
    item = {"role": "narrator", "content": "once"}
    with pytest.raises(FormatError, match=r"item 1: .*'narrator'") as caught:
        from_openai_chat([VARIANTS["user string"], item])
    assert caught.value.index == 1
    (kept,) = from_openai_chat([item], allow_custom_roles=True)
    assert kept.role == "narrator"
    assert to_openai_chat([kept]) == [item]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (["user", "hi"], "expected a message object"),
        ({"content": "hi"}, "role must be a string"),
        ({"role": "user", "content": 5}, "content must be a string"),
        ({"role": "user", "content": ["hi"]}, r"content\[0\] is not an object"),
        ({"role": "user", "content": [{"text": "hi"}]}, r"content\[0\] has no part type"),
        ({"role": "assistant", "tool_calls": {"id": "x"}}, "tool_calls must be a list"),
        ({"role": "assistant", "tool_calls": ["x"]}, r"tool_calls\[0\] is not an object"),
        ({"role": "user", "content": "hi", "x": {1, 2}}, "metadata"),
    ],
)
def test_bad_input_names_the_item(bad: Any, message: str) -> None:
    with pytest.raises(FormatError, match=message) as caught:
        from_openai_chat([VARIANTS["user string"], bad])
    assert caught.value.index == 1


def test_messages_from_elsewhere_get_chat_shapes() -> None:
    af_messages = from_agent_framework(
        [
            {
                "role": "assistant",
                "contents": [
                    {"type": "text_reasoning", "text": "hmm"},
                    {"type": "function_call", "call_id": "a", "name": "f", "arguments": {"x": 1}},
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
    assistant, result_a, result_b = to_openai_chat(af_messages)
    assert assistant["role"] == "assistant"
    assert assistant["content"] is None  # Chat Completions has no place for the reasoning
    assert [c["function"]["arguments"] for c in assistant["tool_calls"]] == ['{"x": 1}', "{}"]
    assert result_a == {"role": "tool", "tool_call_id": "a", "content": "ra"}
    assert result_b == {"role": "tool", "tool_call_id": "b", "content": json.dumps({"v": 2})}
    plain = Message.text_message("user", "hi")
    assert to_openai_chat([plain]) == [{"role": "user", "content": "hi"}]
    assert to_openai_chat([plain], with_ids=True) == [
        {"role": "user", "content": "hi", "id": plain.message_id}
    ]


# -- generated conversations ----------------------------------------------------------

_json_leaf = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.text(max_size=8)
    | st.floats(allow_nan=False, allow_infinity=False)
)
_json = st.recursive(
    _json_leaf,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
_ids = st.text(min_size=1, max_size=6)
_extras = st.dictionaries(st.sampled_from(["x_meta", "annotations", "cache"]), _json, max_size=2)

_text_part = st.builds(lambda t, e: {**e, "type": "text", "text": t}, st.text(max_size=10), _extras)
_image_part = st.builds(
    lambda url, detail: {"type": "image_url", "image_url": {"url": url, **detail}},
    st.sampled_from(["https://x.test/a.png", "data:image/png;base64,iVBO", "data:;base64,", "x"]),
    st.fixed_dictionaries({}, optional={"detail": st.sampled_from(["low", "high", "auto"])}),
)
_audio_part = st.builds(
    lambda data, fmt: {"type": "input_audio", "input_audio": {"data": data, **fmt}},
    st.text(max_size=6),
    st.fixed_dictionaries({}, optional={"format": st.sampled_from(["wav", "mp3"])}),
)
_file_part = st.builds(
    lambda f: {"type": "file", "file": f},
    st.fixed_dictionaries(
        {},
        optional={
            "file_data": st.sampled_from(["data:application/pdf;base64,JVBE", "JVBE"]),
            "file_id": _ids,
            "filename": st.text(max_size=5),
        },
    ),
)
_odd_part = st.builds(lambda t, e: {**e, "type": t}, st.sampled_from(["refusal", "weird"]), _extras)
_parts = st.lists(_text_part | _image_part | _audio_part | _file_part | _odd_part, max_size=3)
_content = st.none() | st.text(max_size=10) | _parts
_tool_call = st.builds(
    lambda i, n, a, e: {"id": i, "type": "function", "function": {"name": n, **a}, **e},
    _ids,
    st.text(min_size=1, max_size=5),
    st.fixed_dictionaries({}, optional={"arguments": st.text(max_size=8)}),
    st.dictionaries(st.just("index"), st.integers(0, 3), max_size=1),
) | st.builds(lambda i: {"id": i, "type": "custom", "custom": {"name": "c", "input": "x"}}, _ids)


@st.composite
def _message(draw: st.DrawFn) -> dict[str, Any]:
    role = draw(st.sampled_from(["system", "developer", "user", "assistant", "tool", "function"]))
    message: dict[str, Any] = {"role": role}
    if draw(st.booleans()):
        message["content"] = draw(_content)
    if role == "assistant" and draw(st.booleans()):
        message["tool_calls"] = draw(st.lists(_tool_call, max_size=3) | st.none())
    if role == "tool" and draw(st.booleans()):
        message["tool_call_id"] = draw(_ids | st.none())
    optional = st.fixed_dictionaries(
        {},
        optional={
            "name": st.text(max_size=4) | st.none(),
            "id": _ids | st.none() | st.just(""),
            "refusal": st.text(max_size=4) | st.none(),
            "audio": st.none() | st.fixed_dictionaries({"id": _ids}),
            "function_call": st.none() | st.fixed_dictionaries({"name": _ids, "arguments": _ids}),
            "unknown_key": _json,
        },
    )
    message.update(draw(optional))
    return message


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_message(), max_size=8))
def test_generated_conversations_round_trip(conversation: list[dict[str, Any]]) -> None:
    messages = from_openai_chat(conversation)
    assert to_openai_chat(messages) == conversation
    stored = MESSAGES_ADAPTER.validate_json(MESSAGES_ADAPTER.dump_json(messages))
    assert to_openai_chat(stored) == conversation
    ids = [m.message_id for m in messages]
    assert all(ids)
    for item, message in zip(conversation, messages, strict=True):
        if isinstance(item.get("id"), str) and item["id"]:
            assert message.message_id == item["id"]
