"""The dedupe step of an append: which messages are new, each one's content hash.

A message whose id is stored with the same content hash is a replay and is skipped; an
id reused with other content (in the batch, or against the session) is refused.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from sqlalchemy import Table, bindparam, select
from sqlalchemy.ext.asyncio import AsyncConnection

from store._append_rows import AppendContext
from store._rows import chunks
from store.errors import InvalidInput
from store.models import hashed_contents
from store.schema import MessageRow
from strategies.messages import Message

__all__ = ["Deduped", "dedupe"]

MESSAGES = cast(Table, MessageRow.__table__)

_STORED_HASHES = select(MESSAGES.c.message_id, MESSAGES.c.content_hash).where(
    MESSAGES.c.tenant == bindparam("tenant"),
    MESSAGES.c.session_id == bindparam("session_id"),
    MESSAGES.c.message_id.in_(bindparam("ids", expanding=True)),
)


async def _stored_hashes(
    conn: AsyncConnection, ctx: AppendContext, ids: Sequence[str]
) -> dict[str, str]:
    """The content hash of each of ``ids`` already stored in the session."""
    stored: dict[str, str] = {}
    params = {"tenant": ctx.tenant, "session_id": ctx.session_id}
    for part in chunks(ids):
        found = await conn.execute(_STORED_HASHES, {**params, "ids": part})
        stored.update((row[0], row[1]) for row in found)
    return stored


_HASH_TURN = 256
"""Messages hashed between two turns of the event loop while the stored hashes are read."""


@dataclass(slots=True)
class Deduped:
    """The messages of an append not stored yet, with what hashing them wrote."""

    fresh: list[Message]
    hashes: dict[str, str]
    """Content hash by message id."""
    contents: dict[str, str]
    """The ``contents`` column's JSON text, by id, where hashing wrote it."""


async def dedupe(conn: AsyncConnection, ctx: AppendContext, messages: Sequence[Message]) -> Deduped:
    """The messages not stored yet, and each one's content hash by id.

    Raises InvalidInput for an id reused with other content. Each message is hashed
    once; the hash is stored with the row. The stored hashes are read (by id) while the
    messages are hashed.
    """
    ids = list(dict.fromkeys(m.message_id for m in messages))
    reading = asyncio.ensure_future(_stored_hashes(conn, ctx, ids))
    try:
        await asyncio.sleep(0)  # let the query reach the driver
        hashes: dict[str, str] = {}
        contents: dict[str, str] = {}
        unique: list[Message] = []
        for index, message in enumerate(messages):
            digest, text = hashed_contents(message)
            known = hashes.get(message.message_id)
            if known is None:
                hashes[message.message_id] = digest
                if text is not None:
                    contents[message.message_id] = text
                unique.append(message)
            elif known != digest:
                raise InvalidInput(
                    f"message id {message.message_id!r} appears twice in the batch "
                    "with different content"
                )
            if index % _HASH_TURN == _HASH_TURN - 1 and not reading.done():
                await asyncio.sleep(0)  # lets the next query of the read start
        stored = await reading
    finally:
        if not reading.done():
            await asyncio.wait([reading])
        if not reading.cancelled():
            reading.exception()  # retrieved: an error raised above takes precedence
    fresh: list[Message] = []
    for message in unique:
        stored_digest = stored.get(message.message_id)
        if stored_digest is None:
            fresh.append(message)
        elif stored_digest != hashes[message.message_id]:
            raise InvalidInput(
                f"message id {message.message_id!r} is already stored in session "
                f"{ctx.session_id!r} with different content"
            )
    return Deduped(fresh, hashes, contents)
