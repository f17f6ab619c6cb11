"""The recall tool's text: its result, its cursor, its errors, and the note after a
summary. Pure, no I/O (the searching is :class:`store.integrations.recall.Recall`).

A recall result is compact JSON whose first key, :data:`RECALL_KEY`, marks it and lists
the message ids it quotes; a hit says when it was written, its text, and for an
excluded message the audit event that left it out and why; when each such event was
applied is said once::

    {"chatledger_recall":{"quotes":["m1","m7"]},
     "hits":[{"role":"user","at":"2026-05-01T09:30:00Z","text":"…",
              "excluded":{"by":"evt_1","reason":"summarized"}}, …],
     "excluded_at":{"evt_1":"2026-05-01T10:00:00Z"},"next_cursor":"x1.…"}

:func:`is_recall_result` and :func:`quoted_ids` read that mark back from a stored tool
result (its text, or the object a framework parsed it into), so that a store can leave
recall results out of its index (:func:`without_recall_results`: what of a message is
indexed) and redact one when a message it quotes is redacted (:func:`quoting`: what is
redacted with given messages).

A recall cursor wraps the store's search cursor (signed with the database's key, carrying
the query and the last position) with the phase it belongs to: ``x1.`` the session's
excluded messages, searched first, ``r1.`` the rest. The store's cursor is bound to its
filters, so a phase tag put on another phase's cursor is refused by the store. The one
cursor without a position, the rest's first page, is ``r1~`` and a digest of the query.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal

from pydantic import JsonValue

from store.errors import InvalidInput
from store.models import ExcludedGroup, SearchHit
from strategies.bounded import cap_text, compact_dumps
from strategies.messages import FunctionResultContent, Message, TextContent
from strategies.tool_result import SUMMARY_METADATA_KEY

__all__ = [
    "DEFAULT_RECALL_CHARS",
    "DEFAULT_RECALL_NOTE",
    "DEFAULT_RECALL_TOKENS",
    "RECALL_DESCRIPTION",
    "RECALL_KEY",
    "RECALL_TOOL_NAME",
    "Phase",
    "RecallCursor",
    "RecallEntry",
    "decode_recall_cursor",
    "encode_recall_cursor",
    "is_recall_result",
    "is_summary",
    "quoted_ids",
    "quoting",
    "recall_error",
    "recall_hit",
    "recall_quotes",
    "recall_result",
    "with_recall_note",
    "without_recall_results",
]

RECALL_TOOL_NAME: Final = "recall"
"""The name the model calls the tool by."""
RECALL_KEY: Final = "chatledger_recall"
"""The first key of every recall result: ``{"quotes": [message ids]}``."""
DEFAULT_RECALL_TOKENS: Final = 1_500
"""The default budget of one recall result, in the store's tokens."""
DEFAULT_RECALL_CHARS: Final = 200
"""The default longest text of one hit, in characters (the store's snippet length)."""
DEFAULT_RECALL_NOTE: Final = (
    "(Earlier messages this summary replaced are kept word for word: "
    "use the recall tool to search them.)"
)
"""The sentence added after each summary the model is sent while the tool is on."""
RECALL_DESCRIPTION: Final = (
    "Search this conversation's earlier messages word for word, those left out of your "
    "context first (with when and why each was left out). query: words (all must "
    'match), "quoted phrases", word* prefixes. When the result has next_cursor, call '
    "again with the same query and that cursor for more."
)
"""What the model is told the tool does."""

Phase = Literal["excluded", "rest"]
"""Which part of the session a recall page searches: its excluded messages, then the rest."""
_TAGS: Final[dict[Phase, str]] = {"excluded": "x1", "rest": "r1"}
_PHASES: Final[dict[str, Phase]] = {tag: phase for phase, tag in _TAGS.items()}
_START: Final = "~"
_AT: Final = "."
_DIGEST_CHARS: Final = 16
_PREFIX: Final = '{"' + RECALL_KEY + '":'


# -- the cursor -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RecallCursor:
    """Where a recall resumes: a phase, and the store's cursor in it (None: its start)."""

    phase: Phase
    search_cursor: str | None = None


def _digest(query: str) -> str:
    return hashlib.sha256(query.encode()).hexdigest()[:_DIGEST_CHARS]


def encode_recall_cursor(cursor: RecallCursor, query: str) -> str:
    """The text of ``cursor`` for ``query`` (the query's text as parsed)."""
    tag = _TAGS[cursor.phase]
    if cursor.search_cursor is None:
        return f"{tag}{_START}{_digest(query)}"
    return f"{tag}{_AT}{cursor.search_cursor}"


def decode_recall_cursor(text: object, query: str) -> RecallCursor:
    """The cursor ``text`` holds, for ``query`` (as parsed); :class:`InvalidInput` when it
    is not one a recall returned. The store checks the search cursor inside it."""
    if not isinstance(text, str) or len(text) < 4:
        raise InvalidInput("invalid cursor: not one a previous recall returned")
    phase = _PHASES.get(text[:2])
    rest = text[3:]
    if phase is None or not rest:
        raise InvalidInput("invalid cursor: not one a previous recall returned")
    if text[2] == _AT:
        return RecallCursor(phase, rest)
    if text[2] == _START and phase == "rest":
        if rest != _digest(query):
            raise InvalidInput("this cursor belongs to another query")
        return RecallCursor(phase)
    raise InvalidInput("invalid cursor: not one a previous recall returned")


# -- the result -----------------------------------------------------------------------


def _when(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class RecallEntry:
    """One hit of a recall page: the message it quotes, what the model reads of it, and
    the audit event that excluded it with when (None: not excluded)."""

    message_id: str
    shown: dict[str, JsonValue]
    event: tuple[str, str | None] | None = None


def recall_hit(
    hit: SearchHit, group: ExcludedGroup | None, *, max_chars: int = DEFAULT_RECALL_CHARS
) -> RecallEntry:
    """What the model reads of one hit: its role, when it was written, its text (at most
    ``max_chars`` characters) and, for an excluded message, the audit event that left it
    out and why (when is said once an event, by :func:`recall_result`)."""
    shown: dict[str, JsonValue] = {"role": hit.role}
    written = _when(hit.created_at)
    if written is not None:
        shown["at"] = written
    shown["text"] = cap_text(hit.snippet, max_chars, marker="…")
    event: tuple[str, str | None] | None = None
    if hit.excluded and hit.excluded_by is not None:
        shown["excluded"] = {
            "by": hit.excluded_by,
            "reason": None if group is None else group.reason,
        }
        event = (hit.excluded_by, None if group is None else _when(group.excluded_at))
    return RecallEntry(hit.message_id, shown, event)


def recall_result(entries: Sequence[RecallEntry], next_cursor: str | None) -> str:
    """The compact JSON of a recall page: the mark and the ids quoted, the hits, when
    each audit event that excluded some of them was applied, and the cursor of the next
    page when there is one."""
    events = dict(e.event for e in entries if e.event is not None)
    result: dict[str, JsonValue] = {
        RECALL_KEY: {"quotes": list(dict.fromkeys(e.message_id for e in entries))},
        "hits": [e.shown for e in entries],
    }
    if events:
        result["excluded_at"] = dict(events)
    if next_cursor is not None:
        result["next_cursor"] = next_cursor
    return compact_dumps(result)


def recall_error(reason: str) -> str:
    """The short text the model gets for a query or cursor the recall refuses."""
    return f"recall refused: {reason}. Search again without a cursor, with plain words."


def _mark(value: object) -> dict[str, JsonValue] | None:
    """The mark of a recall result given as its text or as the object it parses to."""
    if isinstance(value, str):
        if not value.startswith(_PREFIX):
            return None
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if not isinstance(value, dict):
        return None
    mark = value.get(RECALL_KEY)
    if not isinstance(mark, dict) or not isinstance(mark.get("quotes"), list):
        return None
    return mark


def is_recall_result(text: object) -> bool:
    """Whether ``text`` (a tool result's text, or the object a framework parsed it into)
    is a recall result."""
    return _mark(text) is not None


def quoted_ids(text: object) -> list[str]:
    """The message ids a recall result quotes (none for anything else)."""
    mark = _mark(text)
    if mark is None:
        return []
    quotes = mark["quotes"]
    assert isinstance(quotes, list)
    return [q for q in quotes if isinstance(q, str)]


def recall_quotes(message: Message) -> list[str]:
    """The message ids the recall results held by ``message`` quote, in order, once."""
    found = [
        quoted
        for content in message.contents
        if isinstance(content, FunctionResultContent)
        for quoted in quoted_ids(content.result)
    ]
    return list(dict.fromkeys(found))


def without_recall_results(message: Message) -> Message:
    """``message`` without its recall results (``message`` itself when it has none):
    what of it is indexed."""
    kept = [
        c
        for c in message.contents
        if not (isinstance(c, FunctionResultContent) and is_recall_result(c.result))
    ]
    if len(kept) == len(message.contents):
        return message
    return message.model_copy(update={"contents": kept})


def quoting(messages: Iterable[Message], message_ids: Iterable[str]) -> list[str]:
    """The ids of ``messages`` holding a recall result that quotes one of
    ``message_ids``: what is redacted with them."""
    wanted = set(message_ids)
    return [m.message_id for m in messages if wanted.intersection(recall_quotes(m))]


# -- the note after a summary ---------------------------------------------------------

_SUMMARY_KEYS: Final = ("summary_of_group_ids", "summary_of_message_ids")


def _names_replaced(metadata: object) -> bool:
    return isinstance(metadata, dict) and any(key in metadata for key in _SUMMARY_KEYS)


def is_summary(message: Message) -> bool:
    """Whether ``message`` is a summary: its metadata names what it replaced, as
    chatledger's strategies write it (at the top, or under
    :data:`~strategies.tool_result.SUMMARY_METADATA_KEY`), or Agent Framework's
    annotations of an imported summary do."""
    metadata = message.metadata
    if _names_replaced(metadata) or _names_replaced(metadata.get(SUMMARY_METADATA_KEY)):
        return True
    from store.formats.agent_framework import af_annotations  # the converters load lazily

    annotations = af_annotations(message)
    return annotations is not None and annotations.is_summary


def _noted(message: Message, note: str) -> Message:
    """``message`` with ``note`` after a blank line at the end of its last text (a
    content of its own only when it has no text), so that no format splits it off."""
    contents = list(message.contents)
    last = max((i for i, c in enumerate(contents) if isinstance(c, TextContent)), default=None)
    if last is None:
        contents.append(TextContent(text=note))
    else:
        text = contents[last]
        assert isinstance(text, TextContent)
        contents[last] = text.model_copy(update={"text": f"{text.text}\n\n{note}"})
    return message.model_copy(update={"contents": contents})


def with_recall_note(messages: Sequence[Message], note: str | None) -> list[Message]:
    """``messages`` with ``note`` after each summary's text, after a blank line (copies:
    the stored summaries are unchanged; ids, contents, order and every other message
    stay as they are)."""
    if not note:
        return list(messages)
    return [_noted(m, note) if is_summary(m) else m for m in messages]
