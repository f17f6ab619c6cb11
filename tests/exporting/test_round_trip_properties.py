"""Round trips come home, property-tested: generated sessions (text, reasoning, parallel
calls kept in one message or one message a call, results in one message or one each,
media, other formats' contents, authors, times, metadata), exported in every format
and imported into the same store (nothing new) and as another session (the same
messages), on SQLite and PostgreSQL."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store import HistoryStore
from store.exporting import EXPORT_FORMATS
from store.importing import import_sources
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
from tests.exporting.targets import TARGET_CHECKS, check_document
from tests.exporting.test_round_trips import export_file, messages_of

_counter = itertools.count()

_text = st.text(
    st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12
) | st.sampled_from(["sunny", "東京", "naïve café", "🙂", ""])
_leaf = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | _text
_json: st.SearchStrategy[Any] = st.recursive(
    _leaf | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=5,
)
_extra = st.dictionaries(st.sampled_from(["x_meta", "cache", "annotations"]), _json, max_size=1)
_metadata = st.dictionaries(st.sampled_from(["tag", "run", "score"]), _json, max_size=2)
_times = st.none() | st.datetimes(
    min_value=datetime(2020, 1, 1), max_value=datetime(2030, 1, 1), timezones=st.just(UTC)
)


@st.composite
def _answer(draw: st.DrawFn) -> list[Content]:
    contents: list[Content] = []
    if draw(st.booleans()):
        payload = draw(st.none() | st.fixed_dictionaries({"signature": _text}))
        contents.append(ReasoningContent(text=draw(st.none() | _text), payload=payload))
    contents += [TextContent(text=t, extra=draw(_extra)) for t in draw(st.lists(_text, max_size=2))]
    return contents


@st.composite
def _user(draw: st.DrawFn) -> list[Content]:
    contents: list[Content] = [TextContent(text=draw(_text))]
    media = draw(st.sampled_from(["none", "data", "uri", "other"]))
    media_type = draw(st.sampled_from([None, "image/png", "application/pdf", "audio/wav"]))
    if media == "data":
        contents.append(DataContent(data="iVBORw0K", media_type=media_type))
    elif media == "uri":
        contents.append(UriContent(uri="https://example.test/a", media_type=media_type))
    elif media == "other":
        contents.append(OtherContent(kind="citation", payload={"cited": draw(_text)}))
    return contents


def _call(call_id: str, arguments: str | dict[str, Any] | None) -> FunctionCallContent:
    return FunctionCallContent(call_id=call_id, name="weather", arguments=arguments)


@st.composite
def _tool_round(draw: st.DrawFn, turn: int) -> list[Message]:
    """One model turn of one to three parallel calls, then their results."""
    ids = [f"call-{turn}-{n}" for n in range(draw(st.integers(1, 3)))]
    arguments = st.none() | st.just('{"city": "Paris"}') | st.dictionaries(_text, _json, max_size=2)
    calls = [_call(call_id, draw(arguments)) for call_id in ids]
    lead = draw(_answer())
    if draw(st.booleans()):  # as the Responses API keeps them: a message a call
        messages = [Message(role="assistant", contents=lead)] if lead else []
        messages += [Message(role="assistant", contents=[call]) for call in calls]
    else:
        messages = [Message(role="assistant", contents=[*lead, *calls])]
    results = [
        FunctionResultContent(
            call_id=call_id, result=draw(_json | _text), is_error=draw(st.booleans())
        )
        for call_id in ids
    ]
    if draw(st.booleans()):
        messages.append(Message(role="tool", contents=results))
    else:
        messages += [Message(role="tool", contents=[result]) for result in results]
    return messages


@st.composite
def sessions(draw: st.DrawFn) -> list[Message]:
    """A session: maybe a system prompt, then turns of a user message, tool rounds and
    an answer, each message with an author, a time and metadata drawn."""
    drafts: list[Message] = []
    if draw(st.booleans()):
        drafts.append(Message.text_message("system", draw(_text)))
    for turn in range(draw(st.integers(1, 3))):
        drafts.append(Message(role="user", contents=draw(_user())))
        for round_ in range(draw(st.integers(0, 2))):
            drafts += draw(_tool_round(turn * 10 + round_))
        drafts.append(Message(role="assistant", contents=draw(_answer())))
    start = draw(_times)
    return [
        message.model_copy(
            update={
                "author_name": draw(st.none() | st.sampled_from(["ada", "forecaster"])),
                "created_at": None if start is None else start + timedelta(seconds=index),
                "metadata": draw(_metadata),
            }
        )
        for index, message in enumerate(drafts)
    ]


@pytest.mark.parametrize("fmt", EXPORT_FORMATS)
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(session=sessions())
async def test_every_format_round_trips_generated_sessions(
    store: HistoryStore, tmp_path: Path, fmt: str, session: list[Message]
) -> None:
    session_id = f"s{next(_counter)}/{fmt}"
    await store.append(session_id, session)
    stored = await messages_of(store, session_id)
    folder = tmp_path / session_id
    folder.mkdir(parents=True)
    path = await export_file(store, [session_id], fmt, folder)
    if fmt in TARGET_CHECKS:
        text = path.read_text(encoding="utf-8")
        document = json.loads(text)
        check_document(fmt, document[0] if isinstance(document, list) else document)
    again = await import_sources(store, [path])
    assert (again.new, again.already_stored) == (0, len(stored))
    copy = await import_sources(store, [path], session_prefix="copy/")
    assert copy.new == len(stored)
    assert await messages_of(store, f"copy/{session_id}") == stored
