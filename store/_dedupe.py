"""The dedupe step of an append: which messages are new, each one's content hash.

A message whose id is stored with the same content hash is a replay and is skipped; an
id reused with other content (in the batch, or against the session) is refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncConnection

from store._append_rows import AppendContext
from store._bound import among_params, key_params, select_among
from store.errors import InvalidInput
from store.models import hashed_contents
from strategies.messages import Message

__all__ = ["Deduped", "dedupe", "new_messages", "stored_hashes"]

_HASH_COLUMNS = ("message_id", "content_hash")


async def stored_hashes(
    conn: AsyncConnection, ctx: AppendContext, messages: Sequence[Message]
) -> dict[str, str]:
    """The content hash of each message id of ``messages`` already stored in the session."""
    query = select_among(conn, "messages", "message_id", columns=_HASH_COLUMNS)
    stored: dict[str, str] = {}
    ids = {m.message_id for m in messages}
    for params in among_params(conn, key_params(ctx.tenant, ctx.session_id), ids):
        stored.update((row[0], row[1]) for row in await conn.execute(query, params))
    return stored


def new_messages(messages: Sequence[Message], stored: Mapping[str, str]) -> list[Message]:
    """The first message of each id not in ``stored``: what the append stores, unless
    :func:`dedupe` refuses the batch."""
    seen: set[str] = set()
    fresh: list[Message] = []
    for message in messages:
        message_id = message.message_id
        if message_id not in seen:
            seen.add(message_id)
            if message_id not in stored:
                fresh.append(message)
    return fresh


@dataclass(slots=True)
class Deduped:
    """The content hash of each message of an append, with what hashing them wrote."""

    hashes: dict[str, str]
    """Content hash by message id."""
    contents: dict[str, str]
    """The ``contents`` column's JSON text, by id, where hashing wrote it."""


def dedupe(ctx: AppendContext, messages: Sequence[Message], stored: Mapping[str, str]) -> Deduped:
    """Hash each message once (the hash is stored with the row), and check the ids.

    Raises InvalidInput for an id reused with other content, in the batch or against
    ``stored`` (the session's hashes of the batch's ids); a message stored with the same
    content is a replay, which :func:`new_messages` leaves out.
    """
    hashes: dict[str, str] = {}
    contents: dict[str, str] = {}
    for message in messages:
        message_id = message.message_id
        digest, text = hashed_contents(message)
        known = hashes.get(message_id)
        if known is None:
            hashes[message_id] = digest
            if text is not None:
                contents[message_id] = text
            known = stored.get(message_id)
            if known is not None and known != digest:
                raise InvalidInput(
                    f"message id {message_id!r} is already stored in session "
                    f"{ctx.session_id!r} with different content"
                )
        elif known != digest:
            raise InvalidInput(
                f"message id {message_id!r} appears twice in the batch with different content"
            )
    return Deduped(hashes, contents)
