"""The message model: every content variant, role mapping, ids, the storage adapters."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from strategies.messages import (
    CONTENTS_ADAPTER,
    MESSAGES_ADAPTER,
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

EVERY_CONTENT: list[Content] = [
    TextContent(text="héllo 世界 🌍", extra={"annotations": [{"type": "citation"}]}),
    ReasoningContent(text="thinking", payload={"encrypted": "abc=="}),
    ReasoningContent(payload="opaque-only"),
    FunctionCallContent(call_id="c1", name="search", arguments='{"q": "x"}'),
    FunctionCallContent(call_id="c2", name="search", arguments={"q": "y", "n": 3}),
    FunctionCallContent(call_id="c3", name="noargs"),
    FunctionResultContent(call_id="c1", result="found"),
    FunctionResultContent(call_id="c2", result={"rows": [1, 2]}, is_error=True),
    DataContent(data="aGVsbG8=", media_type="image/png"),
    UriContent(uri="https://example.invalid/a.png", media_type="image/png"),
    OtherContent(
        kind="mcp_server_tool_call", payload={"server": "s"}, call_id="h1", pairing="call"
    ),
    OtherContent(kind="usage", payload={"input_tokens": 3}),
]


@pytest.mark.parametrize("content", EVERY_CONTENT, ids=lambda c: f"{c.type}")
def test_every_content_round_trips_through_the_storage_adapter(content: Content) -> None:
    dumped = CONTENTS_ADAPTER.dump_json([content])
    assert CONTENTS_ADAPTER.validate_json(dumped) == [content]
    python_form = CONTENTS_ADAPTER.dump_python([content], mode="json")
    assert CONTENTS_ADAPTER.validate_python(python_form) == [content]


def test_whole_message_round_trips_with_all_fields() -> None:
    message = Message(
        role="assistant",
        contents=EVERY_CONTENT,
        author_name="bot",
        created_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        metadata={"k": [1, "two", None]},
    )
    restored = MESSAGES_ADAPTER.validate_json(MESSAGES_ADAPTER.dump_json([message]))
    assert restored == [message]


def test_message_id_is_generated_once_and_stable() -> None:
    message = Message.text_message("user", "hi")
    assert message.message_id
    assert message.message_id == message.message_id
    again = MESSAGES_ADAPTER.validate_python(MESSAGES_ADAPTER.dump_python([message]))[0]
    assert again.message_id == message.message_id
    other = Message.text_message("user", "hi")
    assert other.message_id != message.message_id


def test_explicit_id_is_kept() -> None:
    assert Message(role="user", message_id="abc").message_id == "abc"


def test_empty_id_is_rejected() -> None:
    with pytest.raises(ValidationError):
        Message(role="user", message_id="")


@pytest.mark.parametrize(("given", "stored"), [("developer", "system"), ("function", "tool")])
def test_aliased_roles_map_and_keep_the_original(given: str, stored: str) -> None:
    message = Message(role=given, contents=[TextContent(text="x")])
    assert message.role == stored
    assert message.metadata["original_role"] == given


def test_unknown_role_is_rejected_with_its_name() -> None:
    with pytest.raises(ValidationError, match="'critic'"):
        Message(role="critic")


def test_custom_role_by_opt_in_keyword_or_context() -> None:
    assert Message(role="critic", allow_custom_roles=True).role == "critic"
    data: dict[str, Any] = {"role": "critic"}
    by_context = Message.model_validate(data, context={"allow_custom_roles": True})
    assert by_context.role == "critic"
    assert by_context.is_custom_role


def test_messages_are_immutable() -> None:
    message = Message.text_message("user", "hi")
    with pytest.raises(ValidationError):
        message.role = "assistant"  # type: ignore[misc]


def test_unknown_fields_are_rejected_not_dropped() -> None:
    with pytest.raises(ValidationError):
        TextContent.model_validate({"type": "text", "text": "x", "surprise": 1})


def test_discriminator_rejects_unknown_content_types() -> None:
    with pytest.raises(ValidationError):
        CONTENTS_ADAPTER.validate_python([{"type": "hologram"}])


class _Unprintable:
    def __str__(self) -> str:
        raise ValueError("no text")

    __repr__ = __str__


@pytest.mark.parametrize(
    "tag",
    [10**4301, [10**4301], {"k": 10**4301}, _Unprintable(), 7],
    ids=["huge-int", "in-a-list", "in-a-dict", "unprintable", "int"],
)
def test_a_content_tag_that_is_no_string_is_refused_by_the_model(tag: object) -> None:
    """Refused before the discriminated union formats it into its error message (a
    value ``str()`` fails on was reported as an unraisable exception there)."""
    with pytest.raises(ValidationError, match=r"contents\[0\]\.type must be a string"):
        Message.model_validate({"role": "user", "contents": [{"type": tag}]})


def test_text_property_joins_text_contents_only() -> None:
    message = Message(
        role="assistant",
        contents=[TextContent(text="a"), ReasoningContent(text="no"), TextContent(text="b")],
    )
    assert message.text == "ab"
