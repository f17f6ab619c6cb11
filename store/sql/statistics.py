"""Planner statistics: PostgreSQL is told about the tables once they have grown.

A bulk import into fresh tables outruns autovacuum (and some servers run without it):
without statistics the planner takes a session's rows to be a handful and reads ``key =
ANY(:keys)`` by scanning the whole session and testing each row against every key, so a
100,000-message import took minutes instead of seconds. The sessions table matters as
much: every appended row's foreign-key check looks its session up, and a check planned
while the table was empty may walk the recency index ``(tenant, updated_at, session_id)``
instead of the primary key, one whole tenant a row (an import into fresh tables slowed
from about 2,400 to 460 messages a second as they grew). :class:`Statistics` runs
``ANALYZE`` on the tables an append writes to when a store has written as many rows as
the tables held at its last analysis (the first time after 1,000 rows), so that it
happens a few times over a large import and almost never on the per-turn path. Where
the database keeps no such statistics (SQLite's planner uses the indexes regardless) or
the role may not analyze the tables, nothing is done.
"""

from __future__ import annotations

import logging

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from store.sql import dialect
from store.sql.schema import EARLY_RESULTS, GROUPS, MESSAGES, OPEN_CALLS, SESSIONS

__all__ = ["FIRST_ANALYZE_ROWS", "Statistics"]

logger = logging.getLogger("chatledger.store")

FIRST_ANALYZE_ROWS = 1_000
"""Rows a store writes before its first analysis."""
_TABLES = ", ".join(t.name for t in (SESSIONS, MESSAGES, GROUPS, OPEN_CALLS, EARLY_RESULTS))


class Statistics:
    """When a store's writes call for fresh planner statistics, and running them."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._enabled = dialect.capabilities(engine.dialect).planner_statistics
        self._written = 0
        self._due = FIRST_ANALYZE_ROWS

    async def wrote(self, rows: int) -> None:
        """Record ``rows`` written (committed); analyze when they are due."""
        if not self._enabled or rows <= 0:
            return
        self._written += rows
        if self._written < self._due:
            return
        self._due = self._written * 2  # doubling: a few analyses over any import
        try:
            async with self._engine.connect() as conn:
                await conn.execute(text(f"ANALYZE {_TABLES}"))
                await conn.commit()
        except DBAPIError as error:  # the role may not own the tables: the server decides
            self._enabled = False
            logger.info("chatledger: cannot analyze its tables (%s); left to autovacuum", error)
