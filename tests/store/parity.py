"""Run the same operations on the SQL store and the in-memory store, and compare."""

from __future__ import annotations

from typing import Any

from store import HistoryStore
from store.memory import InMemoryHistoryStore

Store = HistoryStore | InMemoryHistoryStore


def _event_view(event: Any, ids: dict[str, str]) -> Any:
    data = event.model_dump(exclude={"id", "created_at", "duration_seconds"})
    if "event_id" in data["params"]:
        data["params"] = {**data["params"], "event_id": ids.get(data["params"]["event_id"])}
    return data


async def observed(store: Store, session_id: str) -> dict[str, Any]:
    """What a user can see of a session, with random ids and times left out."""
    events = await store.audit(session_id)
    ids = {e.id: f"event{n}" for n, e in enumerate(reversed(events))}
    history = [
        m.model_dump(exclude={"stored_at", "imported_at", "tenant"})
        for m in await store.history(session_id, include_excluded=True)
    ]
    for row in history:
        for key in ("excluded_event_id", "reduced_event_id"):
            row[key] = ids.get(row[key], row[key])
    excluded = [
        {**g.model_dump(exclude={"excluded_at"}), "event_id": ids.get(g.event_id or "")}
        for g in await store.excluded(session_id)
    ]
    stats = (await store.stats(session_id)).model_dump()
    info = (await store.session(session_id)).model_dump(
        exclude={"created_at", "updated_at", "revision"}
    )
    return {
        "context": await store.context(session_id),
        "history": history,
        "excluded": excluded,
        "stats": stats,
        "info": info,
        "events": [_event_view(e, ids) for e in events],
    }
