"""From matched messages to a page of :class:`~store.models.SearchHit`, the same way for
every backend: the snippet and its highlights, the position, the cursor.

A backend finds the matching messages and their scores (its index, or
:func:`score` in Python); :func:`make_hit` builds each hit, :func:`page` orders
candidates and cuts a page after a cursor, :func:`next_cursor` signs where the next
page starts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from store.models import SearchHit, SearchPage
from store.search.cursor import decode_cursor, encode_cursor
from store.search.query import Query, match_spans, matches
from store.search.request import (
    Position,
    SearchRequest,
    after_cursor,
    cursor_payload,
    hit_order,
)
from store.search.snippet import make_snippet
from store.search.text import indexable_text, message_text, tokens
from strategies.messages import Message

__all__ = ["Candidate", "make_hit", "next_cursor", "page", "resume_after", "score"]


@dataclass(frozen=True, slots=True)
class Candidate:
    """A matching message, with where it sorts."""

    position: Position
    hit: SearchHit


def score(query: Query, message: Message) -> float | None:
    """The score of ``message`` for ``query`` computed in Python (None: no match): the
    matches, weighed down by the message's length."""
    text = message_text(message)
    if not matches(query, indexable_text(message)):
        return None
    found = len(match_spans(query, text))
    return found / math.sqrt(1 + len(tokens(text)))


def make_hit(
    query: Query,
    message: Message,
    *,
    session_id: str,
    seq: int,
    group_id: str,
    excluded: bool,
    excluded_by: str | None,
    score: float,
    stored_at: datetime,
) -> Candidate:
    """The hit on ``message`` (its snippet built from what the model reads of it)."""
    snippet = make_snippet(message_text(message), query)
    hit = SearchHit(
        session_id=session_id,
        message_id=message.message_id,
        seq=seq,
        role=message.role,
        group_id=group_id,
        excluded=excluded,
        excluded_by=excluded_by if excluded else None,
        snippet=snippet.text,
        highlights=snippet.highlights,
        score=score,
        created_at=message.created_at,
    )
    when = message.created_at or stored_at
    return Candidate(hit_order(score, when, seq, session_id, seq), hit)


def resume_after(key: bytes, request: SearchRequest, session_id: str | None) -> Position | None:
    """Where the request's cursor resumes (None: from the start)."""
    if request.cursor is None:
        return None
    return after_cursor(decode_cursor(key, request.cursor), request, session_id)


def next_cursor(key: bytes, request: SearchRequest, session_id: str | None, last: Position) -> str:
    """The cursor of the page after the one ending at ``last``."""
    return encode_cursor(key, cursor_payload(request, session_id, last))


def page(
    key: bytes,
    request: SearchRequest,
    session_id: str | None,
    candidates: Iterable[Candidate],
) -> SearchPage:
    """The page of ``candidates`` the request asks for (all of them given, any order)."""
    start = resume_after(key, request, session_id)
    ordered = sorted(
        (c for c in candidates if start is None or c.position > start),
        key=lambda c: c.position,
    )
    taken = ordered[: request.limit]
    more = len(ordered) > request.limit
    cursor = next_cursor(key, request, session_id, taken[-1].position) if more else None
    return SearchPage(hits=[c.hit for c in taken], next_cursor=cursor)
