"""OpenAI Responses input items: round trips, mapping, pairing, ids, errors, foreign shapes."""

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
    from_openai_chat,
    from_openai_responses,
    to_openai_chat,
    to_openai_responses,
)
from store.formats.openai_responses import HOSTED_CALLS, HOSTED_RESULTS
from strategies.groups import annotate
from strategies.messages import (
    MESSAGES_ADAPTER,
    DataContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    OtherContent,
    ReasoningContent,
    TextContent,
    UriContent,
)

CALL = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_1",
    "name": "weather",
    "arguments": '{"city": "Oslo"}',
    "status": "completed",
}
OUTPUT = {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}

VARIANTS: dict[str, dict[str, Any]] = {
    "easy user string": {"role": "user", "content": "hi"},
    "typed user string": {"type": "message", "role": "user", "content": "hi"},
    "developer": {"role": "developer", "content": "rules"},
    "system parts": {"role": "system", "content": [{"type": "input_text", "text": "be brief"}]},
    "user parts": {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}],
    },
    "assistant output": {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "hello", "annotations": [], "logprobs": []}],
    },
    "assistant input_text": {"role": "assistant", "content": [{"type": "input_text", "text": "x"}]},
    "user output_text": {"role": "user", "content": [{"type": "output_text", "text": "x"}]},
    "refusal": {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]},
    "image url": {
        "role": "user",
        "content": [{"type": "input_image", "image_url": "https://x.test/a.png", "detail": "low"}],
    },
    "image data": {
        "role": "user",
        "content": [{"type": "input_image", "image_url": "data:image/png;base64,iVBO"}],
    },
    "image file id": {
        "role": "user",
        "content": [{"type": "input_image", "file_id": "file-1", "detail": "auto"}],
    },
    "file data": {
        "role": "user",
        "content": [
            {
                "type": "input_file",
                "file_data": "data:application/pdf;base64,JVBE",
                "filename": "a.pdf",
            }
        ],
    },
    "file url": {
        "role": "user",
        "content": [{"type": "input_file", "file_url": "https://x.test/a.pdf"}],
    },
    "file id": {"role": "user", "content": [{"type": "input_file", "file_id": "file-2"}]},
    "unknown part": {"role": "user", "content": [{"type": "input_video", "video": {"id": 1}}]},
    "empty parts": {"role": "user", "content": []},
    "missing content": {"role": "user"},
    "function call": CALL,
    "function call without id": {k: v for k, v in CALL.items() if k != "id"},
    "function call dict arguments": {**CALL, "arguments": {"city": "Oslo"}},
    "function output": OUTPUT,
    "function output parts": {
        **OUTPUT,
        "id": "fco_1",
        "output": [{"type": "input_text", "text": "sunny"}],
        "status": "completed",
    },
    "reasoning": {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "thinking"}],
        "encrypted_content": "gAAA",
    },
    "reasoning content": {
        "type": "reasoning",
        "id": "rs_2",
        "summary": [],
        "content": [{"type": "reasoning_text", "text": "step"}],
    },
    "computer call": {
        "type": "computer_call",
        "id": "cu_1",
        "call_id": "call_c",
        "action": {"type": "click", "x": 1, "y": 2, "button": "left"},
        "pending_safety_checks": [],
        "status": "completed",
    },
    "computer output": {
        "type": "computer_call_output",
        "call_id": "call_c",
        "output": {"type": "computer_screenshot", "image_url": "data:image/png;base64,AA"},
    },
    "custom tool call": {
        "type": "custom_tool_call",
        "call_id": "call_x",
        "name": "grep",
        "input": "needle",
    },
    "custom tool output": {"type": "custom_tool_call_output", "call_id": "call_x", "output": "l1"},
    "shell call": {
        "type": "shell_call",
        "call_id": "call_s",
        "action": {"commands": ["ls"]},
        "status": "completed",
    },
    "shell output": {
        "type": "shell_call_output",
        "call_id": "call_s",
        "output": [{"stdout": "a", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}],
    },
    "local shell call": {
        "type": "local_shell_call",
        "id": "lsh_1",
        "call_id": "call_l",
        "action": {"type": "exec", "command": ["ls"], "env": {}},
        "status": "completed",
    },
    "local shell output": {"type": "local_shell_call_output", "id": "call_l", "output": "a"},
    "apply patch call": {
        "type": "apply_patch_call",
        "call_id": "call_p",
        "operation": {"type": "update_file", "path": "a.py", "diff": "-x\n+y"},
        "status": "completed",
    },
    "apply patch output": {
        "type": "apply_patch_call_output",
        "call_id": "call_p",
        "status": "completed",
    },
    "mcp approval request": {
        "type": "mcp_approval_request",
        "id": "mcpr_1",
        "server_label": "s",
        "name": "t",
        "arguments": "{}",
    },
    "mcp approval response": {
        "type": "mcp_approval_response",
        "approval_request_id": "mcpr_1",
        "approve": True,
    },
    "web search": {
        "type": "web_search_call",
        "id": "ws_1",
        "status": "completed",
        "action": {"type": "search", "query": "q"},
    },
    "item reference": {"type": "item_reference", "id": "msg_0"},
    "unknown item": {"type": "future_item", "id": "fi_1", "blob": {"a": [1, None]}},
    "empty id": {"role": "user", "content": "hi", "id": ""},
    "null id": {"role": "user", "content": "hi", "id": None},
    "numeric id": {"role": "user", "content": "hi", "id": 7},
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_round_trip_each_variant(name: str) -> None:
    original = VARIANTS[name]
    messages = from_openai_responses([original])
    assert to_openai_responses(messages) == [original]
    stored = MESSAGES_ADAPTER.validate_json(MESSAGES_ADAPTER.dump_json(messages))
    assert to_openai_responses(stored) == [original]


def _only(name: str) -> Message:
    (message,) = from_openai_responses([VARIANTS[name]])
    return message


def test_messages_and_parts() -> None:
    assert _only("easy user string").contents == [TextContent(text="hi")]
    assert _only("typed user string").contents == [TextContent(text="hi")]
    assert _only("user parts").contents == [TextContent(text="a"), TextContent(text="b")]
    developer = _only("developer")
    assert developer.role == "system" and developer.text == "rules"
    assistant = _only("assistant output")
    assert assistant.message_id == "msg_1" and assistant.text == "hello"
    assert _only("user output_text").text == "x"
    (uri,) = _only("image url").contents
    assert isinstance(uri, UriContent) and uri.uri == "https://x.test/a.png"
    (image,) = _only("image data").contents
    assert isinstance(image, DataContent) and image.media_type == "image/png"
    (pdf,) = _only("file data").contents
    assert isinstance(pdf, DataContent) and pdf.media_type == "application/pdf"
    (link,) = _only("file url").contents
    assert isinstance(link, UriContent)
    for name in ("refusal", "image file id", "file id", "unknown part"):
        (other,) = _only(name).contents
        assert isinstance(other, OtherContent)
        assert other.kind == VARIANTS[name]["content"][0]["type"]


def test_calls_outputs_and_reasoning() -> None:
    call = _only("function call")
    assert (call.role, call.message_id) == ("assistant", "fc_1")
    (content,) = call.contents
    assert isinstance(content, FunctionCallContent)
    assert (content.call_id, content.name, content.arguments) == (
        "call_1",
        "weather",
        '{"city": "Oslo"}',
    )
    output = _only("function output")
    assert output.role == "tool"
    assert output.contents == [FunctionResultContent(call_id="call_1", result="sunny")]
    (summary,) = _only("reasoning").contents
    assert isinstance(summary, ReasoningContent) and summary.text == "thinking"
    (steps,) = _only("reasoning content").contents
    assert isinstance(steps, ReasoningContent) and steps.text == "step"


@pytest.mark.parametrize(
    ("call", "output"),
    [
        ("computer call", "computer output"),
        ("custom tool call", "custom tool output"),
        ("shell call", "shell output"),
        ("local shell call", "local shell output"),
        ("apply patch call", "apply patch output"),
        ("mcp approval request", "mcp approval response"),
    ],
)
def test_hosted_call_and_output_form_one_group(call: str, output: str) -> None:
    messages = from_openai_responses([{"role": "user", "content": "go"}, VARIANTS[call]])
    messages += from_openai_responses([VARIANTS[output]])
    (call_content,) = messages[1].contents
    (output_content,) = messages[2].contents
    assert isinstance(call_content, OtherContent) and isinstance(output_content, OtherContent)
    assert call_content.kind in HOSTED_CALLS and output_content.kind in HOSTED_RESULTS
    assert (call_content.pairing, output_content.pairing) == ("call", "result")
    assert call_content.call_id == output_content.call_id
    annotated = annotate(messages)
    groups = [group_id for _, group_id in annotated.message_groups]
    assert groups[1] == groups[2] != groups[0]


def test_unpaired_items_are_kept_as_other() -> None:
    for name in ("web search", "item reference", "unknown item"):
        (content,) = _only(name).contents
        assert isinstance(content, OtherContent)
        assert (content.kind, content.pairing) == (VARIANTS[name]["type"], "none")
    lost = [{"type": "computer_call_output", "output": {}}, {"type": "mcp_approval_response"}]
    for message, item in zip(from_openai_responses(lost), lost, strict=True):
        (content,) = message.contents
        assert isinstance(content, OtherContent)
        assert (content.kind, content.pairing, content.call_id) == (item["type"], "none", None)
        assert to_openai_responses([message]) == [item]


def test_ids() -> None:
    with_id, without, empty = from_openai_responses(
        [VARIANTS["reasoning"], VARIANTS["function output"], VARIANTS["empty id"]]
    )
    assert with_id.message_id == "rs_1" and ORIGINAL_ID_KEY not in with_id.metadata
    assert without.metadata[ORIGINAL_ID_KEY] is None and without.message_id
    assert empty.metadata[ORIGINAL_ID_KEY] == ""
    assert "id" not in to_openai_responses([without])[0]


def test_custom_roles() -> None:
    item = {"role": "narrator", "content": "once"}
    with pytest.raises(FormatError, match=r"item 1: .*'narrator'") as caught:
        from_openai_responses([VARIANTS["easy user string"], item])
    assert caught.value.index == 1
    (kept,) = from_openai_responses([item], allow_custom_roles=True)
    assert to_openai_responses([kept]) == [item]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("hi", "expected an item object"),
        ({"type": 3}, "item type must be"),
        ({"type": "message", "content": "x"}, "role must be a string"),
        ({"role": "user", "content": 5}, "content must be a string"),
        ({"role": "user", "content": ["x"]}, r"content\[0\] is not an object"),
        ({"type": "function_call", "name": "f"}, "call_id and name"),
        ({"type": "function_call_output", "call_id": "c"}, "has no output"),
        ({"type": "function_call_output", "output": "x"}, "needs a string call_id"),
    ],
)
def test_bad_input_names_the_item(bad: Any, message: str) -> None:
    with pytest.raises(FormatError, match=message) as caught:
        from_openai_responses([VARIANTS["easy user string"], bad])
    assert caught.value.index == 1


def test_messages_from_elsewhere_get_responses_shapes() -> None:
    af_messages = from_agent_framework(
        [
            {
                "role": "assistant",
                "contents": [
                    {"type": "text_reasoning", "text": "hmm"},
                    {"type": "text", "text": "let me look"},
                    {"type": "function_call", "call_id": "a", "name": "f", "arguments": {"x": 1}},
                ],
            },
            {
                "role": "tool",
                "contents": [{"type": "function_result", "call_id": "a", "result": 2}],
            },
        ]
    )
    text, call, output = to_openai_responses(af_messages)  # the reasoning has no item id
    assert text == {"type": "message", "role": "assistant", "content": "let me look"}
    assert call == {"type": "function_call", "call_id": "a", "name": "f", "arguments": '{"x": 1}'}
    assert output == {"type": "function_call_output", "call_id": "a", "output": json.dumps(2)}
    plain = Message.text_message("user", "hi")
    assert to_openai_responses([plain], with_ids=True) == [
        {"type": "message", "role": "user", "content": "hi", "id": plain.message_id}
    ]


def test_chat_export_keeps_calls_with_their_outputs() -> None:
    items = [
        {"role": "user", "content": "weather?"},
        CALL,
        OUTPUT,
        {"role": "assistant", "content": [{"type": "output_text", "text": "sunny"}]},
    ]
    chat = to_openai_chat(from_openai_responses(items))
    assert [m["role"] for m in chat] == ["user", "assistant", "tool", "assistant"]
    assert chat[1]["tool_calls"][0]["id"] == chat[2]["tool_call_id"] == "call_1"
    again = from_openai_chat(chat)
    assert [m.text for m in again] == ["weather?", "", "", "sunny"]


# -- generated conversations ----------------------------------------------------------

_ids = st.text(min_size=1, max_size=6)
_text = st.text(max_size=10)
_extras = st.dictionaries(st.sampled_from(["annotations", "status", "x_meta"]), _text, max_size=2)
_text_part = st.builds(
    lambda tag, t, e: {**e, "type": tag, "text": t},
    st.sampled_from(["input_text", "output_text"]),
    _text,
    _extras,
)
_image_part = st.builds(
    lambda url, d: {"type": "input_image", "image_url": url, **d},
    st.sampled_from(["https://x.test/a.png", "data:image/png;base64,iVBO", "data:;base64,", "x"]),
    st.fixed_dictionaries({}, optional={"detail": st.sampled_from(["low", "auto"])}),
)
_file_part = st.builds(
    lambda f: {"type": "input_file", **f},
    st.fixed_dictionaries(
        {},
        optional={
            "file_data": st.sampled_from(["data:application/pdf;base64,JVBE", "JVBE"]),
            "file_url": st.just("https://x.test/f"),
            "file_id": _ids,
            "filename": _text,
        },
    ),
)
_parts = st.lists(_text_part | _image_part | _file_part, max_size=3)


@st.composite
def _item(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(
        st.sampled_from(
            ["message", "easy", "function_call", "function_call_output", "reasoning", *HOSTED_CALLS]
        )
    )
    item: dict[str, Any]
    if kind in ("message", "easy"):
        role = draw(st.sampled_from(["system", "developer", "user", "assistant"]))
        item = {"role": role} if kind == "easy" else {"type": "message", "role": role}
        item["content"] = draw(_text | _parts)
    elif kind == "function_call":
        item = {"type": kind, "call_id": draw(_ids), "name": draw(_ids), "arguments": draw(_text)}
    elif kind == "function_call_output":
        item = {"type": kind, "call_id": draw(_ids), "output": draw(_text | _parts)}
    elif kind == "reasoning":
        summary = [{"type": "summary_text", "text": t} for t in draw(st.lists(_text, max_size=2))]
        item = {"type": kind, "summary": summary}
    else:
        item = {"type": kind, HOSTED_CALLS[kind]: draw(_ids), "payload": draw(_text)}
    optional = st.fixed_dictionaries(
        {}, optional={"id": _ids | st.none() | st.just(""), "status": _text}
    )
    item.update(draw(optional))
    if HOSTED_CALLS.get(kind) == "id" and not (isinstance(item.get("id"), str) and item["id"]):
        item["id"] = "pair"
    return item


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_item(), max_size=8))
def test_generated_items_round_trip(items: list[dict[str, Any]]) -> None:
    messages = from_openai_responses(items)
    assert to_openai_responses(messages) == items
    stored = MESSAGES_ADAPTER.validate_json(MESSAGES_ADAPTER.dump_json(messages))
    assert to_openai_responses(stored) == items
    for item, message in zip(items, messages, strict=True):
        if isinstance(item.get("id"), str) and item["id"]:
            assert message.message_id == item["id"]
