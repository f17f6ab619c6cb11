"""From matched messages to a page of :class:`~store.models.SearchHit`, the same way for
every backend: the snippet and its highlights, the position, the cursor.

A backend finds the matching messages and their scores (its index, or
:func:`score` in Python); :func:`make_hit` builds each hit, :func:`page` orders
candidates and cuts the page a cursor asks for, :func:`page_of` signs where the next
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

__all__ = ["Candidate", "candidate", "make_hit", "page", "page_of", "resume_at", "score"]


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
) -> SearchHit:
    """The hit on ``message`` (its snippet built from what the model reads of it)."""
    snippet = make_snippet(message_text(message), query)
    return SearchHit(
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


def candidate(hit: SearchHit, stored_at: datetime) -> Candidate:
    """``hit`` with where it sorts (its message stored at ``stored_at``)."""
    when = hit.created_at or stored_at
    return Candidate(hit_order(hit.score, when, hit.seq, hit.session_id, hit.seq), hit)


def resume_at(key: bytes, request: SearchRequest, session_id: str | None) -> int:
    """The offset the request's cursor resumes at (0: from the start)."""
    if request.cursor is None:
        return 0
    return after_cursor(decode_cursor(key, request.cursor), request, session_id)


def page_of(
    key: bytes,
    request: SearchRequest,
    session_id: str | None,
    offset: int,
    hits: list[SearchHit],
    *,
    more: bool,
) -> SearchPage:
    """The page of ``hits`` (the limit's at most, from ``offset`` on), with a cursor to
    the next when there are ``more``."""
    cursor = (
        encode_cursor(key, cursor_payload(request, session_id, offset + request.limit))
        if more
        else None
    )
    return SearchPage(hits=hits, next_cursor=cursor)


def page(
    key: bytes,
    request: SearchRequest,
    session_id: str | None,
    candidates: Iterable[Candidate],
) -> SearchPage:
    """The page of ``candidates`` the request asks for (all of them given, any order)."""
    offset = resume_at(key, request, session_id)
    ordered = sorted(candidates, key=lambda c: c.position)
    window = [c.hit for c in ordered[offset : offset + request.limit]]
    more = len(ordered) > offset + request.limit
    return page_of(key, request, session_id, offset, window, more=more)
