"""The one rule that turns a tool's return value into the text the model reads.

:func:`result_text` takes a ``str`` as it is; anything else becomes compact JSON
(:func:`compact_dumps`): no indentation, no space after ``,`` or ``:``, non-ASCII kept
as is (``\\u00e9`` costs more tokens than ``é``). Values JSON has no type for are
converted as pydantic converts them in JSON mode:

* pydantic models by their own serializers (aliases used), dataclasses and typed dicts
  as objects; tuples, sets and frozensets as arrays (sets in iteration order);
* ``datetime``, ``date`` and ``time`` in ISO 8601 (``2024-05-01T09:30:00Z``),
  ``timedelta`` as an ISO 8601 duration (``PT1H30M``);
* ``Decimal`` as a string (``"12.50"``, so no digit is lost), ``UUID`` as a string,
  enums by their value, ``bytes`` as UTF-8 text, ``pathlib.Path`` as a string.

Refused: NaN and the infinities (``ValueError``: JSON has no such numbers, and writing
``null`` instead would silently change the data), mapping keys other than ``str``,
``int``, ``float``, ``bool`` and ``None``, and objects of any other type
(``TypeError``, naming the type: convert them before returning).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic_core import PydanticSerializationError, to_jsonable_python

__all__ = ["compact_dumps", "result_text"]


def _jsonable(value: Any) -> Any:
    """``json.dumps``' fallback for values JSON has no type for (see the module docstring)."""
    try:
        return to_jsonable_python(value, by_alias=True)
    except PydanticSerializationError as error:
        raise TypeError(
            f"an object of type {type(value).__qualname__} has no JSON form: return JSON values, "
            f"pydantic models or dataclasses ({error})"
        ) from None


def compact_dumps(value: Any) -> str:
    """``value`` as compact JSON, by the rule of the module docstring (a ``str`` too).

    Raises:
        ValueError: the value holds NaN or an infinity, or refers to itself.
        TypeError: the value holds an object with no JSON form, or a mapping key that
            is not a ``str``, ``int``, ``float``, ``bool`` or ``None``.
    """
    try:
        return json.dumps(
            value, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_jsonable
        )
    except ValueError as error:
        if "Out of range float" in str(error):
            raise ValueError(
                "NaN and infinite numbers have no JSON form; return null or a string instead"
            ) from None
        raise


def result_text(value: Any) -> str:
    """The text a tool result is counted and sent as: a ``str`` as it is, else compact JSON."""
    return value if isinstance(value, str) else compact_dumps(value)
