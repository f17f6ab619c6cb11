"""Compaction events: the audit row and its links to groups (built and logged in
:mod:`store.memory._compaction`, shared by both stores)."""

from __future__ import annotations

import json

from sqlalchemy.ext.asyncio import AsyncConnection

from store._bound import insert_rows
from store._rows import chunks
from store.audit_models import CompactionEvent
from store.memory._compaction import build_event, log_event
from store.memory._state import SessionData

__all__ = ["build_event", "event_note", "log_event", "write_event"]


def event_note(event: CompactionEvent) -> str:
    """The event's ordered group lists, kept verbatim in its ``note`` column."""
    return json.dumps(
        {
            "excluded": list(event.excluded),
            "summarized": [[k, list(v)] for k, v in event.summarized.items()],
            "reduced": list(event.reduced),
            "restored": list(event.restored),
        }
    )


def _link_rows(event: CompactionEvent) -> list[tuple[str, str]]:
    links: list[tuple[str, str]] = [(g, "excluded") for g in event.excluded]
    for summary, replaced in event.summarized.items():
        links.append((summary, "summary_inserted"))
        links.extend((g, "summarized") for g in replaced)
    links.extend((g, "reduced") for g in event.reduced)
    links.extend((g, "restored") for g in event.restored)
    return list(dict.fromkeys(links))


async def write_event(
    conn: AsyncConnection,
    s: SessionData,
    event: CompactionEvent,
    *,
    number: int,
    revision: int,
) -> None:
    """Insert the event row (its ``number`` in the session) and its links to groups."""
    await conn.execute(
        insert_rows("events"),
        {
            "tenant": s.tenant,
            "session_id": s.session_id,
            "event_id": event.id,
            "number": number,
            "phase": event.phase,
            "strategy": event.strategy,
            "params": event.params,
            "messages_before": event.messages_before,
            "messages_after": event.messages_after,
            "groups_before": event.groups_before,
            "groups_after": event.groups_after,
            "tokens_before": event.tokens_before,
            "tokens_after": event.tokens_after,
            "revision": revision,
            "created_at": event.created_at,
            "note": event_note(event),
        },
    )
    rows = [
        {
            "tenant": s.tenant,
            "session_id": s.session_id,
            "event_id": event.id,
            "group_id": group_id,
            "action": action,
        }
        for group_id, action in _link_rows(event)
    ]
    for part in chunks(rows):
        await conn.execute(insert_rows("event_groups"), list(part))
