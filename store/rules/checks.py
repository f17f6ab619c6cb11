"""The argument checks of the store's contract, shared by every backend.

Each check raises :class:`~store.errors.InvalidInput` with a sentence that names the
argument, before anything is read or written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, get_args

from store.errors import InvalidInput
from store.models import (
    COMPACT_PHASES,
    OUTCOMES,
    PHASES,
    CompactionRequest,
    Provenance,
    SessionOrder,
)
from store.rules.limits import DEFAULT_LIMITS, Limits, check_json, check_stored_message, fits
from store.rules.records import now
from strategies.base import CompactionStrategy
from strategies.messages import Message
from strategies.specs import InvalidStrategySpec, parse_strategy
from strategies.tokenizers import Tokenizer, tokenizer_named

__all__ = [
    "INT64",
    "MAX_TITLE_CHARS",
    "check_bound",
    "check_compact_phase",
    "check_flag",
    "check_limit",
    "check_message",
    "check_metadata",
    "check_outcome",
    "check_page_size",
    "check_phase",
    "check_provenance",
    "check_restore_target",
    "check_session_id",
    "check_session_order",
    "check_since",
    "check_tenant",
    "check_text",
    "check_title",
    "check_tokenizer",
    "checked_ids",
    "checked_messages",
    "compaction_request",
    "resolve_strategy",
    "resolve_tokenizer",
    "title_of_source",
]


def _key(value: object, name: str, limits: Limits) -> None:
    if not isinstance(value, str) or not value or "\x00" in value:
        raise InvalidInput(f"{name} must be a non-empty string without NUL characters")
    limits.check_id(value, name)


def check_tenant(tenant: object, limits: Limits = DEFAULT_LIMITS) -> None:
    """Refuse a tenant that is not a non-empty string without NUL characters, of at most
    ``limits.max_id_length`` characters."""
    _key(tenant, "tenant", limits)


def check_session_id(session_id: object, limits: Limits = DEFAULT_LIMITS) -> None:
    """Refuse a session id that is not a non-empty string without NUL characters, of at
    most ``limits.max_id_length`` characters."""
    _key(session_id, "session_id", limits)


INT64 = 2**63
"""Integer bounds (``seq``, limits) are signed 64-bit, as the database's."""


def check_bound(value: object, name: str) -> None:
    """Refuse a ``seq`` bound (``after``, ``before``) that is not a 64-bit integer."""
    if value is not None and (
        not isinstance(value, int) or isinstance(value, bool) or not -INT64 <= value < INT64
    ):
        raise InvalidInput(f"{name} must be an integer (a seq), got {value!r}")


def check_flag(value: object, name: str) -> None:
    """Refuse a flag (``dry_run``, ``fix``) that is not a bool."""
    if not isinstance(value, bool):
        raise InvalidInput(f"{name} must be a bool, got {type(value).__name__}")


def check_provenance(provenance: object) -> None:
    """Refuse a provenance that is not a :class:`~store.models.Provenance`."""
    if provenance is not None and not isinstance(provenance, Provenance):
        raise InvalidInput(
            f"provenance must be a store.models.Provenance, got {type(provenance).__name__}"
        )


def checked_messages(messages: object, limits: Limits | None = None) -> list[Message]:
    """``messages`` (one :class:`Message`, or an iterable of them) as a list, refusing
    anything else, and more than the ``max_append_messages`` of ``limits`` when given
    (read no further than the first message past it: an endless iterable is refused too)."""
    if isinstance(messages, Message):
        return [messages]
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Iterable):
        raise InvalidInput(
            f"expected a Message or an iterable of Message, got {type(messages).__name__}"
        )
    batch: list[Message] = []
    limit = limits.max_append_messages if limits is not None else None
    for message in messages:
        if not isinstance(message, Message):
            raise InvalidInput(f"expected Message, got {type(message).__name__}")
        if len(batch) == limit and limits is not None:
            raise limits.too_many()
        batch.append(message)
    return batch


def check_message(message: object, limits: Limits = DEFAULT_LIMITS) -> None:
    """Refuse what cannot be stored and read back as given: not a Message, ids (call ids
    included) holding a NUL character, anything beyond ``limits`` (see
    :mod:`store.rules.limits`)."""
    if not isinstance(message, Message):
        raise InvalidInput(f"expected Message, got {type(message).__name__}")
    for name in ("message_id", "role", "author_name"):
        value = getattr(message, name)
        if value is not None and "\x00" in value:
            raise InvalidInput(f"{name} of message {message.message_id!r} holds a NUL character")
    check_stored_message(message, limits)
    for index, content in enumerate(message.contents):
        call_id = getattr(content, "call_id", None)
        # kept in an id column of its own (the unanswered calls)
        if call_id and ("\x00" in call_id or not fits(call_id, limits)):
            name = f"call_id of contents[{index}] of message {message.message_id[:80]!r}"
            if "\x00" in call_id:
                raise InvalidInput(f"{name} holds a NUL character")
            limits.check_id(call_id, name)


def check_tokenizer(stored: str, tokenizer: str, session_id: str) -> None:
    """Refuse to mix token counts of two tokenizers (by name) in one session."""
    if stored != tokenizer:
        raise InvalidInput(
            f"session {session_id!r} was counted with tokenizer {stored!r}, this store uses "
            f"{tokenizer!r}: open the store with {stored!r}, or call "
            f"recount({session_id!r}) to recount the session with {tokenizer!r}"
        )


def check_limit(limit: object) -> None:
    """Refuse a ``limit`` that is not an integer from 0."""
    if limit is not None and (
        not isinstance(limit, int) or isinstance(limit, bool) or not 0 <= limit < INT64
    ):
        raise InvalidInput(f"limit must be an integer >= 0, got {limit!r}")


def check_page_size(page_size: object) -> None:
    """Refuse a page size that is not an integer from one."""
    if not isinstance(page_size, int) or isinstance(page_size, bool) or not 1 <= page_size < INT64:
        raise InvalidInput(f"page_size must be an integer >= 1, got {page_size!r}")


def check_text(value: object, name: str, *, optional: bool = False) -> None:
    """Refuse a value that is not text (None too, when ``optional``)."""
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be a string, got {type(value).__name__}")


def checked_ids(ids: object, name: str) -> list[str]:
    """``ids`` (an iterable of strings, not one string) as a list."""
    if isinstance(ids, str | bytes) or not isinstance(ids, Iterable):
        raise InvalidInput(f"{name} must be an iterable of ids, got {type(ids).__name__}")
    found = list(ids)
    for item in found:
        check_text(item, f"each of {name}")
    return found


MAX_REASON_CHARS = 200
"""The longest reason a compaction request gives, in characters."""
MAX_FOCUS_CHARS = 2000
"""The longest focus a compaction request gives, in characters."""


def compaction_request(reason: object, focus: object) -> CompactionRequest:
    """A request of ``reason`` (one line of text, not blank, at most
    :data:`MAX_REASON_CHARS`) and ``focus`` (None or text, at most
    :data:`MAX_FOCUS_CHARS`; blank is None), made now."""
    check_text(reason, "reason")
    assert isinstance(reason, str)
    reason = reason.strip()
    if not reason or "\n" in reason or "\r" in reason or len(reason) > MAX_REASON_CHARS:
        raise InvalidInput(f"reason must be one line of text, 1 to {MAX_REASON_CHARS} characters")
    check_text(focus, "focus", optional=True)
    if isinstance(focus, str):
        focus = focus.strip() or None
    if isinstance(focus, str) and len(focus) > MAX_FOCUS_CHARS:
        raise InvalidInput(f"focus must be at most {MAX_FOCUS_CHARS} characters")
    assert focus is None or isinstance(focus, str)
    return CompactionRequest(reason=reason, focus=focus, requested_at=now())


MAX_TITLE_CHARS = 500
"""The longest session title, in characters."""


def check_title(title: object) -> str | None:
    """``title`` as a session keeps it: None (no title), or text of one line, at most
    :data:`MAX_TITLE_CHARS` characters, with something other than whitespace in it."""
    if title is None:
        return None
    check_text(title, "title")
    assert isinstance(title, str)
    if not title.strip():
        raise InvalidInput("title must hold more than whitespace (None removes it)")
    if len(title) > MAX_TITLE_CHARS:
        raise InvalidInput(f"title is {len(title):,} characters long; at most {MAX_TITLE_CHARS}")
    if any(not c.isprintable() and c != " " for c in title):
        raise InvalidInput("title must be one line of printable text")
    return title


def title_of_source(title: object) -> str | None:
    """What an import keeps of a source's title: whitespace runs and unprintable
    characters as one space, cut to :data:`MAX_TITLE_CHARS` characters (with ``…``);
    None when nothing is left. An import never fails on its title."""
    if not isinstance(title, str):
        return None
    text = " ".join("".join(c if c.isprintable() else " " for c in title).split())
    if not text:
        return None
    return text if len(text) <= MAX_TITLE_CHARS else text[: MAX_TITLE_CHARS - 1] + "…"


def check_metadata(metadata: object, limits: Limits = DEFAULT_LIMITS) -> dict[str, Any]:
    """``metadata`` as a dict of JSON a store keeps as given."""
    if not isinstance(metadata, Mapping):
        raise InvalidInput(f"metadata must be a mapping, got {type(metadata).__name__}")
    value = dict(metadata)
    for key in value:
        check_text(key, "each metadata key")
    check_json(value, "metadata", limits, 1)
    return value


def check_since(since: object) -> None:
    """Refuse a ``since`` or ``updated_since`` that is not a datetime."""
    if since is not None and not isinstance(since, datetime):
        raise InvalidInput(f"expected a datetime, got {type(since).__name__}")


def resolve_tokenizer(tokenizer: object) -> Tokenizer | None:
    """``tokenizer`` itself, the tokenizer a name names (``"o200k_base"``), or None;
    anything else is refused."""
    if tokenizer is None:
        return None
    if isinstance(tokenizer, str):
        try:
            return tokenizer_named(tokenizer)
        except ValueError as error:
            raise InvalidInput(str(error)) from None
    if not isinstance(tokenizer, Tokenizer) or not isinstance(tokenizer.name, str):
        raise InvalidInput(
            f"tokenizer must be a Tokenizer or a tokenizer's name, got {type(tokenizer).__name__}"
        )
    return tokenizer


def check_session_order(order: object) -> None:
    """Refuse a session order that is not ``"id"`` or ``"updated"``."""
    if order not in get_args(SessionOrder):
        raise InvalidInput(f"unknown order {order!r}: expected 'id' or 'updated'")


def check_outcome(outcome: object) -> None:
    """Refuse an outcome that is not one of :data:`~store.models.OUTCOMES`."""
    if outcome not in OUTCOMES:
        raise InvalidInput(f"unknown outcome {outcome!r}: expected one of {', '.join(OUTCOMES)}")


def check_phase(phase: object) -> None:
    """Refuse a phase that is not one of :data:`~store.models.PHASES`."""
    if phase not in PHASES:
        raise InvalidInput(f"unknown phase {phase!r}: expected one of {', '.join(PHASES)}")


def check_compact_phase(phase: object) -> None:
    """Refuse a phase a compaction may not be recorded under (``fork`` and ``rewind`` are
    the events of their own operations)."""
    check_phase(phase)
    if phase not in COMPACT_PHASES:
        raise InvalidInput(
            f"phase {phase!r} is not a compaction's: expected one of {', '.join(COMPACT_PHASES)}"
        )


def resolve_strategy(strategy: object) -> CompactionStrategy:
    """``strategy`` itself, or the strategy a spec string names
    (:func:`strategies.parse_strategy`); anything else is refused."""
    if isinstance(strategy, str):
        try:
            return parse_strategy(strategy)
        except InvalidStrategySpec as error:
            raise InvalidInput(str(error)) from None
    if not isinstance(strategy, CompactionStrategy):
        raise InvalidInput(
            f"expected a compaction strategy or a spec such as 'truncation:max_n=20,"
            f"compact_to=10', got {type(strategy).__name__}"
        )
    return strategy


def check_restore_target(group_ids: object, event_id: object) -> list[str] | None:
    """The group ids of a restore as a list (None for a restore by event); refuse
    anything but exactly one of the two."""
    if (group_ids is None) == (event_id is None):
        raise InvalidInput("pass exactly one of group_ids and event_id")
    check_text(event_id, "event_id", optional=True)
    return checked_ids(group_ids, "group_ids") if group_ids is not None else None
