"""What the store returns (frozen pydantic models) and the row-to-model mapping.

The mapping is plain functions, testable without a database. A row that fails to
validate raises :class:`~store.errors.CorruptRowError` naming its tenant, session and
``seq``: a system of record never skips a row silently.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from store._hashing import content_hash, hashed_contents
from store.errors import CorruptRowError
from strategies.groups import GroupKind
from strategies.messages import CONTENTS_ADAPTER, Message

__all__ = [
    "Provenance",
    "SessionInfo",
    "StoredMessage",
    "content_hash",
    "hashed_contents",
    "message_from_row",
    "message_to_values",
    "session_from_row",
]


class Provenance(BaseModel):
    """Where imported messages came from: recorded on every message of an append."""

    model_config = ConfigDict(frozen=True)

    system: str
    """The source system (``openai_jsonl``, ``agent_framework``, ...)."""
    imported_at: datetime | None = None
    """When the import ran (now when None)."""
    source_ids: Mapping[str, str] = Field(default_factory=dict)
    """The source's own id of each message, by chatledger message id."""


class StoredMessage(BaseModel):
    """A stored message with its place in the session and its compaction state."""

    model_config = ConfigDict(frozen=True)

    session_id: str
    tenant: str
    seq: int
    """Gapless 1-based position of the message in its session's storage order."""
    anchor: int
    """Projection order key (``seq`` for appended messages)."""
    slot: int
    """Secondary order key: 0 for appended messages, 1 or more for summaries."""
    message: Message
    """The message as it was stored."""
    group_id: str
    kind: GroupKind
    """Kind of the message's group."""
    token_count: int
    """Tokens of the stored message (the session's tokenizer)."""
    excluded: bool = False
    """Whether compaction left the message out of the context."""
    excluded_reason: str | None = None
    excluded_event_id: str | None = None
    reduced: Message | None = None
    """The reduced version the projection shows instead, when a reduction applies."""
    reduced_token_count: int | None = None
    reduced_event_id: str | None = None
    stored_at: datetime
    source_system: str | None = None
    source_id: str | None = None
    imported_at: datetime | None = None

    @property
    def message_id(self) -> str:
        """The message's id."""
        return self.message.message_id

    @property
    def role(self) -> str:
        """The message's role."""
        return self.message.role


class SessionInfo(BaseModel):
    """A session and its aggregates."""

    model_config = ConfigDict(frozen=True)

    session_id: str
    tenant: str
    created_at: datetime
    updated_at: datetime
    tokenizer: str
    """Name of the tokenizer the session's token counts were made with."""
    revision: int
    """Bumped on every write to the session."""
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    stored_messages: int = 0
    stored_groups: int = 0
    stored_tokens: int = 0
    active_messages: int = 0
    active_groups: int = 0
    active_tokens: int = 0


def message_to_values(message: Message) -> dict[str, Any]:
    """The message's own columns (role, contents, author, timestamps, metadata, hash)."""
    return {
        "message_id": message.message_id,
        "role": message.role,
        "contents": CONTENTS_ADAPTER.dump_python(message.contents, mode="json"),
        "author_name": message.author_name,
        "created_at": message.created_at,
        "metadata": message.metadata,
        "content_hash": content_hash(message),
    }


def _json(value: Any) -> Any:
    """Decode a JSON column read as text (a value already decoded is returned as is)."""
    return json.loads(value) if isinstance(value, str | bytes) else value


def _build_message(row: Mapping[str, Any], contents: Any) -> Message:
    metadata = _json(row["metadata"])
    return Message.model_validate(
        {
            "role": row["role"],
            "contents": _json(contents),
            "message_id": row["message_id"],
            "author_name": row["author_name"],
            "created_at": row["created_at"],
            "metadata": metadata if metadata is not None else {},
        },
        context={"allow_custom_roles": True},
    )


def reduced_to_value(message: Message) -> dict[str, Any]:
    """The ``reduced_contents`` column of a reduced version: its contents and own fields."""
    values = message_to_values(message)
    return {k: values[k] for k in ("contents", "metadata", "role", "author_name")}


def _reduced_message(row: Mapping[str, Any]) -> Message:
    value = _json(row["reduced_contents"])
    if isinstance(value, dict) and "contents" in value:
        overlay = {
            **row,
            **{k: value[k] for k in ("metadata", "role", "author_name") if k in value},
        }
        return _build_message(overlay, value["contents"])
    return _build_message(row, value)  # an overlay of contents only


def message_from_row(row: Mapping[Any, Any], *, tenant: str, session_id: str) -> StoredMessage:
    """Build a :class:`StoredMessage` from a joined messages/groups row mapping."""
    try:
        reduced = None
        if row["reduced_contents"] is not None:
            reduced = _reduced_message(row)
        return StoredMessage(
            session_id=session_id,
            tenant=tenant,
            seq=row["seq"],
            anchor=row["anchor"],
            slot=row["slot"],
            message=_build_message(row, row["contents"]),
            group_id=row["group_id"],
            kind=row["kind"],
            token_count=row["token_count"],
            excluded=row["excluded"],
            excluded_reason=row["excluded_reason"],
            excluded_event_id=row["excluded_event_id"],
            reduced=reduced,
            reduced_token_count=row["reduced_token_count"],
            reduced_event_id=row["reduced_event_id"],
            stored_at=row["stored_at"],
            source_system=row["source_system"],
            source_id=row["source_id"],
            imported_at=row["imported_at"],
        )
    except (ValidationError, KeyError, TypeError, ValueError) as error:
        seq = row.get("seq") if isinstance(row.get("seq"), int) else None
        raise CorruptRowError(str(error), tenant=tenant, session_id=session_id, seq=seq) from error


def session_from_row(row: Mapping[Any, Any]) -> SessionInfo:
    """Build a :class:`SessionInfo` from a sessions row mapping."""
    try:
        return SessionInfo(
            session_id=row["session_id"],
            tenant=row["tenant"],
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            tokenizer=row["tokenizer"],
            revision=row["revision"],
            metadata=_json(row["metadata"]) or {},
            stored_messages=row["stored_messages"],
            stored_groups=row["stored_groups"],
            stored_tokens=row["stored_tokens"],
            active_messages=row["active_messages"],
            active_groups=row["active_groups"],
            active_tokens=row["active_tokens"],
        )
    except (ValidationError, KeyError, TypeError, ValueError) as error:
        raise CorruptRowError(
            str(error),
            tenant=str(row.get("tenant")),
            session_id=str(row.get("session_id")),
            seq=None,
        ) from error
