"""What the import reads from the store and writes to it, many sessions at a time.

A store with the bulk-import ability (:class:`~store.contract.BulkImportBackend`, such as
the SQL backend) answers for many sessions in one read and writes many sessions'
messages in one transaction; any other backend of the contract is asked session by
session, through its public methods.
"""

from __future__ import annotations

from collections.abc import Sequence

from store.contract import HistoryBackend, is_bulk_import_backend
from store.errors import SessionNotFound
from store.models import Provenance
from store.rules.identity import stored_hash
from strategies.groups import call_links
from strategies.messages import Message

__all__ = ["Batch", "append_sessions", "stored_calls", "stored_hashes"]

Batch = tuple[str, list[Message], Provenance]
"""Messages for one session, with their provenance."""


async def stored_hashes(
    store: HistoryBackend, session_ids: Sequence[str]
) -> dict[str, dict[str, str]]:
    """The content hash of each stored message id of each session that holds any."""
    if is_bulk_import_backend(store):
        return await store.stored_hashes(session_ids)
    found: dict[str, dict[str, str]] = {}
    for session_id in dict.fromkeys(session_ids):
        try:
            await store.session(session_id)
        except SessionNotFound:
            continue
        hashes = {
            row.message.message_id: stored_hash(row.message)
            async for row in store.aiter_history(session_id, include_excluded=True)
        }
        if hashes:
            found[session_id] = hashes
    return found


async def stored_calls(store: HistoryBackend, session_id: str) -> set[str]:
    """The call ids the session's stored messages make (read only when a new result
    answers no call of the source, which is rare)."""
    calls: set[str] = set()
    async for row in store.aiter_history(session_id, include_excluded=True):
        calls.update(c for c in call_links(row.message)[0] if c)
    return calls


async def append_sessions(store: HistoryBackend, batches: Sequence[Batch]) -> None:
    """Append each batch to its session: in one transaction when the store has the bulk
    path, else one append a batch."""
    if is_bulk_import_backend(store):
        await store.append_sessions(batches)
        return
    for session_id, messages, provenance in batches:
        await store.append(session_id, messages, provenance=provenance)
