"""The limits accept at a glance only what their full walk accepts, and refuse alike.

:func:`store.rules.limits.check_stored_message` skips the walk of a content whose
fields are ASCII text, None, flags or empty containers; whatever it is given, its
verdict and sentence are those of :func:`store.rules.limits.check_json` on every field.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from store.errors import InvalidInput
from store.rules.limits import DEFAULT_LIMITS, Limits, check_json, check_stored_message
from strategies.messages import FunctionResultContent, Message, TextContent

SURROGATE = json.loads('"\\ud800"')

_TEXT = st.one_of(st.text(max_size=8), st.just(SURROGATE), st.just("é"), st.just("a\x7f"))
_SCALAR = st.one_of(
    _TEXT,
    st.none(),
    st.booleans(),
    st.integers(),
    st.just(10**1001),
    st.floats(allow_nan=True, allow_infinity=True),
)
_JSON = st.recursive(
    _SCALAR,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=12,
)


def _walked(message: Message, limits: Limits) -> str | None:
    """The sentence of the full walk of every content's fields (None: accepted)."""
    try:
        for index, content in enumerate(message.contents):
            check_json(content.__dict__, f"contents[{index}] of message 'm'", limits, -1)
    except InvalidInput as error:
        return str(error)
    return None


def _glanced(message: Message, limits: Limits) -> str | None:
    try:
        check_stored_message(message, limits)
    except InvalidInput as error:
        return str(error)
    return None


def _message(*contents: Any) -> Message:
    values = {"role": "tool", "contents": list(contents), "message_id": "m"}
    return Message.model_construct(author_name=None, created_at=None, metadata={}, **values)


@given(result=_JSON, text=_TEXT)
def test_any_content_gets_the_full_walks_verdict(result: Any, text: str) -> None:
    message = _message(
        TextContent.model_construct(text=text, extra={}),
        FunctionResultContent.model_construct(call_id="c", result=result, extra={}),
    )
    for limits in (DEFAULT_LIMITS, Limits(max_json_depth=1, max_int_digits=3)):
        assert _glanced(message, limits) == _walked(message, limits)


@pytest.mark.parametrize("extra", [{}, {"k": SURROGATE}, {"k": [[]]}])
def test_extra_is_walked_unless_empty(extra: dict[str, Any]) -> None:
    message = _message(TextContent.model_construct(text="x", extra=extra))
    tight = Limits(max_json_depth=1)
    assert _glanced(message, tight) == _walked(message, tight)
    assert (_glanced(message, tight) is None) == (extra == {})
