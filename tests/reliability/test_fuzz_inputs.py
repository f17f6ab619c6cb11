"""Fuzzing what reads outside data: the message model and its JSON, the converters of
other systems' messages, and ``append`` on SQLite and PostgreSQL.

Whatever the input (malformed JSON, deep nesting, huge strings, invalid UTF-8, wrong
types, SQL-looking text in every field), only the project's typed errors come out:
``ValidationError`` (a ``ValueError`` naming the field) from the model,
:class:`~store.formats.FormatError` from a converter, :class:`~store.errors.InvalidInput`
from ``append``; a refused append writes nothing, and SQL text is stored as data.
Bounded by :data:`tests.reliability.fuzz.FUZZ` (``CHATLEDGER_FUZZ=long`` for more).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from store import HistoryStore
from store.errors import InvalidInput
from store.formats import (
    FormatError,
    from_agent_framework,
    from_openai_chat,
    to_agent_framework,
    to_openai_chat,
)
from strategies.messages import (
    CONTENTS_ADAPTER,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    ReasoningContent,
    TextContent,
)
from tests.reliability.fuzz import (
    FUZZ,
    FUZZ_EXAMPLES,
    SQL_TEXT,
    hostile_json,
    hostile_mapping,
    hostile_text,
    malformed_json_bytes,
    only_raises,
    wrong_types,
)

SAMPLES = [
    Message.text_message("user", "hi", author_name="bob", metadata={"k": [1, "v"]}),
    Message(
        role="assistant",
        contents=[
            ReasoningContent(text="think"),
            TextContent(text="x"),
            FunctionCallContent(call_id="c1", name="f", arguments={"a": 1}),
        ],
    ),
    Message(role="tool", contents=[FunctionResultContent(call_id="c1", result={"rows": [1]})]),
]
"""What the templates are made of: one message of each common shape."""

MODEL_TEMPLATES = [m.model_dump(mode="json") for m in SAMPLES]
OPENAI_TEMPLATES = to_openai_chat(SAMPLES, with_ids=True)
AF_TEMPLATES = to_agent_framework(SAMPLES)


def _items(templates: list[dict[str, Any]]) -> st.SearchStrategy[Any]:
    """A list of hostile messages in a format, or something that is no list at all."""
    one = st.one_of(*(hostile_mapping(t) for t in templates))
    return st.one_of(st.lists(one, max_size=3), wrong_types(), hostile_text())


@FUZZ
@given(data=malformed_json_bytes())
def test_message_json_raises_only_validation_errors(data: bytes) -> None:
    only_raises(lambda: Message.model_validate_json(data), (ValidationError,))
    only_raises(lambda: CONTENTS_ADAPTER.validate_json(data), (ValidationError,))


@FUZZ
@given(fields=st.one_of(*(hostile_mapping(t) for t in MODEL_TEMPLATES)))
def test_the_message_model_raises_only_validation_errors(fields: dict[str, Any]) -> None:
    built = only_raises(lambda: Message.model_validate(fields), (ValidationError,))
    if isinstance(built, Message):  # what the model takes, its storage form gives back
        assert Message.model_validate_json(built.model_dump_json()) == built


@FUZZ
@given(items=_items(OPENAI_TEMPLATES))
def test_openai_chat_raises_only_format_errors(items: Any) -> None:
    read = only_raises(lambda: from_openai_chat(items), (FormatError,))
    if isinstance(read, list):
        only_raises(lambda: to_openai_chat(read, with_ids=True), ())


@FUZZ
@given(items=_items(AF_TEMPLATES))
def test_agent_framework_raises_only_format_errors(items: Any) -> None:
    read = only_raises(lambda: from_agent_framework(items), (FormatError,))
    if isinstance(read, list):
        only_raises(lambda: to_agent_framework(read), ())


def _message(
    role: str, text: str, call_id: str, result: Any, arguments: Any, metadata: Any, index: int
) -> Message:
    contents: list[Any] = [TextContent(text=text)]
    if role == "assistant":
        contents.append(
            FunctionCallContent(call_id=call_id, name=text[:40] or "f", arguments=arguments)
        )
    elif role == "tool":
        contents = [FunctionResultContent(call_id=call_id, result=result)]
    return Message(
        role=role,
        contents=contents,
        message_id=f"{text[:60]}-{index}",
        author_name=text[:300] or None,
        metadata=metadata if isinstance(metadata, dict) else {"value": metadata},
    )


_MESSAGE_FIELDS = st.tuples(
    st.sampled_from(["user", "assistant", "tool", "system"]),
    hostile_text(),
    hostile_text(),
    hostile_json(),
    st.one_of(hostile_json(), hostile_text()),
    hostile_json(),
)


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
@settings(FUZZ, max_examples=max(10, FUZZ_EXAMPLES // 6))
@given(fields=st.lists(_MESSAGE_FIELDS, min_size=1, max_size=3), session=hostile_text())
async def test_append_refuses_with_invalid_input_and_writes_nothing(
    store: HistoryStore, fields: list[tuple[Any, ...]], session: str
) -> None:
    try:
        batch = [_message(*f, index=i) for i, f in enumerate(fields)]
    except ValueError:
        return  # the model refused it: nothing reached the store
    before = {s.session_id for s in await store.sessions(limit=1000)}
    outcome = await _append(store, session, batch)
    if isinstance(outcome, InvalidInput):
        assert {s.session_id for s in await store.sessions(limit=1000)} == before
        return
    assert [m.message for m in await store.history(session)] == batch
    await store.delete_session(session)


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
async def test_sql_text_in_every_field_is_stored_as_data(store: HistoryStore) -> None:
    for index, text in enumerate(SQL_TEXT):
        message = _message("assistant", text, text, text, {text: text}, {text: [text]}, index)
        answer = _message("tool", text, text, text, text, text, 100 + index)
        await store.append(text, [message, answer])
        await store.set_metadata(text, {text: text})
    for text in SQL_TEXT:
        history = await store.history(text)
        assert history[0].message.text == text and history[0].message.metadata == {text: [text]}
        assert history[1].message.contents[0] == FunctionResultContent(call_id=text, result=text)
        assert await store.get_metadata(text) == {text: text}
    assert {s.session_id for s in await store.sessions(limit=100)} == set(SQL_TEXT)


async def _append(store: HistoryStore, session: str, batch: list[Message]) -> object:
    try:
        return await store.append(session, batch)
    except InvalidInput as error:
        return error
    except Exception as error:  # anything else is the bug being looked for
        raise AssertionError(f"{type(error).__name__} escaped append: {error}") from error


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
@pytest.mark.parametrize("call_id", ["a\x00b", "c" * 256], ids=["nul", "too-long"])
async def test_a_call_id_no_id_column_holds_is_invalid_input(
    store: HistoryStore, call_id: str
) -> None:
    """Found by the fuzzing: PostgreSQL refused these with a database error, SQLite
    stored them."""
    call = _message("assistant", "x", call_id, None, {}, {}, 0)
    with pytest.raises(InvalidInput, match="call_id of contents"):
        await store.append("s", [call])
    assert await store.sessions() == []


@pytest.mark.parametrize(
    ("convert", "item"),
    [
        (from_openai_chat, {"role": "user", "content": 10**4300}),
        (from_agent_framework, {"type": 10**4300, "role": "user", "contents": []}),
        (from_agent_framework, {"type": "x" * 200_000, "role": "user", "contents": []}),
    ],
    ids=["chat-huge-int", "af-huge-int", "af-huge-text"],
)
def test_a_refused_value_is_quoted_short_and_never_fails_to_show(
    convert: Any, item: dict[str, Any]
) -> None:
    # found by the long fuzz run: repr() of an int past Python's digit limit raises
    with pytest.raises(FormatError) as refused:
        convert([item])
    assert len(str(refused.value)) < 200 and "\n" not in str(refused.value)
