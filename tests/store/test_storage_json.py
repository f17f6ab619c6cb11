"""The storage format's JSON is written as the release before it wrote it.

Stored databases dedupe against the content hash, so :func:`content_hash` must give the
bytes it gave, for every message; the ``contents`` and ``metadata`` column texts of an
appended row must be the ones written before (byte for byte), and the texts of the
rows other writes make (summaries, reductions, tombstones) must read back, with the
reader of that release, as what it read from its own.

Two oracles: ``storage_vectors.json``, the hash and the digests of the column texts of
every message of :mod:`tests.store.storage_corpus`, recorded with that release; and the
writers of that release, copied as they were (:mod:`tests.store.storage_oracle`, and
its readers below), against which hypothesis draws messages of every content type, with
non-ASCII text, lone surrogates, non-finite floats and nested ``extra`` dicts.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from store.rules.identity import content_hash, hashed_contents
from store.rules.storage_json import (
    canonical_json,
    content_fields,
    contents_json,
    message_value,
    object_json,
    reduced_json,
)
from store.sql import codec
from strategies.messages import (
    CONTENTS_ADAPTER,
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
from tests.store import storage_oracle as oracle
from tests.store.storage_corpus import messages

VECTORS = Path(__file__).with_name("storage_vectors.json")

# --- the release before: what it wrote and how it read -------------------------------


def _old_metadata_text(message: Message) -> str:
    """The ``metadata`` column of an appended row."""
    return oracle._METADATA_JSON.encode(message.metadata) if message.metadata else "{}"


def _old_summary_texts(message: Message) -> tuple[str, str]:
    """The ``contents`` and ``metadata`` columns of a summary or a tombstone (SQLAlchemy's
    JSON type wrote them, with ``json.dumps``)."""
    contents = CONTENTS_ADAPTER.dump_python(message.contents, mode="json")
    return json.dumps(contents), json.dumps(message.metadata)


def _old_reduced_text(message: Message) -> str:
    """The ``reduced_contents`` column (SQLAlchemy's JSON type wrote it)."""
    value = {
        "contents": CONTENTS_ADAPTER.dump_python(message.contents, mode="json"),
        "metadata": message.metadata,
        "role": message.role,
        "author_name": message.author_name,
    }
    return json.dumps(value)


def _old_read_message(base: Message, contents: str, metadata: str) -> Message:
    """A row's message as that release read it (its general mapping)."""
    fields = base.model_dump()
    fields.update(contents=json.loads(contents), metadata=json.loads(metadata) or {})
    return Message.model_validate(fields, context={"allow_custom_roles": True})


def _old_read_reduced(base: Message, text: str) -> Message:
    value = json.loads(text)
    fields = base.model_dump()
    if isinstance(value, dict) and "contents" in value:
        fields.update({k: value[k] for k in ("metadata", "role", "author_name") if k in value})
        value = value["contents"]
    fields["contents"] = value
    return Message.model_validate(fields, context={"allow_custom_roles": True})


def _same(a: Message, b: Message) -> bool:
    """Equal messages (NaN equal to NaN, as their JSON texts are)."""
    dump = {"mode": "json", "round_trip": True}
    return json.dumps(a.model_dump(**dump), sort_keys=True) == json.dumps(
        b.model_dump(**dump), sort_keys=True
    )


# --- the recorded vectors ------------------------------------------------------------


def _digest(text: str | None) -> str | None:
    if text is None:
        return None
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _recorded() -> list[tuple[Message, list[Any]]]:
    vectors = json.loads(VECTORS.read_text())
    corpus = messages()
    assert [v[0] for v in vectors] == [m.message_id for m in corpus]
    return list(zip(corpus, vectors, strict=True))


@pytest.mark.parametrize(
    ("message", "vector"), _recorded(), ids=lambda x: getattr(x, "message_id", "")
)
def test_every_recorded_message_is_written_as_it_was(message: Message, vector: list[Any]) -> None:
    _, digest, contents, written, metadata = vector
    assert content_hash(message) == digest
    assert hashed_contents(message) == (digest, _written(message, written))
    assert _digest(contents_json(message.contents)) == contents
    assert _digest(object_json(message.metadata)) == metadata


def _written(message: Message, recorded: str | None) -> str | None:
    """The ``contents`` text hashing wrote, when the recorded digest says it wrote one."""
    if recorded is None:
        return None
    text = contents_json(message.contents)
    assert _digest(text) == recorded
    return text


def test_the_corpus_holds_what_the_writers_treat_apart() -> None:
    corpus = messages()
    written = [hashed_contents(m)[1] for m in corpus]
    assert any(text is not None for text in written)  # the field-by-field path
    assert any(text is None for text in written)  # the dump's
    kinds = {type(c) for m in corpus for c in m.contents}
    assert kinds == {
        TextContent,
        ReasoningContent,
        FunctionCallContent,
        FunctionResultContent,
        DataContent,
        UriContent,
        OtherContent,
    }


# --- drawn messages against the release before ---------------------------------------

_ANY_CHARS = st.characters(codec=None, categories=None)  # lone surrogates included
_STORABLE_CHARS = st.characters(blacklist_categories=("Cs",))


def _json_of(chars: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    return st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=True, allow_infinity=True)
        | st.text(chars, max_size=8),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(st.text(chars, max_size=4), inner, max_size=3)
        ),
        max_leaves=8,
    )


def _contents(
    text: st.SearchStrategy[str], _json: st.SearchStrategy[Any]
) -> st.SearchStrategy[Content]:
    extra = st.dictionaries(text, _json, max_size=2)
    return st.one_of(
        st.builds(TextContent, text=text, extra=extra),
        st.builds(ReasoningContent, text=st.none() | text, payload=_json, extra=extra),
        st.builds(
            FunctionCallContent,
            call_id=text,
            name=text,
            arguments=st.none() | text | st.dictionaries(text, _json, max_size=3),
            extra=extra,
        ),
        st.builds(
            FunctionResultContent,
            call_id=text,
            result=st.none() | text | _json,
            is_error=st.booleans(),
            extra=extra,
        ),
        st.builds(DataContent, data=text, media_type=st.none() | text, extra=extra),
        st.builds(UriContent, uri=text, media_type=st.none() | text, extra=extra),
        st.builds(
            OtherContent,
            kind=text,
            payload=st.dictionaries(text, _json, max_size=3),
            call_id=st.none() | text,
            pairing=st.sampled_from(["call", "result", "none"]),
            extra=extra,
        ),
    )


def _message(
    contents: list[Content],
    author: str | None,
    created: datetime | None,
    metadata: dict[str, Any],
    role: str = "assistant",
) -> Message:
    fields = {
        "role": role,
        "contents": contents,
        "author_name": author,
        "created_at": created,
        "metadata": metadata,
    }
    try:
        return Message(**fields)
    except ValidationError:  # a lone surrogate: built as given (the hash is still pinned)
        return Message.model_construct(**fields)


def _drawn(chars: st.SearchStrategy[str], size: int) -> st.SearchStrategy[Message]:
    text, values = st.text(chars, max_size=size), _json_of(chars)
    return st.builds(
        _message,
        contents=st.lists(_contents(text, values), max_size=3),
        author=st.none() | text,
        created=st.none() | st.datetimes(timezones=st.none() | st.timezones()),
        metadata=st.dictionaries(text, values, max_size=3),
        role=st.sampled_from(["system", "user", "assistant", "tool"]),
    )


_ANY = _drawn(_ANY_CHARS, 12)
_ASCII = _drawn(st.characters(max_codepoint=0x7F), 80)
_STORABLE = _drawn(_STORABLE_CHARS, 12)
"""Messages a store accepts (no lone surrogate)."""


@settings(max_examples=400, deadline=None)
@given(message=st.one_of(_ANY, _ASCII))
def test_the_hash_and_the_appended_texts_are_the_release_before_s(message: Message) -> None:
    assert hashed_contents(message) == oracle.hashed_contents(message)
    assert content_hash(message) == oracle.content_hash(message)
    assert contents_json(message.contents) == oracle.contents_text(message)
    assert object_json(message.metadata) == _old_metadata_text(message)
    assert canonical_json(message) == _old_canonical_text(message)


def _old_canonical_text(message: Message) -> str:
    texts = oracle._fast_canonical_json(message)
    return texts[0] if texts is not None else oracle._canonical_json(oracle._canonical(message))


@settings(max_examples=200, deadline=None)
@given(message=_STORABLE)
def test_the_other_writes_read_back_as_the_release_before_read_its_own(message: Message) -> None:
    contents, metadata = contents_json(message.contents), object_json(message.metadata)
    old_contents, old_metadata = _old_summary_texts(message)
    assert _same(
        _old_read_message(message, contents, metadata),
        _old_read_message(message, old_contents, old_metadata),
    )
    base = Message(role="tool", contents=[TextContent(text="base")], metadata={"k": 1})
    assert _same(
        _old_read_reduced(base, reduced_json(message)),
        _old_read_reduced(base, _old_reduced_text(message)),
    )


@settings(max_examples=200, deadline=None)
@given(message=_STORABLE)
def test_the_codec_reads_back_what_it_wrote(message: Message) -> None:
    place = ("tenant", "session", 7)
    contents = codec.encode_contents(*place, message.contents)
    assert _same_contents(codec.decode_contents(*place, contents), message.contents)
    metadata = codec.decode_metadata(*place, codec.encode_metadata(*place, message.metadata))
    assert json.dumps(metadata, sort_keys=True) == json.dumps(message.metadata, sort_keys=True)
    overlay = codec.decode_reduced(*place, codec.encode_reduced(*place, message))
    assert _same(Message(**{**message.model_dump(), **overlay}), message)


def _inline(column: str, text: str | None) -> Any:
    """What :data:`codec.INLINE`'s expression of ``column`` gives for ``text``."""
    found = codec.INLINE[column]
    names = {**found.names, "tenant": "t", "session_id": "s", "seq": 7, "text": text}
    return eval(found.expression.format(v="text"), {}, names)


@settings(max_examples=100, deadline=None)
@given(message=_STORABLE)
def test_the_inline_decoding_is_the_codecs(message: Message) -> None:
    place = ("t", "s", 7)
    contents = codec.encode_contents(*place, message.contents)
    assert _same_contents(_inline("contents", contents), codec.decode_contents(*place, contents))
    metadata = codec.encode_metadata(*place, message.metadata)
    assert _inline("metadata", metadata) == codec.decode_metadata(*place, metadata)


@pytest.mark.parametrize("text", [None, "{}", '{"a":1}', "[1]", "3", "not json"])
def test_the_inline_metadata_refuses_as_the_codec_does(text: str | None) -> None:
    try:
        expected = codec.decode_metadata("t", "s", 7, text)
    except ValueError as error:
        with pytest.raises(type(error)):
            _inline("metadata", text)
    else:
        assert _inline("metadata", text) == expected


def _same_contents(a: list[Content], b: list[Content]) -> bool:
    return json.dumps(CONTENTS_ADAPTER.dump_python(a, mode="json"), sort_keys=True) == json.dumps(
        CONTENTS_ADAPTER.dump_python(b, mode="json"), sort_keys=True
    )


def test_hashing_hands_its_contents_text_to_the_codec() -> None:
    message = Message(role="user", contents=[TextContent(text="hi")])
    written = hashed_contents(message)[1]
    assert written is not None
    assert codec.encode_contents("t", "s", 1, message.contents, written) is written


@pytest.mark.parametrize(
    ("encode", "decode"),
    [
        (codec.encode_session_metadata, codec.decode_session_metadata),
        (
            lambda t, s, v: codec.encode_event_params(t, s, "e", v),
            lambda t, s, v: codec.decode_event_params(t, s, "e", v),
        ),
        (
            lambda t, s, v: codec.encode_event_note(t, s, "e", v),
            lambda t, s, v: codec.decode_event_note(t, s, "e", v),
        ),
    ],
    ids=["session metadata", "event params", "event note"],
)
def test_object_columns_round_trip_and_refuse_what_is_no_object(encode: Any, decode: Any) -> None:
    value = {"b": [1, "é", None], "a": {"x": 1.5}}
    text = encode("t", "s", value)
    assert text == '{"b":[1,"\\u00e9",null],"a":{"x":1.5}}'
    assert decode("t", "s", text) == value == json.loads(text)
    assert decode("t", "s", None) == decode("t", "s", "{}") == {}
    with pytest.raises(ValueError, match="not a JSON object"):
        decode("t", "s", "[1]")


def test_the_json_values_are_the_models_dumps() -> None:
    message = Message(
        role="assistant",
        contents=[FunctionCallContent(call_id="c", name="f", arguments={"a": 1}, extra={"x": 1})],
        created_at=datetime(2025, 1, 2, tzinfo=UTC),
    )
    assert message_value(message) == message.model_dump(mode="json")
    assert content_fields(message.contents[0]) == {
        "call_id": "c",
        "name": "f",
        "arguments": {"a": 1},
    }
