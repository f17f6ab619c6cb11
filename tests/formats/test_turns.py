"""One model turn, one message: the calls that the Responses API (and the Agents SDK)
keeps as items of their own are one assistant message in Chat Completions, Anthropic,
LangChain and Agent Framework, followed by their results."""

from __future__ import annotations

from typing import Any

import pytest

from store.formats import (
    from_openai_chat,
    from_openai_responses,
    to_agent_framework,
    to_anthropic,
    to_langchain,
    to_openai_chat,
)
from store.formats._turns import joined, turns
from strategies.messages import FunctionCallContent, Message, ReasoningContent, TextContent

CITIES = {"call_p": "Paris", "call_t": "東京"}


def _call(call_id: str) -> dict[str, Any]:
    city = CITIES[call_id]
    arguments = f'{{"city": "{city}"}}'
    return {"type": "function_call", "call_id": call_id, "name": "weather", "arguments": arguments}


def _output(call_id: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": f"sunny in {call_id}"}


ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": "Paris and 東京?"},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "two"}]},
    {"type": "message", "role": "assistant", "content": "Checking both."},
    _call("call_p"),
    _call("call_t"),
    _output("call_p"),
    _output("call_t"),
    {"type": "message", "role": "assistant", "content": "Sunny in both."},
]


def _messages() -> list[Message]:
    return from_openai_responses(ITEMS)


def test_chat_writes_the_turn_as_one_assistant_message_then_the_results() -> None:
    written = to_openai_chat(_messages())
    assert [m["role"] for m in written] == ["user", "assistant", "tool", "tool", "assistant"]
    turn = written[1]
    assert turn["content"] == "Checking both."
    assert [c["id"] for c in turn["tool_calls"]] == list(CITIES)
    assert [m["tool_call_id"] for m in written[2:4]] == list(CITIES)


def test_anthropic_writes_one_assistant_turn_and_one_user_turn_of_results() -> None:
    written = to_anthropic(_messages())
    assert [m["role"] for m in written] == ["user", "assistant", "user", "assistant"]
    assert [b["type"] for b in written[1]["content"]] == ["text", "tool_use", "tool_use"]
    assert [b["tool_use_id"] for b in written[2]["content"]] == list(CITIES)


def test_langchain_writes_one_ai_message_with_every_call() -> None:
    written = to_langchain(_messages())
    assert [m["type"] for m in written] == ["human", "ai", "tool", "tool", "ai"]
    turn = written[1]["data"]
    assert [c["id"] for c in turn["tool_calls"]] == list(CITIES)
    assert turn["content"] == [
        {"type": "reasoning", "reasoning": "two"},
        {"type": "text", "text": "Checking both."},
    ]


def test_agent_framework_writes_one_message_with_every_call() -> None:
    written = to_agent_framework(_messages())
    assert [m["role"] for m in written] == ["user", "assistant", "tool", "tool", "assistant"]
    types = [c["type"] for c in written[1]["contents"]]
    assert types == ["text_reasoning", "text", "function_call", "function_call"]
    assert written[1]["message_id"] == _messages()[1].message_id


def test_two_answers_without_calls_stay_two_messages() -> None:
    answers = [Message.text_message("assistant", "one"), Message.text_message("assistant", "two")]
    assert [len(run) for run in turns(answers, lambda m: False)] == [1, 1]
    assert len(to_openai_chat(answers)) == 2


def test_text_after_the_calls_joins_them_and_reasoning_leads_into_them() -> None:
    call = Message(role="assistant", contents=[FunctionCallContent(call_id="c", name="f")])
    thought = Message(role="assistant", contents=[ReasoningContent(text="hm")])
    after = Message.text_message("assistant", "done")
    runs = turns([thought, call, after], lambda m: False)
    assert [len(run) for run in runs] == [3]
    merged = joined(runs[0])
    assert merged.message_id == thought.message_id
    assert [type(c) for c in merged.contents] == [
        ReasoningContent,
        FunctionCallContent,
        TextContent,
    ]


@pytest.mark.parametrize("split", [True, False])
def test_messages_read_from_the_format_are_never_joined(split: bool) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    other = {**call, "id": "c2"}
    chat = [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "assistant", "content": None, "tool_calls": [other]},
    ]
    if not split:
        chat = [{"role": "assistant", "content": None, "tool_calls": [call, other]}]
    assert to_openai_chat(from_openai_chat(chat)) == chat
