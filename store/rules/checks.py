"""The argument checks of the store's contract, shared by every backend.

Each check raises :class:`~store.errors.InvalidInput` with a sentence that names the
argument, before anything is read or written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import get_args

from store.errors import InvalidInput
from store.models import PHASES, SessionOrder
from strategies.base import CompactionStrategy
from strategies.messages import Message
from strategies.specs import InvalidStrategySpec, parse_strategy

__all__ = [
    "check_limit",
    "check_message",
    "check_page_size",
    "check_phase",
    "check_restore_target",
    "check_session_id",
    "check_session_order",
    "check_tenant",
    "check_tokenizer",
    "checked_messages",
    "resolve_strategy",
]


def check_tenant(tenant: object) -> None:
    """Refuse a tenant that is not a non-empty string without NUL characters."""
    if not isinstance(tenant, str) or not tenant or "\x00" in tenant:
        raise InvalidInput("tenant must be a non-empty string without NUL characters")


def check_session_id(session_id: object) -> None:
    """Refuse a session id that is not a non-empty string without NUL characters."""
    if not isinstance(session_id, str) or not session_id or "\x00" in session_id:
        raise InvalidInput("session_id must be a non-empty string without NUL characters")


def checked_messages(messages: object) -> list[Message]:
    """``messages`` (one :class:`Message`, or an iterable of them) as a list, refusing
    anything else."""
    if isinstance(messages, Message):
        return [messages]
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Iterable):
        raise InvalidInput(
            f"expected a Message or an iterable of Message, got {type(messages).__name__}"
        )
    batch: list[Message] = []
    for message in messages:
        if not isinstance(message, Message):
            raise InvalidInput(f"expected Message, got {type(message).__name__}")
        batch.append(message)
    return batch


def check_message(message: object) -> None:
    """Refuse what cannot be stored: not a Message, or ids holding a NUL character."""
    if not isinstance(message, Message):
        raise InvalidInput(f"expected Message, got {type(message).__name__}")
    for name in ("message_id", "role", "author_name"):
        value = getattr(message, name)
        if value is not None and "\x00" in value:
            raise InvalidInput(f"{name} of message {message.message_id!r} holds a NUL character")


def check_tokenizer(stored: str, tokenizer: str, session_id: str) -> None:
    """Refuse to mix token counts of two tokenizers (by name) in one session."""
    if stored != tokenizer:
        raise InvalidInput(
            f"session {session_id!r} was counted with tokenizer {stored!r}, this store uses "
            f"{tokenizer!r}: open the store with {stored!r}, or call "
            f"recount({session_id!r}) to recount the session with {tokenizer!r}"
        )


def check_limit(limit: int | None) -> None:
    """Refuse a negative ``limit``."""
    if limit is not None and limit < 0:
        raise InvalidInput("limit must be >= 0")


def check_page_size(page_size: int) -> None:
    """Refuse a page size below one."""
    if page_size < 1:
        raise InvalidInput("page_size must be >= 1")


def check_session_order(order: object) -> None:
    """Refuse a session order that is not ``"id"`` or ``"updated"``."""
    if order not in get_args(SessionOrder):
        raise InvalidInput(f"unknown order {order!r}: expected 'id' or 'updated'")


def check_phase(phase: object) -> None:
    """Refuse a phase that is not one of :data:`~store.models.PHASES`."""
    if phase not in PHASES:
        raise InvalidInput(f"unknown phase {phase!r}: expected one of {', '.join(PHASES)}")


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


def check_restore_target(group_ids: Iterable[str] | None, event_id: str | None) -> list[str] | None:
    """The group ids of a restore as a list (None for a restore by event); refuse
    anything but exactly one of the two."""
    if (group_ids is None) == (event_id is None):
        raise InvalidInput("pass exactly one of group_ids and event_id")
    return list(group_ids) if group_ids is not None else None
