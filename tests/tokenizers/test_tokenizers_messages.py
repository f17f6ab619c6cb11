"""Counting the tokens of a message: what is counted, and what is not."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import JsonValue, ValidationError

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
from strategies.tokenizers import (
    DEFAULT_POLICY,
    CharacterEstimatorTokenizer,
    CountingTokenizer,
    TiktokenTokenizer,
    TokenCountPolicy,
    compact_json,
    count_content_tokens,
    count_message_tokens,
    count_messages_tokens,
    count_text_tokens,
)

# Overheads set to zero, so that a count is the content's alone.
BARE = TokenCountPolicy(per_message_overhead=0, per_name_overhead=0)


class RecordingTokenizer:
    """One token per character, remembering every text it was asked to count."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    @property
    def name(self) -> str:
        return "recording"

    def count_tokens(self, text: str) -> int:
        self.texts.append(text)
        return len(text)


def test_default_policy_values() -> None:
    assert DEFAULT_POLICY == TokenCountPolicy()
    assert (
        DEFAULT_POLICY.per_message_overhead,
        DEFAULT_POLICY.per_name_overhead,
        DEFAULT_POLICY.image_tokens,
        DEFAULT_POLICY.file_tokens,
    ) == (4, 1, 765, 1000)


def test_policy_is_frozen_and_validated() -> None:
    with pytest.raises(ValidationError):
        DEFAULT_POLICY.image_tokens = 1  # type: ignore[misc]
    with pytest.raises(ValidationError):
        TokenCountPolicy(per_message_overhead=-1)
    with pytest.raises(ValidationError):
        TokenCountPolicy(image_tokenz=3)  # type: ignore[call-arg]


def test_text_and_overhead() -> None:
    rec = RecordingTokenizer()
    message = Message.text_message("user", "hello there")
    assert count_message_tokens(message, rec) == 4 + len("hello there")
    assert rec.texts == ["hello there"]
    policy = TokenCountPolicy(per_message_overhead=7)
    assert count_message_tokens(message, rec, policy=policy) == 7 + len("hello there")


def test_empty_message_counts_only_its_framing() -> None:
    tokenizer = CountingTokenizer(CharacterEstimatorTokenizer())
    assert count_message_tokens(Message(role="assistant"), tokenizer) == 4
    empty_text = Message.text_message("assistant", "")
    assert count_message_tokens(empty_text, tokenizer) == 4
    assert tokenizer.calls == 0


def test_count_text_tokens_counts_empty_and_none_as_zero() -> None:
    estimator = CharacterEstimatorTokenizer()
    assert count_text_tokens("", estimator) == 0
    assert count_text_tokens(None, estimator) == 0
    assert count_text_tokens("abcdefgh", estimator) == 2


def test_author_name_is_counted_with_its_overhead() -> None:
    rec = RecordingTokenizer()
    message = Message.text_message("user", "hi", author_name="alice")
    assert count_message_tokens(message, rec) == 4 + 1 + len("alice") + len("hi")
    assert sorted(rec.texts) == ["alice", "hi"]


def test_reasoning_counts_text_not_payload() -> None:
    rec = RecordingTokenizer()
    secret = base64.b64encode(b"\x00" * 3000).decode()
    with_text = ReasoningContent(text="think", payload={"encrypted_content": secret})
    assert count_content_tokens(with_text, rec) == len("think")
    assert count_content_tokens(ReasoningContent(payload=secret), rec) == 0
    assert rec.texts == ["think"]


@pytest.mark.parametrize(
    ("arguments", "expected_text"),
    [
        ('{"city": "Paris"}', '{"city": "Paris"}'),
        ({"city": "Zürich", "days": [1, 2]}, '{"city":"Zürich","days":[1,2]}'),
        ({}, "{}"),
        (None, None),
        ("", None),
    ],
    ids=["string-as-is", "mapping-compact", "empty-mapping", "none", "empty-string"],
)
def test_function_call_counts_name_and_arguments(
    arguments: str | dict[str, JsonValue] | None, expected_text: str | None
) -> None:
    rec = RecordingTokenizer()
    call = FunctionCallContent(call_id="call_1", name="get_weather", arguments=arguments)
    expected = len("get_weather") + (len(expected_text) if expected_text else 0)
    assert count_content_tokens(call, rec) == expected
    assert rec.texts == ["get_weather", *([expected_text] if expected_text else [])]


@pytest.mark.parametrize(
    ("result", "expected_text"),
    [
        ("sunny, 21 °C", "sunny, 21 °C"),
        ({"temp": 21, "sky": "sunny"}, '{"temp":21,"sky":"sunny"}'),
        ([1, "二", None], '[1,"二",null]'),
        (42, "42"),
        (True, "true"),
        (None, None),
    ],
    ids=["string", "mapping", "list", "int", "bool", "none"],
)
def test_function_result_counts_the_value(result: JsonValue, expected_text: str | None) -> None:
    rec = RecordingTokenizer()
    content = FunctionResultContent(call_id="call_1", result=result, is_error=False)
    assert count_content_tokens(content, rec) == (len(expected_text) if expected_text else 0)
    assert rec.texts == ([expected_text] if expected_text else [])


def test_compact_json_matches_the_stated_serialization() -> None:
    value: JsonValue = {"a": [1, 2.5, None], "b": "é 世界"}
    assert compact_json(value) == json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    assert compact_json(value) == '{"a":[1,2.5,null],"b":"é 世界"}'


@pytest.mark.parametrize(
    ("content", "kind"),
    [
        (DataContent(data="AAAA", media_type="image/png"), "image"),
        (DataContent(data="AAAA", media_type="IMAGE/JPEG"), "image"),
        (DataContent(data="AAAA", media_type="application/pdf"), "file"),
        (DataContent(data="AAAA", media_type="audio/wav"), "file"),
        (DataContent(data="AAAA"), "file"),
        (UriContent(uri="https://x.test/cat.png", media_type="image/png"), "image"),
        (UriContent(uri="https://x.test/cat.JPG?size=2#top"), "image"),
        (UriContent(uri="data:image/webp;base64,AAAA"), "image"),
        (UriContent(uri="data:application/pdf;base64,AAAA"), "file"),
        (UriContent(uri="https://x.test/report.pdf"), "file"),
        (UriContent(uri="https://x.test/photo", media_type="image/gif"), "image"),
        (UriContent(uri="https://x.test/cat.png", media_type="text/plain"), "file"),
    ],
)
def test_binary_contents_are_flat_estimates(content: DataContent | UriContent, kind: str) -> None:
    rec = RecordingTokenizer()
    policy = TokenCountPolicy(image_tokens=111, file_tokens=222)
    assert count_content_tokens(content, rec, policy=policy) == {"image": 111, "file": 222}[kind]
    assert rec.texts == []


@settings(max_examples=40, deadline=None)
@given(size=st.integers(min_value=0, max_value=200_000), image=st.booleans())
def test_binary_estimate_does_not_depend_on_base64_length(size: int, image: bool) -> None:
    data = base64.b64encode(b"\xff" * size).decode()
    media_type = "image/png" if image else "application/pdf"
    as_data = DataContent(data=data, media_type=media_type)
    as_uri = UriContent(uri=f"data:{media_type};base64,{data}")
    tokenizer = TiktokenTokenizer()
    expected = DEFAULT_POLICY.image_tokens if image else DEFAULT_POLICY.file_tokens
    for content in (as_data, as_uri):
        assert count_content_tokens(content, tokenizer) == expected
        message = Message(role="user", contents=[content])
        assert count_message_tokens(message, tokenizer) == expected + 4


def test_other_content_call_and_result_count_payload_values_not_keys() -> None:
    rec = RecordingTokenizer()
    call = OtherContent(
        kind="mcp_server_tool_call",
        call_id="mcp_1",
        pairing="call",
        payload={"tool_name": "search", "arguments": {"q": "otters", "limit": 3}, "x": None},
    )
    assert count_content_tokens(call, rec) == len("search\notters\n3")
    result = OtherContent(
        kind="mcp_server_tool_result",
        call_id="mcp_1",
        pairing="result",
        payload={"output": ["found", True]},
    )
    assert count_content_tokens(result, rec) == len("found\ntrue")
    assert rec.texts == ["search\notters\n3", "found\ntrue"]


def test_other_content_data_uris_in_payload_are_estimates() -> None:
    rec = RecordingTokenizer()
    image = "data:image/png;base64," + "A" * 10_000
    pdf = "data:application/pdf;base64," + "A" * 10_000
    result = OtherContent(
        kind="hosted_tool_result",
        pairing="result",
        payload={"caption": "a cat", "image": image, "files": [pdf]},
    )
    assert count_content_tokens(result, rec) == len("a cat") + 765 + 1000
    assert rec.texts == ["a cat"]


def test_other_content_without_pairing_counts_zero() -> None:
    rec = RecordingTokenizer()
    usage = OtherContent(kind="usage", payload={"input_tokens": 10, "note": "x" * 500})
    assert count_content_tokens(usage, rec) == 0
    assert rec.texts == []


def test_extra_and_metadata_are_not_counted() -> None:
    rec = RecordingTokenizer()
    plain = Message(role="user", contents=[TextContent(text="hello")])
    decorated = Message(
        role="user",
        contents=[TextContent(text="hello", extra={"annotations": ["x" * 300]})],
        metadata={"source": "y" * 300},
    )
    assert count_message_tokens(plain, rec) == count_message_tokens(decorated, rec) == 4 + 5


def test_mixed_message_is_the_sum_of_its_parts() -> None:
    contents = [
        ReasoningContent(text="Let me look that up."),
        TextContent(text="Checking the weather in 東京."),
        FunctionCallContent(call_id="c1", name="weather", arguments={"city": "東京"}),
        FunctionCallContent(call_id="c2", name="time", arguments='{"tz":"Asia/Tokyo"}'),
    ]
    message = Message(role="assistant", contents=contents, author_name="bot")
    tokenizer = TiktokenTokenizer()
    expected = (
        4
        + 1
        + tokenizer.count_tokens("bot")
        + tokenizer.count_tokens("Let me look that up.")
        + tokenizer.count_tokens("Checking the weather in 東京.")
        + tokenizer.count_tokens("weather")
        + tokenizer.count_tokens('{"city":"東京"}')
        + tokenizer.count_tokens("time")
        + tokenizer.count_tokens('{"tz":"Asia/Tokyo"}')
    )
    assert count_message_tokens(message, tokenizer) == expected
    counting = CountingTokenizer(tokenizer)
    count_message_tokens(message, counting)
    assert counting.calls == 7


def test_storage_keys_are_not_counted_unlike_agent_framework() -> None:
    """A message's count does not grow with the JSON of our storage format."""
    tokenizer = TiktokenTokenizer()
    message = Message.text_message("user", "What is the capital of France?")
    stored_json = message.model_dump_json()
    ours = count_message_tokens(message, tokenizer)
    assert ours == 4 + tokenizer.count_tokens("What is the capital of France?")
    assert ours < tokenizer.count_tokens(stored_json)


def test_count_messages_tokens_sums() -> None:
    tokenizer = CharacterEstimatorTokenizer()
    messages = [Message.text_message("user", "x" * 40), Message.text_message("assistant", "y" * 8)]
    assert count_messages_tokens(messages, tokenizer) == (4 + 10) + (4 + 2)
    assert count_messages_tokens([], tokenizer) == 0
    assert count_messages_tokens(messages, tokenizer, policy=BARE) == 12
