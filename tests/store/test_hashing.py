"""``content_hash`` written field by field gives the bytes of its reference definition.

The reference is SHA-256 of ``json.dumps(dump, sort_keys=True, separators=(",", ":"))``
where ``dump`` is the message's JSON-mode dump with ``created_at`` in UTC ISO format
(naive taken as UTC): stored rows hold these hashes. The field-by-field path must give
them for every message, including the ones it hands back to the dump. The ``contents``
column text it writes on the way is what the storage adapter writes.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from store.rules import identity, storage_json
from store.rules.identity import content_hash, hashed_contents
from store.rules.storage_json import contents_json
from strategies.messages import (
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


def _reference_hash(message: Message) -> str:
    data: dict[str, Any] = message.model_dump(mode="json")
    if message.created_at is not None:
        created = message.created_at
        if created.tzinfo is None:
            created = created.replace(tzinfo=UTC)
        data["created_at"] = created.astimezone(UTC).isoformat()
    payload = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


class _Text(str):
    """A str subclass: handed to the dump."""


_EAST = timezone(timedelta(hours=5, minutes=30))
_TEXTS = ["", "plain", 'q "x" \\ \n\t\r\b\f \x00 \x1f \x7f', "héllo 日本 \u2028 😀", "\ud800"]
_JSON: list[Any] = [
    None,
    True,
    0,
    -7,
    10**30,
    1.5,
    -0.0,
    1e300,
    float("nan"),
    float("inf"),
    "s",
    [],
    {},
    [1, "a", None, [True]],
    {"b": 1, "a": {"z": [], "é": "ü"}, "": None},
]


def _contents() -> list[Content]:
    out: list[Content] = []
    for text in _TEXTS:
        out += [TextContent(text=text), ReasoningContent(text=text or None)]
    for value in _JSON:
        out += [
            FunctionResultContent(call_id="c", result=value, is_error=value is None),
            ReasoningContent(payload=value),
            OtherContent(kind="k", payload={"v": value}, call_id="c", pairing="call"),
            TextContent(text="x", extra={"v": value}),
        ]
        if isinstance(value, dict) or value is None:
            out.append(FunctionCallContent(call_id="c", name="f", arguments=value))
    out += [
        FunctionCallContent(call_id="c", name="f", arguments='{"a": 1}'),
        DataContent(data="aGk=", media_type="image/png"),
        UriContent(uri="https://x/y.png"),
        TextContent.model_construct(text=_Text("sub")),  # type: ignore[arg-type]
    ]
    return out


def _message(**fields: Any) -> Message:
    """A message as given; one holding a lone surrogate (which the model refuses, and a
    store never sees) is built without validation, so that the hash is still pinned."""
    try:
        return Message(**fields)
    except ValidationError:
        return Message.model_construct(**fields)


def _messages() -> list[Message]:
    stamps = [
        None,
        datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC),
        datetime(2025, 1, 2, 3, 4, 5, 6, tzinfo=_EAST),
        datetime(2025, 1, 2, 3, 4, 5),  # naive: taken as UTC
        datetime(5, 1, 2, 3, 4, 5, tzinfo=UTC),
    ]
    out = [
        _message(role="tool", contents=[content], message_id=f"m{i}")
        for i, content in enumerate(_contents())
    ]
    out += [
        _message(
            role="assistant",
            contents=_contents()[:6],
            author_name=name,
            created_at=stamp,
            metadata=metadata,
        )
        for stamp in stamps
        for name in (None, "bot", "é\n")
        for metadata in ({}, {"original_role": "developer", "n": [1, 2.5, {"x": None}]})
    ]
    out += [
        Message(role="custom", contents=[], allow_custom_roles=True),
        Message.model_construct(role=_Text("user"), contents=[], message_id="m", metadata={}),
    ]
    return out


@pytest.mark.parametrize("message", _messages())
def test_content_hash_matches_the_reference(message: Message) -> None:
    assert content_hash(message) == _reference_hash(message)


def _check(message: Message) -> str | None:
    digest, contents = hashed_contents(message)
    assert digest == content_hash(message) == _reference_hash(message)
    assert contents is None or contents == contents_json(message.contents)
    return contents


@pytest.mark.parametrize("message", _messages())
def test_contents_text_written_with_the_hash_is_the_adapter_s(message: Message) -> None:
    _check(message)


def test_the_field_by_field_path_writes_the_usual_messages() -> None:
    """The messages a chat import holds are written without the dump, contents too."""
    message = Message(
        role="assistant",
        contents=[
            TextContent(text='hi "you"\n\t\x01 \\ /'),
            FunctionCallContent(call_id="c", name="f", arguments='{"a": 1}'),
            FunctionResultContent(call_id="c", result="ok", is_error=True),
        ],
        created_at=datetime(2025, 1, 2, tzinfo=UTC),
        metadata={"k": ["v", 1]},
    )
    texts = storage_json._fast_texts(message)
    assert texts is not None
    canonical = "".join(texts[0])
    assert canonical == json.dumps(json.loads(canonical), sort_keys=True, separators=(",", ":"))
    assert _check(message) is not None


@pytest.mark.parametrize("text", ["é", "\x7f", "\ud800"])
def test_contents_text_of_other_strings_is_left_to_the_adapter(text: str) -> None:
    assert _check(_message(role="user", contents=[TextContent(text=text)])) is None


def test_every_message_field_is_written() -> None:
    assert set(Message.model_fields) == storage_json._MESSAGE_FIELDS
    assert storage_json._FAST_MESSAGE is Message


_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


def _content_of(text: st.SearchStrategy[str]) -> st.SearchStrategy[Content]:
    return st.one_of(
        st.builds(TextContent, text=text, extra=st.dictionaries(text, _json_values)),
        st.builds(ReasoningContent, text=st.none() | text, payload=_json_values),
        st.builds(
            FunctionCallContent,
            call_id=text,
            name=text,
            arguments=st.none() | text | st.dictionaries(text, _json_values),
        ),
        st.builds(FunctionResultContent, call_id=text, result=st.none() | text | _json_values),
        st.builds(DataContent, data=text, media_type=st.none() | text),
        st.builds(UriContent, uri=text),
        st.builds(
            OtherContent,
            kind=text,
            payload=st.dictionaries(text, _json_values),
            call_id=st.none() | text,
        ),
    )


_content = _content_of(st.text())


@settings(max_examples=300, deadline=None)
@given(
    contents=st.lists(_content, max_size=3),
    author=st.none() | st.text(),
    created=st.none() | st.datetimes(timezones=st.none() | st.timezones()),
    metadata=st.dictionaries(st.text(), _json_values, max_size=3),
)
def test_content_hash_matches_the_reference_for_any_message(
    contents: list[Content],
    author: str | None,
    created: datetime | None,
    metadata: dict[str, Any],
) -> None:
    message = Message(
        role="user", contents=contents, author_name=author, created_at=created, metadata=metadata
    )
    _check(message)


@settings(max_examples=300, deadline=None)
@given(contents=st.lists(_content_of(st.text(st.characters(max_codepoint=127))), max_size=3))
def test_contents_text_matches_the_adapter_for_ascii_text(contents: list[Content]) -> None:
    _check(Message(role="user", contents=contents))


@given(st.text(alphabet=st.characters(max_codepoint=0x7F), min_size=60, max_size=200))
def test_ascii_text_is_quoted_as_json_quotes_it(text: str) -> None:
    """Long ASCII text goes through pydantic's encoder: the same bytes as ``json``'s."""
    quoted, plain = storage_json._quoted(text)
    assert "".join(quoted) == json.encoder.encode_basestring_ascii(text)
    assert plain == ("\x7f" not in text)


@given(st.text(min_size=1, max_size=200))
def test_a_huge_text_is_quoted_by_json_and_hashed_alike(text: str) -> None:
    """Above the huge size a text is quoted by ``json`` in one part: same text, same hash."""
    message = _message(role="user", contents=[FunctionResultContent(call_id="c", result=text)])
    whole = hashed_contents(message)
    with mock.patch.object(storage_json, "_HUGE_TEXT", 0):
        quoted, plain = storage_json._quoted(text)
        assert hashed_contents(message) == whole
    assert "".join(quoted) == json.encoder.encode_basestring_ascii(text)
    assert plain == (text.isascii() and "\x7f" not in text)


def test_a_huge_text_with_nothing_to_escape_is_its_own_quoted_part() -> None:
    text = "x" * 100
    message = _message(role="user", contents=[TextContent(text=text)])
    with mock.patch.object(storage_json, "_HUGE_TEXT", 10):
        quoted, plain = storage_json._quoted(text)
        assert quoted[1] is text and plain
        written = hashed_contents(message)
    assert written == hashed_contents(message)


def test_a_canonical_text_of_long_parts_is_hashed_a_slice_at_a_time() -> None:
    message = _message(role="user", contents=[TextContent(text="a\n" * 40)])
    whole = hashed_contents(message)
    with mock.patch.object(identity, "_HASH_SLICE", 5):
        assert hashed_contents(message) == whole
