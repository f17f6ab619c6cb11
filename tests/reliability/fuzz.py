"""Hostile inputs for fuzzing anything that reads outside data: reusable strategies.

Point them at a parser, converter or importer with :func:`only_raises`: whatever the
input, the call either returns or raises one of the named (the project's typed) errors,
never anything else (``RecursionError``, ``TypeError``, ``UnicodeDecodeError``, a driver
error, ...).

* :func:`hostile_text`: SQL-looking text, NUL and control characters, lone surrogates,
  right-to-left marks, huge strings;
* :func:`hostile_json`: any JSON value (and what JSON cannot hold: NaN, infinity,
  integers of thousands of digits), nested up to :data:`DEEPEST` levels;
* :func:`wrong_types`: a value of any other type than the field expects;
* :func:`malformed_json_bytes`: truncated or corrupted JSON documents, invalid UTF-8;
* :func:`hostile_mapping`: a mapping shaped like ``template`` (a message of some format)
  with each field kept, dropped, or replaced by a hostile value.

Every test using them runs under :data:`FUZZ`: a few seconds each by default; set
``CHATLEDGER_FUZZ=long`` for the long variant (many more examples, see
``docs/limits.md``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

__all__ = [
    "DEEPEST",
    "FUZZ",
    "FUZZ_EXAMPLES",
    "SQL_TEXT",
    "hostile_json",
    "hostile_mapping",
    "hostile_text",
    "malformed_json_bytes",
    "only_raises",
    "wrong_types",
]

LONG = os.environ.get("CHATLEDGER_FUZZ") == "long"
FUZZ_EXAMPLES = 2000 if LONG else 60
"""Examples per fuzz test (``CHATLEDGER_FUZZ=long`` for the long variant)."""

FUZZ = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
        HealthCheck.large_base_example,
    ],
)
"""The settings of every fuzz test."""

DEEPEST = 300
"""Deepest nesting generated: past the store's limit and what its read path parses."""

SQL_TEXT = (
    "'; DROP TABLE chatledger_messages; --",
    '" OR 1=1 --',
    "x'); DELETE FROM chatledger_sessions WHERE ('1'='1",
    "$1; SELECT pg_sleep(10)",
    "%s %(name)s :name ?",
    "\\'; --",
    "chatledger_alembic_version",
    "1; ATTACH DATABASE '/tmp/x.db' AS x; --",
)
"""Text that would do harm if it ever reached SQL as code rather than as data."""

_SURROGATE = json.loads('"\\ud800"')
_ODD = ("\x00", "\u202e", "\ufeff", "\U0001f600", "\r\n", "\t", _SURROGATE, "\\u0000")


def hostile_text(max_size: int = 40) -> st.SearchStrategy[str]:
    """Text a caller should never be trusted with."""
    odd = st.lists(st.sampled_from(_ODD), min_size=1, max_size=4).map("".join)
    huge = st.integers(1, 200_000).map(lambda n: "x" * n)
    return st.one_of(
        st.sampled_from(SQL_TEXT),
        st.text(max_size=max_size),
        odd,
        st.tuples(st.text(max_size=8), odd, st.sampled_from(SQL_TEXT)).map("".join),
        huge,
    )


def _deep(value: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    def nest(pair: tuple[int, Any]) -> Any:
        depth, leaf = pair
        for level in range(depth):
            leaf = [leaf] if level % 2 else {"k": leaf}
        return leaf

    return st.tuples(st.integers(1, DEEPEST), value).map(nest)


def hostile_json() -> st.SearchStrategy[Any]:
    """Any JSON value, and the values JSON cannot hold, some nested very deep."""
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=True, allow_infinity=True),
        st.integers(4000, 5000).map(lambda n: 10**n),
        hostile_text(),
    )
    nested = st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=4) | st.dictionaries(hostile_text(8), inner, max_size=4)
        ),
        max_leaves=12,
    )
    return st.one_of(nested, _deep(scalars))


def wrong_types() -> st.SearchStrategy[Any]:
    """A value of an unexpected type for any field."""
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(),
        st.binary(max_size=8),
        st.lists(st.integers(), max_size=3),
        st.dictionaries(st.text(max_size=3), st.integers(), max_size=3),
        st.builds(object),
        st.just(set()),
    )


def malformed_json_bytes() -> st.SearchStrategy[bytes]:
    """A JSON document cut short, with bytes flipped or invalid UTF-8 spliced in."""

    def damage(args: tuple[Any, int, bytes]) -> bytes:
        value, cut, junk = args
        try:
            text = json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")
        except (ValueError, RecursionError):
            text = b"[[[["
        cut = cut % (len(text) + 1)
        return text[:cut] + junk + text[cut:]

    junk = st.one_of(
        st.just(b""),
        st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\x00", b"}", b"]]]", b'"']),
        st.binary(max_size=6),
    )
    return st.one_of(
        st.tuples(hostile_json(), st.integers(0, 10**6), junk).map(damage),
        st.binary(max_size=64),
        st.integers(1, 5000).map(lambda n: b"[" * n + b"]" * n),
    )


def hostile_mapping(template: Mapping[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """``template`` with each field kept, dropped, or replaced by a hostile value, and
    sometimes an unknown field added."""
    fields = {key: _hostile_field(value) for key, value in template.items()}

    def build(values: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in values.items() if v is not _DROP}
        out.update(extra)
        return out

    extra = st.dictionaries(hostile_text(12), hostile_json(), max_size=2)
    return st.builds(build, st.fixed_dictionaries(fields), extra)


_DROP = object()


def _hostile_field(value: Any) -> st.SearchStrategy[Any]:
    """A field's value kept, dropped or replaced; nested mappings (and lists of them)
    are made hostile field by field too."""
    options = [st.just(value), st.just(_DROP), hostile_text(), hostile_json(), wrong_types()]
    if isinstance(value, Mapping):
        options.append(hostile_mapping(value))
    elif isinstance(value, list) and value and isinstance(value[0], Mapping):
        options.append(st.lists(hostile_mapping(value[0]), min_size=1, max_size=3))
    return st.one_of(options)


R = TypeVar("R")


def only_raises(
    call: Callable[[], R], allowed: tuple[type[BaseException], ...]
) -> R | BaseException:
    """Run ``call``: its result, or the allowed error it raised; any other error fails
    the test, naming what escaped."""
    try:
        return call()
    except allowed as error:
        return error
    except Exception as error:  # anything else is the bug being looked for
        raise AssertionError(
            f"{type(error).__name__} escaped (only {[a.__name__ for a in allowed]} may): {error}"
        ) from error
