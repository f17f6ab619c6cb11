"""Agent Framework format: round trips, content mapping, annotations and ids."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import warnings
from typing import Any

import pytest

from store.formats import (
    AF_ANNOTATIONS_KEY,
    AF_EXTRA_KEY,
    AF_PROPERTIES_KEY,
    ORIGINAL_ID_KEY,
    FormatError,
    af_annotations,
    from_agent_framework,
    from_openai_chat,
    to_agent_framework,
)
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

af = pytest.importorskip("agent_framework")
AFContent = af.Content
AFMessage = af.Message


def _build_contents() -> dict[str, Any]:
    """One real Agent Framework content per content type, built with its own constructors."""
    call = AFContent.from_function_call("call-1", "get_weather", arguments={"city": "Oslo"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # computer use is marked experimental
        computer_call = AFContent.from_computer_tool_call(
            id="cu-1", call_id="comp-1", actions=[{"type": "click", "x": 1, "y": 2}]
        )
        computer_result = AFContent.from_computer_tool_result(
            call_id="comp-1",
            screenshot=AFContent.from_uri("https://x.test/s.png", media_type="image/png"),
        )
    return {
        "text": AFContent.from_text("hello", annotations=[{"type": "citation", "url": "u"}]),
        "text_reasoning": AFContent.from_text_reasoning(
            id="rs-1", text="thinking", protected_data="opaque=="
        ),
        "data": AFContent.from_data(b"\x89PNG", "image/png", name="pic.png"),
        "uri": AFContent.from_uri("https://x.test/a.pdf", media_type="application/pdf"),
        "error": AFContent.from_error(message="boom", error_code="E1", error_details="d"),
        "function_call": call,
        "function_result": AFContent.from_function_result("call-1", result={"temp": 3}),
        "function_result_error": AFContent.from_function_result(
            "call-1", result="failed", exception="secret trace"
        ),
        "usage": AFContent.from_usage({"input_token_count": 5, "output_token_count": 7}),
        "hosted_file": AFContent.from_hosted_file("file-1", media_type="text/plain"),
        "hosted_vector_store": AFContent.from_hosted_vector_store("vs-1"),
        "code_interpreter_tool_call": AFContent.from_code_interpreter_tool_call(
            call_id="ci-1", inputs=[AFContent.from_text("print(1)")]
        ),
        "code_interpreter_tool_result": AFContent.from_code_interpreter_tool_result(
            call_id="ci-1", outputs=[AFContent.from_text("1")]
        ),
        "image_generation_tool_call": AFContent.from_image_generation_tool_call(image_id="img-1"),
        "image_generation_tool_result": AFContent.from_image_generation_tool_result(
            image_id="img-1",
            outputs=AFContent.from_uri("https://x.test/i.png", media_type="image/png"),
        ),
        "mcp_server_tool_call": AFContent.from_mcp_server_tool_call(
            "mcp-1", "lookup", server_name="srv", arguments='{"q": 1}'
        ),
        "mcp_server_tool_result": AFContent.from_mcp_server_tool_result(
            "mcp-1", output=[AFContent.from_text("found")]
        ),
        "search_tool_call": AFContent.from_search_tool_call("s-1", tool_name="web", arguments="q"),
        "search_tool_result": AFContent.from_search_tool_result("s-1", tool_name="web", result="r"),
        "shell_tool_call": AFContent.from_shell_tool_call(call_id="sh-1", commands=["ls"]),
        "shell_tool_result": AFContent.from_shell_tool_result(
            call_id="sh-1", outputs=[AFContent.from_shell_command_output(stdout="a", exit_code=0)]
        ),
        "shell_command_output": AFContent.from_shell_command_output(stderr="e", timed_out=True),
        "computer_tool_call": computer_call,
        "computer_tool_result": computer_result,
        "function_approval_request": AFContent.from_function_approval_request("call-1", call),
        "function_approval_response": AFContent.from_function_approval_response(
            True, "call-1", call
        ),
        "oauth_consent_request": AFContent.from_oauth_consent_request("https://x.test/consent"),
    }


CONTENTS = _build_contents()
ROLE_OF = {"function_result": "tool", "function_result_error": "tool"}


def _af_dict(name: str, *, exclude_none: bool = True) -> dict[str, Any]:
    message = AFMessage(ROLE_OF.get(name, "assistant"), [CONTENTS[name]], message_id=f"m-{name}")
    return message.to_dict(exclude_none=exclude_none)


def test_every_content_type_is_covered() -> None:
    from typing import get_args

    from agent_framework._types import ContentType

    covered = {CONTENTS[name].type for name in CONTENTS}
    assert covered == set(get_args(ContentType))


@pytest.mark.parametrize("exclude_none", [True, False])
@pytest.mark.parametrize("name", sorted(CONTENTS))
def test_round_trip_each_content_type(name: str, exclude_none: bool) -> None:
    original = _af_dict(name, exclude_none=exclude_none)
    messages = from_agent_framework([original])
    assert to_agent_framework(messages) == [original]
    # through the storage format too
    stored = MESSAGES_ADAPTER.validate_json(MESSAGES_ADAPTER.dump_json(messages))
    assert to_agent_framework(stored) == [original]


@pytest.mark.parametrize("name", sorted(CONTENTS))
def test_agent_framework_reads_our_output(name: str) -> None:
    original = _af_dict(name)
    written = to_agent_framework(from_agent_framework([original]))[0]
    assert AFMessage.from_dict(written).to_dict() == original


EXPECTED_TYPES = {
    "text": TextContent,
    "text_reasoning": ReasoningContent,
    "function_call": FunctionCallContent,
    "function_result": FunctionResultContent,
    "function_result_error": FunctionResultContent,
    "data": DataContent,
    "uri": UriContent,
}


@pytest.mark.parametrize("name", sorted(CONTENTS))
def test_content_maps_to_model_variant(name: str) -> None:
    (content,) = from_agent_framework([_af_dict(name)])[0].contents
    assert isinstance(content, EXPECTED_TYPES.get(name, OtherContent))
    source = CONTENTS[name]
    if isinstance(content, OtherContent):
        assert content.kind == source.type
        assert content.payload == {k: v for k, v in source.to_dict().items() if k != "type"}


def test_modelled_fields_are_read() -> None:
    reasoning, call, result, error, data, uri = (
        from_agent_framework([_af_dict(n)])[0].contents[0]
        for n in (
            "text_reasoning",
            "function_call",
            "function_result",
            "function_result_error",
            "data",
            "uri",
        )
    )
    assert isinstance(reasoning, ReasoningContent)
    assert (reasoning.text, reasoning.payload) == ("thinking", "opaque==")
    assert isinstance(call, FunctionCallContent)
    assert (call.call_id, call.name, call.arguments) == ("call-1", "get_weather", {"city": "Oslo"})
    assert isinstance(result, FunctionResultContent)
    assert (result.call_id, result.is_error) == ("call-1", False)
    assert result.result == CONTENTS["function_result"].result
    assert isinstance(error, FunctionResultContent) and error.is_error
    assert isinstance(data, DataContent)
    assert f"data:{data.media_type};base64,{data.data}" == CONTENTS["data"].uri
    assert isinstance(uri, UriContent) and uri.uri == "https://x.test/a.pdf"


PAIRINGS = {
    "code_interpreter_tool_call": ("call", "ci-1"),
    "code_interpreter_tool_result": ("result", "ci-1"),
    "image_generation_tool_call": ("call", "img-1"),
    "image_generation_tool_result": ("result", "img-1"),
    "mcp_server_tool_call": ("call", "mcp-1"),
    "mcp_server_tool_result": ("result", "mcp-1"),
    "search_tool_call": ("call", "s-1"),
    "search_tool_result": ("result", "s-1"),
    "shell_tool_call": ("call", "sh-1"),
    "shell_tool_result": ("result", "sh-1"),
    "computer_tool_call": ("call", "comp-1"),
    "computer_tool_result": ("result", "comp-1"),
    "function_approval_request": ("call", "call-1"),
    "function_approval_response": ("result", "call-1"),
    "error": ("none", None),
    "usage": ("none", None),
    "hosted_file": ("none", None),
    "hosted_vector_store": ("none", None),
    "shell_command_output": ("none", None),
    "oauth_consent_request": ("none", None),
}


@pytest.mark.parametrize("name", sorted(PAIRINGS))
def test_other_content_pairing(name: str) -> None:
    (content,) = from_agent_framework([_af_dict(name)])[0].contents
    assert isinstance(content, OtherContent)
    assert (content.pairing, content.call_id) == PAIRINGS[name]


EDGE_CASES: dict[str, dict[str, Any]] = {
    "no id, no type, no properties": {
        "role": "user",
        "contents": [{"type": "text", "text": "x", "additional_properties": {}}],
    },
    "null fields": {
        "type": "message",
        "role": "assistant",
        "contents": None,
        "author_name": None,
        "message_id": None,
        "additional_properties": {"k": None},
    },
    "unknown keys": {
        "type": "message",
        "role": "user",
        "contents": [{"type": "text", "text": "x", "future": [1, 2]}],
        "additional_properties": {},
        "future_field": {"a": 1},
    },
    "unknown content type": {
        "type": "message",
        "role": "assistant",
        "contents": [{"type": "hologram", "depth": 3}],
        "additional_properties": {},
    },
    "data uri with parameters": {
        "type": "message",
        "role": "user",
        "contents": [
            {
                "type": "data",
                "uri": "data:text/plain;charset=utf-8;base64,aGk=",
                "media_type": "text/plain",
            },
            {"type": "data", "uri": "data:text/plain,hi", "media_type": "text/plain"},
            {"type": "data", "uri": "data:image/png;base64,AA=="},
        ],
        "additional_properties": {},
    },
    "function call without call id": {
        "type": "message",
        "role": "assistant",
        "contents": [{"type": "function_call", "name": "f"}],
        "additional_properties": {},
    },
    "odd-typed fields": {
        "type": "message",
        "role": "assistant",
        "contents": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": [1]}],
        "author_name": 7,
        "message_id": 12,
        "additional_properties": [],
    },
    "empty type": {"type": "", "role": "user", "contents": [], "additional_properties": {}},
}


@pytest.mark.parametrize("case", sorted(EDGE_CASES))
def test_edge_cases_round_trip(case: str) -> None:
    original = EDGE_CASES[case]
    written = to_agent_framework(from_agent_framework([original]))
    if case == "no id, no type, no properties":
        # Agent Framework's own defaults, written back as its to_dict writes them.
        assert written == [{**original, "type": "message", "additional_properties": {}}]
        assert AFMessage.from_dict(original).to_dict() == written[0]
    else:
        assert written == [original]


def test_compaction_annotations_survive_and_parse() -> None:
    from agent_framework._compaction import (
        CharacterEstimatorTokenizer,
        ToolResultCompactionStrategy,
        annotate_message_groups,
    )

    messages = [AFMessage("user", ["first question"])]
    for i in range(3):
        messages.append(
            AFMessage(
                "assistant", [AFContent.from_function_call(f"c{i}", "get", arguments={"i": i})]
            )
        )
        messages.append(
            AFMessage("tool", [AFContent.from_function_result(f"c{i}", result=f"r{i}")])
        )
    messages += [AFMessage("assistant", ["done"]), AFMessage("user", ["next"])]
    annotate_message_groups(messages, tokenizer=CharacterEstimatorTokenizer())
    assert asyncio.run(ToolResultCompactionStrategy(keep_last_tool_call_groups=1)(messages))
    dicts = [m.to_dict() for m in messages]

    converted = from_agent_framework(dicts)
    assert to_agent_framework(converted) == dicts
    by_original: dict[Any, str] = {}
    for source, message in zip(dicts, converted, strict=True):
        properties = source["additional_properties"]
        assert message.metadata[AF_ANNOTATIONS_KEY] == properties  # all of them compaction keys
        assert AF_PROPERTIES_KEY not in message.metadata
        parsed = af_annotations(message)
        assert parsed is not None
        group = properties["_group"]
        assert (parsed.group_id, parsed.kind, parsed.index) == (
            group["id"],
            group["kind"],
            group["index"],
        )
        assert parsed.token_count == group["token_count"]
        assert parsed.excluded == properties["_excluded"]
        assert parsed.exclude_reason == properties.get("_exclude_reason")
        assert list(parsed.summary_of_message_ids) == group.get("_summary_of_message_ids", [])
        assert parsed.summarized_by_summary_id == group.get("_summarized_by_summary_id")
        by_original[message.metadata.get(ORIGINAL_ID_KEY, message.message_id)] = message.message_id

    summaries = [m for m in converted if (a := af_annotations(m)) and a.is_summary]
    excluded = [m for m in converted if (a := af_annotations(m)) and a.excluded]
    assert summaries and excluded
    for summary in summaries:
        annotations = af_annotations(summary)
        assert annotations is not None
        for original_id in annotations.summary_of_message_ids:
            replaced = next(m for m in converted if m.message_id == by_original[original_id])
            replaced_annotations = af_annotations(replaced)
            assert replaced_annotations is not None and replaced_annotations.excluded
            assert replaced_annotations.summarized_by_summary_id == summary.message_id


def test_annotations_kept_apart_from_other_properties() -> None:
    original = {
        "type": "message",
        "role": "user",
        "contents": [],
        "additional_properties": {
            "_excluded": True,
            "_exclude_reason": "r",
            "_attribution": {"x": 1},
        },
    }
    (message,) = from_agent_framework([original])
    assert message.metadata[AF_ANNOTATIONS_KEY] == {"_excluded": True, "_exclude_reason": "r"}
    assert message.metadata[AF_PROPERTIES_KEY] == {"_attribution": {"x": 1}}
    parsed = af_annotations(message)
    assert parsed is not None and parsed.excluded and parsed.group_id is None
    assert af_annotations(Message.text_message("user", "plain")) is None


def test_positional_and_missing_ids_are_replaced_and_restored() -> None:
    dicts = [
        AFMessage("user", ["a"], message_id=mid).to_dict() for mid in ("msg_4", None, "stable-9")
    ]
    dicts.append(
        {
            "type": "message",
            "role": "user",
            "contents": [],
            "message_id": "",
            "additional_properties": {},
        }
    )
    messages = from_agent_framework(dicts)
    positional, missing, stable, empty = messages
    assert positional.metadata[ORIGINAL_ID_KEY] == "msg_4" and positional.message_id != "msg_4"
    assert missing.metadata[ORIGINAL_ID_KEY] is None
    assert empty.metadata[ORIGINAL_ID_KEY] == ""
    assert stable.message_id == "stable-9" and ORIGINAL_ID_KEY not in stable.metadata
    assert len({m.message_id for m in messages}) == 4
    assert to_agent_framework(messages) == dicts
    # converting again gives fresh ids: they never come from positions
    assert from_agent_framework(dicts)[0].message_id != positional.message_id


def test_roles_developer_and_custom() -> None:
    developer = AFMessage("developer", ["be brief"]).to_dict()
    (message,) = from_agent_framework([developer])
    assert message.role == "system"
    assert to_agent_framework([message]) == [developer]

    custom = AFMessage("narrator", ["once upon a time"]).to_dict()
    with pytest.raises(FormatError, match=r"item 1: .*'narrator'") as caught:
        from_agent_framework([developer, custom])
    assert caught.value.index == 1
    (kept,) = from_agent_framework([custom], allow_custom_roles=True)
    assert kept.role == "narrator" and kept.is_custom_role
    assert to_agent_framework([kept]) == [custom]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("just text", "expected a message mapping"),
        ({"type": "chat_response", "role": "user"}, "not an Agent Framework message"),
        ({"role": 3, "contents": []}, "role must be a string"),
        ({"role": "user", "contents": "hi"}, "contents must be a list"),
        ({"role": "user", "contents": ["hi"]}, r"contents\[0\] is not a mapping"),
        ({"role": "user", "contents": [{"text": "hi"}]}, r"contents\[0\] has no content type"),
        (
            {"role": "user", "contents": [{"type": "text", "text": "x", "v": {1, 2}}]},
            r"contents\[0\]: extra.v",
        ),
    ],
)
def test_bad_input_names_the_item(bad: Any, message: str) -> None:
    good = {"role": "user", "contents": []}
    with pytest.raises(FormatError, match=message) as caught:
        from_agent_framework([good, good, bad])
    assert caught.value.index == 2
    assert isinstance(caught.value, ValueError)


def test_messages_from_elsewhere_get_agent_framework_shapes() -> None:
    messages = from_openai_chat(
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        ]
    )
    written = to_agent_framework(messages)
    assert [w["message_id"] for w in written] == [m.message_id for m in messages]
    rebuilt = [AFMessage.from_dict(w) for w in written]
    assert rebuilt[0].contents[0].type == "function_call"
    assert rebuilt[0].contents[0].call_id == "c1"
    assert rebuilt[1].contents[0].type == "function_result"
    assert rebuilt[1].contents[0].result == "ok"
    error = FunctionResultContent(call_id="c2", result="bad", is_error=True)
    (failed,) = to_agent_framework([Message(role="tool", contents=[error])])
    assert AFMessage.from_dict(failed).contents[0].exception is not None


def test_importable_without_agent_framework() -> None:
    code = (
        "import sys; sys.modules['agent_framework'] = None\n"
        "import store.formats as f\n"
        "m = f.from_agent_framework([{'role': 'user', 'contents': []}])\n"
        "assert f.to_agent_framework(m)[0]['role'] == 'user'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_unknown_message_keys_are_kept_in_metadata() -> None:
    (message,) = from_agent_framework([EDGE_CASES["unknown keys"]])
    assert message.metadata[AF_EXTRA_KEY] == {"future_field": {"a": 1}}
    (content,) = message.contents
    assert content == TextContent(text="x", extra={"future": [1, 2]})
