"""What every backend accepts: documented limits, checked before anything is written.

Each backend must store exactly what the other stores, and read back everything it
stored. The limits below are what the SQL schema can hold (ids of 255 characters, roles
of 64) and what the read path can parse; both backends refuse anything beyond them with
:class:`~store.errors.InvalidInput`, naming the field. They are configurable per store
(``HistoryStore.open(..., limits=Limits(max_json_depth=32))``), within what the
database can hold.

Values a message carries must also be data that every database and JSON reader keeps
as it was given: no lone surrogate in any text (see
:func:`strategies.messages.has_lone_surrogate`), no NaN or infinity, no integer of more
than ``max_int_digits`` digits, and JSON nested no deeper than ``max_json_depth``
levels, counted within each value a caller gives (the metadata mapping, or a content's
result or arguments: a value holding a list of scalars is two levels deep).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from store.errors import InvalidInput
from strategies.messages import Message, has_lone_surrogate

__all__ = [
    "DEFAULT_LIMITS",
    "MAX_APPEND_MESSAGES",
    "SQL_KEY_LENGTH",
    "Limits",
    "check_json",
    "check_stored_message",
    "fits",
    "json_depth",
]

SQL_KEY_LENGTH = 255
"""Characters of an id column (session, message, group, call, tenant)."""
MAX_JSON_DEPTH = 128
"""The deepest ``max_json_depth`` a store may be given."""
MAX_APPEND_MESSAGES = 1_000_000
"""The largest :attr:`Limits.max_append_messages` a store may be given."""


@dataclass(frozen=True, slots=True)
class Limits:
    """The largest values a store accepts."""

    max_id_length: int = SQL_KEY_LENGTH
    """Characters of a session id, tenant, message id, call id or author name."""
    max_role_length: int = 64
    """Characters of a role."""
    max_json_depth: int = 64
    """Nesting of lists and objects in a content's JSON values or in metadata (the read
    path parses some 200 levels; this leaves a wide margin)."""
    max_int_digits: int = 1000
    """Digits of an integer in JSON (Python refuses to print one of over 4,300)."""
    max_append_messages: int = 100_000
    """Messages of one append (one transaction, held in memory while it is written, about
    1 kB a small message); a larger history goes in with ``chatledger import``, which
    streams it."""

    def __post_init__(self) -> None:
        if not 0 < self.max_id_length <= SQL_KEY_LENGTH or not 0 < self.max_role_length <= 64:
            raise InvalidInput(
                f"limits: ids hold at most {SQL_KEY_LENGTH} characters and roles 64 "
                "(what the database columns hold)"
            )
        if not 0 < self.max_json_depth <= MAX_JSON_DEPTH or not 0 < self.max_int_digits <= 4000:
            raise InvalidInput(
                f"limits: max_json_depth must be 1 to {MAX_JSON_DEPTH}, max_int_digits 1 to 4000"
            )
        if not 0 < self.max_append_messages <= MAX_APPEND_MESSAGES:
            raise InvalidInput(f"limits: max_append_messages must be 1 to {MAX_APPEND_MESSAGES:,}")

    def too_many(self) -> InvalidInput:
        """The refusal of an append of more than ``max_append_messages`` messages."""
        return InvalidInput(
            f"an append holds at most {self.max_append_messages:,} messages "
            "(Limits.max_append_messages): write a larger history with `chatledger import`, "
            "which streams it, or in several appends"
        )

    def check_id(self, value: str, name: str) -> None:
        """Refuse an id that is too long or is not text."""
        if len(value) > self.max_id_length:
            raise InvalidInput(
                f"{name} has {len(value)} characters, more than the {self.max_id_length} "
                "a store keeps"
            )
        if has_lone_surrogate(value):
            raise InvalidInput(f"{name} holds a lone surrogate, which is not text")


DEFAULT_LIMITS = Limits()


def _scalar_problem(value: object, limits: Limits) -> str | None:
    if isinstance(value, str):
        return "holds a lone surrogate, which is not text" if has_lone_surrogate(value) else None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"is {value}: JSON has no NaN or infinity"
    if isinstance(value, int) and not isinstance(value, bool):
        too_long = abs(value) >= 10**limits.max_int_digits
        return f"has more than {limits.max_int_digits} digits" if too_long else None
    return None


def _problem(value: object, limits: Limits, depth: int) -> tuple[list[object], str] | None:
    """What is wrong in ``value`` and where (the keys and indexes down to it), or None;
    the path is built only for a value that is refused."""
    if depth > limits.max_json_depth:
        return [], f"is nested deeper than {limits.max_json_depth} levels (the limit a store keeps)"
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and has_lone_surrogate(key):
                return [], "has a key holding a lone surrogate"
            found = _problem(item, limits, depth + 1)
            if found is not None:
                found[0].insert(0, key)
                return found
        return None
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = _problem(item, limits, depth + 1)
            if found is not None:
                found[0].insert(0, index)
                return found
        return None
    reason = _scalar_problem(value, limits)
    return None if reason is None else ([], reason)


def json_depth(value: object, bound: int) -> int:
    """How deep ``value`` nests lists and objects (a scalar is 0), counted without
    recursion (so any depth can be measured) and no further than ``bound + 1``."""
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            inner: list[object] = list(item.values())
        elif isinstance(item, list | tuple):
            inner = list(item)
        else:
            continue
        deepest = max(deepest, depth + 1)
        if deepest > bound:
            return deepest
        stack.extend((each, depth + 1) for each in inner if isinstance(each, dict | list | tuple))
    return deepest


def check_json(value: object, where: str, limits: Limits, depth: int = 0) -> None:
    """Refuse JSON that a store could not keep as given (see the module docstring)."""
    found = _problem(value, limits, depth)
    if found is not None:
        path, reason = found
        raise InvalidInput(f"{where}{''.join(f'[{step!r}]' for step in path)} {reason}")


def fits(value: str, limits: Limits) -> bool:
    """Whether :meth:`Limits.check_id` must accept ``value`` without looking further:
    short enough and ASCII (which holds no surrogate)."""
    return len(value) <= limits.max_id_length and value.isascii()


def _plain_fields(values: Mapping[str, object]) -> bool:
    """Whether :func:`check_json` must accept a content's fields without walking them:
    every value is ASCII text, None, a bool, or an empty list or mapping (no surrogate,
    no number, no nesting: the usual text, call and result)."""
    for value in values.values():
        if isinstance(value, str):
            if not value.isascii():
                return False
        elif value is not None and type(value) is not bool and (type(value) not in _EMPTY or value):
            return False
    return True


_EMPTY = (dict, list)
"""The container types whose empty value :func:`_plain_fields` accepts."""


def _name(message: Message) -> str:
    """How a refusal names ``message``."""
    return f"message {message.message_id[:80]!r}"


def check_stored_message(message: Message, limits: Limits) -> None:
    """Refuse a message a store could not keep exactly as given.

    Values no limit can refuse (short ASCII ids, a content of ASCII text and flags) are
    accepted at a glance; anything else, and every refusal, goes through the full checks,
    whose sentence names the field.
    """
    message_id, author = message.message_id, message.author_name
    if not fits(message_id, limits):
        limits.check_id(message_id, f"message_id of {_name(message)}")
    if len(message.role) > limits.max_role_length:
        raise InvalidInput(
            f"role of {_name(message)} has {len(message.role)} characters, more than "
            f"{limits.max_role_length}"
        )
    if author is not None and not fits(author, limits):
        limits.check_id(author, f"author_name of {_name(message)}")
    if message.created_at is not None:
        try:
            message.created_at.astimezone(UTC)
        except (OverflowError, ValueError):
            raise InvalidInput(
                f"created_at of {_name(message)} ({message.created_at.isoformat()}) has no UTC "
                f"time between {datetime.min.year} and {datetime.max.year}"
            ) from None
    if message.metadata:
        check_json(message.metadata, f"metadata of {_name(message)}", limits)
    for index, content in enumerate(message.contents):
        values = content.__dict__
        if not _plain_fields(values):
            # a content's fields (a result, arguments) count their depth as metadata does
            check_json(values, f"contents[{index}] of {_name(message)}", limits, -1)
