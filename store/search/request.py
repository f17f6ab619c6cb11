"""A search as every backend receives it: checked, its query parsed, and the order of
its hits.

:func:`check_search` turns the arguments of
:meth:`~store.contract.HistoryBackend.search` into a :class:`SearchRequest`, or refuses
them with one line of :class:`~store.errors.InvalidInput`. Hits are ordered by
:func:`hit_order`: best score first, then newest first (``created_at``, then the order
of storage), then by session and ``seq``: a total order, so that pages cut from it
never overlap. A cursor carries the search's scope and the offset of the next page
(:func:`after_cursor`): pages are exact while nothing is written between them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from pydantic import JsonValue

from store.errors import InvalidInput
from store.search.query import Query, parse_query

__all__ = [
    "MAX_SEARCH_LIMIT",
    "Position",
    "SearchRequest",
    "after_cursor",
    "check_search",
    "cursor_payload",
    "hit_order",
    "scope_of",
]

MAX_SEARCH_LIMIT: Final = 500
"""The largest page of hits."""


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """A checked search."""

    query: Query
    include_excluded: bool
    excluded_only: bool
    roles: tuple[str, ...] | None
    limit: int
    cursor: str | None


def _flag(value: object, name: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidInput(f"{name} must be a bool, got {type(value).__name__}")
    return value


def _roles(roles: Iterable[str] | None) -> tuple[str, ...] | None:
    if roles is None:
        return None
    if isinstance(roles, str | bytes):
        raise InvalidInput("roles must be a list of roles, not one string")
    found = tuple(roles)
    if not found or any(not isinstance(r, str) or not r for r in found):
        raise InvalidInput("roles must be a non-empty list of role names")
    return tuple(sorted(set(found)))


def check_search(
    query: object,
    *,
    include_excluded: object,
    excluded_only: object,
    roles: Iterable[str] | None,
    limit: object,
    cursor: object,
) -> SearchRequest:
    """The search the arguments ask for, or :class:`InvalidInput`."""
    if not isinstance(query, str):
        raise InvalidInput(f"query must be a string, got {type(query).__name__}")
    included = _flag(include_excluded, "include_excluded")
    only = _flag(excluded_only, "excluded_only")
    if only and not included:
        raise InvalidInput("excluded_only=True asks for excluded messages: keep include_excluded")
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_SEARCH_LIMIT:
        raise InvalidInput(f"limit must be an integer from 1 to {MAX_SEARCH_LIMIT}, got {limit!r}")
    if cursor is not None and not isinstance(cursor, str):
        raise InvalidInput(f"cursor must be a string, got {type(cursor).__name__}")
    return SearchRequest(parse_query(query), included, only, _roles(roles), limit, cursor)


@dataclass(frozen=True, slots=True, order=True)
class Position:
    """Where a hit sorts: ascending order is best first (see the module)."""

    rank: float
    """The score, negated."""
    age: float
    """``created_at`` (else when stored) as a POSIX timestamp, negated."""
    stored: int
    """The order of storage, negated (newest first among equal times)."""
    session_id: str
    seq: int


def hit_order(
    score: float, created_at: datetime, stored: int, session_id: str, seq: int
) -> Position:
    """The position of a hit with ``score`` (higher is better)."""
    return Position(-score, -created_at.timestamp(), -stored, session_id, seq)


def scope_of(request: SearchRequest, session_id: str | None) -> str:
    """What a cursor is valid for: the query, the session and the filters."""
    roles = ",".join(request.roles) if request.roles is not None else "*"
    flags = f"{int(request.include_excluded)}{int(request.excluded_only)}"
    return f"{request.query.text}\x00{session_id or ''}\x00{flags}\x00{roles}"


def cursor_payload(
    request: SearchRequest, session_id: str | None, offset: int
) -> dict[str, JsonValue]:
    """What the cursor of the page starting at hit ``offset`` carries."""
    return {"scope": scope_of(request, session_id), "offset": offset}


def after_cursor(
    payload: dict[str, JsonValue], request: SearchRequest, session_id: str | None
) -> int:
    """The offset a cursor resumes at; :class:`InvalidInput` when it was issued for
    another search (query, session or filters) or holds no offset."""
    if payload.get("scope") != scope_of(request, session_id):
        raise InvalidInput("this cursor belongs to another search (query, session or filters)")
    offset = payload.get("offset")
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise InvalidInput("invalid search cursor: it holds no position")
    return offset
