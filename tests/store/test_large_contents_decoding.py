"""A ``contents`` text of over ``LARGE_VALUE`` characters is parsed by :mod:`json` and
its values validated (:func:`store.sql.codec.decode_contents`, and the read path's
inline form): it gives the models pydantic-core's parse of the text gives, and refuses
what it refuses with pydantic-core's own error."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from store.rules.storage_json import contents_json
from store.sql import codec
from store.sql.drivers.allocator import LARGE_VALUE
from strategies.messages import Content, FunctionResultContent
from tests.store import storage_corpus

_PAD = FunctionResultContent(call_id="pad", result="p" * LARGE_VALUE)
_PAD_JSON = contents_json([_PAD])


def _outcome(decode: Any, text: str) -> tuple[str, str]:
    try:
        return "ok", repr(decode(text))  # repr: NaN is not equal to itself
    except ValidationError as error:
        return "refused", str(error)


@pytest.mark.parametrize("content", storage_corpus.contents(), ids=repr)
def test_every_content_decodes_as_pydantic_core_decodes_it(content: Content) -> None:
    text = contents_json([content, _PAD])
    assert len(text) > LARGE_VALUE
    large = _outcome(lambda t: codec.decode_contents("t", "s", 1, t), text)
    assert large == _outcome(codec._validate_contents, text)


@pytest.mark.parametrize(
    "item",
    [
        '{"type":"text","text":"a\\ud800b"}',  # a lone surrogate's escape
        '{"type":"text","text":"a\\ud83d\\ude42b"}',  # a pair
        '{"type":"text","text":"a\x01b"}',  # a raw control character
        '{"type":"function_result","call_id":"c","result":' + "[" * 3000 + "]" * 3000 + "}",
        '{"type":"text","text":5}',
        '{"type":"text","text":"a","zz":1}',
        '{"type":"text","text":"a","text":"b"}',
        '{"type":"function_result","call_id":"c","result":NaN}',
        '{"type":"function_result","call_id":"c","result":1e400}',
        '{"type":"nope"}',
    ],
)
def test_what_pydantic_core_refuses_is_refused_with_its_error(item: str) -> None:
    for text in (f"[{item},{_PAD_JSON[1:]}", f"[{item},{_PAD_JSON[1:]} x", f"\ufeff[{item}]"):
        padded = text if len(text) > LARGE_VALUE else text + " " * LARGE_VALUE
        large = _outcome(lambda t: codec.decode_contents("t", "s", 1, t), padded)
        assert large == _outcome(codec._validate_contents, padded)


@pytest.mark.parametrize("size", [10, LARGE_VALUE])
def test_the_read_paths_inline_form_decodes_as_pydantic_core(size: int) -> None:
    text = contents_json([FunctionResultContent(call_id="c", result='a "b"\té\n' * size)])
    inline = codec.INLINE["contents"]
    decoded = eval(inline.expression.format(v="text"), dict(inline.names), {"text": text})
    assert decoded == codec._validate_contents(text)
