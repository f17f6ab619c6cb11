"""Each target's own types, as the checks of an exported document: the OpenAI SDK's Chat
Completions and Responses param types, Anthropic's ``MessageParam``, LangChain's
message classes and Agent Framework's ``Message`` and ``AgentSession``.

The param types are TypedDicts, which pydantic validates leniently (unknown keys are
dropped, lists validated lazily): :func:`strictly` also requires that validation keeps
every key and value, so that an unknown key or a coerced value fails too.
"""

from __future__ import annotations

import typing
import warnings
from collections.abc import Iterator
from functools import cache
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

__all__ = ["TARGET_CHECKS", "check_document"]


def _materialized(value: Any) -> Any:
    """``value`` with pydantic's lazy iterators read into lists, recursively."""
    if isinstance(value, dict):
        return {key: _materialized(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_materialized(item) for item in value]
    if isinstance(value, Iterator):
        return [_materialized(item) for item in value]
    return value


@cache
def _adapter(kind: Any) -> TypeAdapter[Any]:
    return TypeAdapter(kind)


def strictly(kind: Any, value: Any, where: str) -> None:
    """Validate ``value`` as ``kind``; fail when validation drops or changes anything."""
    try:
        validated = _materialized(_adapter(kind).validate_python(value))
    except ValidationError as error:
        first = "; ".join(f"{e['loc']}: {e['msg']}" for e in error.errors()[:4])
        raise AssertionError(f"{where}: {value!r} is refused: {first} ...") from None
    assert validated == value, f"{where}: the target's types drop or change {value!r}"


def check_openai_chat(document: dict[str, Any]) -> None:
    chat = pytest.importorskip("openai.types.chat")
    for index, message in enumerate(document["messages"]):
        strictly(chat.ChatCompletionMessageParam, message, f"messages[{index}]")
    _chat_calls_are_answered(document["messages"])


def _chat_calls_are_answered(messages: list[dict[str, Any]]) -> None:
    """An assistant message with calls is followed by one tool message a call, first."""
    for index, message in enumerate(messages):
        calls = [call["id"] for call in message.get("tool_calls") or []]
        following = messages[index + 1 : index + 1 + len(calls)]
        answered = [m.get("tool_call_id") for m in following if m["role"] == "tool"]
        assert sorted(answered) == sorted(calls), f"messages[{index}]: calls not answered next"


def check_openai_responses(document: dict[str, Any]) -> None:
    responses = pytest.importorskip("openai.types.responses")
    for index, item in enumerate(document["input"]):
        strictly(responses.ResponseInputItemParam, item, f"input[{index}]")


def check_anthropic(document: dict[str, Any]) -> None:
    types = pytest.importorskip("anthropic.types")
    if "system" in document:
        system = document["system"]
        if not isinstance(system, str):
            for index, block in enumerate(system):
                strictly(types.TextBlockParam, block, f"system[{index}]")
    for index, message in enumerate(document["messages"]):
        strictly(types.MessageParam, message, f"messages[{index}]")
    _anthropic_uses_are_answered(document["messages"])


def _anthropic_uses_are_answered(messages: list[dict[str, Any]]) -> None:
    """Each assistant turn's ``tool_use`` blocks are answered by the next user message,
    whose ``tool_result`` blocks come first; the roles alternate."""
    for index, message in enumerate(messages):
        if index:
            assert message["role"] != messages[index - 1]["role"], f"messages[{index}]: role"
        blocks = message["content"] if isinstance(message["content"], list) else []
        uses = [b["id"] for b in blocks if b["type"] == "tool_use"]
        if not uses:
            continue
        answer = messages[index + 1]["content"] if index + 1 < len(messages) else []
        results = [b for b in answer if isinstance(b, dict) and b["type"] == "tool_result"]
        assert [b["tool_use_id"] for b in results] == uses, f"messages[{index}]: unanswered"
        assert answer[: len(results)] == results, f"messages[{index + 1}]: results first"


def check_langchain(document: dict[str, Any]) -> None:
    messages_module = pytest.importorskip("langchain_core.messages")
    objects = messages_module.messages_from_dict(document["messages"])
    for index, message in enumerate(objects):
        calls = [call["id"] for call in getattr(message, "tool_calls", None) or []]
        following = objects[index + 1 : index + 1 + len(calls)]
        answered = [m.tool_call_id for m in following if isinstance(m, messages_module.ToolMessage)]
        assert sorted(answered) == sorted(calls), f"messages[{index}]: calls not answered next"


def check_agent_framework(document: dict[str, Any]) -> None:
    af = pytest.importorskip("agent_framework")
    af_types = pytest.importorskip("agent_framework._types")
    known = set(typing.get_args(af_types.ContentType))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # AgentSession is marked experimental
        session = af.AgentSession.from_dict(document)
    for message in session.state["in_memory"]["messages"]:
        assert isinstance(message, af.Message)
        assert {content.type for content in message.contents} <= known


TARGET_CHECKS = {
    "openai-chat": check_openai_chat,
    "openai-responses": check_openai_responses,
    "anthropic": check_anthropic,
    "langchain": check_langchain,
    "agent-framework": check_agent_framework,
}
"""The check of one exported session document, by format."""


def check_document(fmt: str, document: dict[str, Any]) -> None:
    """Check one session of an export in ``fmt`` with the target's own types."""
    TARGET_CHECKS[fmt](document)
