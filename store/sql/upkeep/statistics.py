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
happens a few times over a large import and almost never on the per-turn path.

Many processes may write to one database, each a few rows at a time (agents on one
shared session, say), none of them writing enough alone. So at its first write and
then every :data:`CHECK_EVERY_ROWS` rows a store also asks the server how many rows of
its tables changed since their last analysis, counted over every connection
(``n_mod_since_analyze``), and analyzes each table that changed by as many rows as it
held at its last analysis (or :data:`FIRST_ANALYZE_ROWS`, never analyzed): the session
rows, updated on every write, are analyzed alone, without sampling the messages again.
Without it, on a server without autovacuum, eight writers of one session never analyzed
it, and the compaction's read of the touched groups was planned on guesses: it scanned
the session's groups once for each of them, about 0.3 s at 1,200 groups, while holding
the session's row lock, so that the turns behind it queued for seconds.

A table no one has analyzed yet (fresh tables: autovacuum looks once a minute; the
catalog tells, see :data:`_CHANGED`) is due much earlier, at :data:`UNANALYZED_ROWS`
changed rows: that guessing costs the square of the session's groups, and four
writers sharing a new session had turns of 10 s (p99) before the groups table reached
the thousand rows. One analysis is enough for the planner to scale its estimates with
the table (the rows a page it measured, times the pages there are now); later ones
follow the rule above.

Where the database keeps no such statistics (SQLite's planner uses the indexes
regardless) or the role may not analyze the tables, nothing is done.
"""

from __future__ import annotations

import logging

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from store.sql import dialect
from store.sql.schema import EARLY_RESULTS, GROUPS, MESSAGES, OPEN_CALLS, SESSIONS

__all__ = ["CHECK_EVERY_ROWS", "FIRST_ANALYZE_ROWS", "UNANALYZED_ROWS", "Statistics"]

logger = logging.getLogger("chatledger.store")

FIRST_ANALYZE_ROWS = 1_000
"""Rows a store writes before its first analysis, and the fewest changed rows of an
analyzed table that call for another."""
UNANALYZED_ROWS = 100
"""Changed rows of a table never analyzed that call for its first analysis."""
CHECK_EVERY_ROWS = 100
"""Rows a store writes between two looks at the server's count of changed rows (the
first look is at its first write)."""
_NAMES = [t.name for t in (SESSIONS, MESSAGES, GROUPS, OPEN_CALLS, EARLY_RESULTS)]
_CHANGED = text(
    "SELECT c.relname FROM pg_stat_user_tables AS s JOIN pg_class AS c ON c.oid = s.relid "
    "WHERE s.relid = ANY(CAST(:tables AS regclass[])) "
    "AND s.n_mod_since_analyze >= CASE "
    "WHEN c.reltuples < 0 OR (c.reltuples = 0 "
    "AND s.last_analyze IS NULL AND s.last_autoanalyze IS NULL) THEN :unanalyzed "
    "ELSE greatest(:first, c.reltuples) END ORDER BY c.relname"
)
"""The tables that changed by as many rows as they held when last analyzed, or by
:data:`UNANALYZED_ROWS` when never analyzed.

A table never analyzed nor vacuumed holds -1 rows in the catalog (PostgreSQL 14 and
later; 0 before, without a time of analysis). The times of analysis alone do not tell:
they are counters of the server's, empty in a database created from a template and
after a crash, where the catalog keeps the rows counted (a store took a table of
100,000 messages for one never analyzed and analyzed it inside a turn: 490 ms)."""


class Statistics:
    """When a store's writes call for fresh planner statistics, and running them."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._enabled = dialect.capabilities(engine.dialect).planner_statistics
        self._written = 0
        self._due = FIRST_ANALYZE_ROWS
        self._unchecked = CHECK_EVERY_ROWS
        """Rows written since the last look at the server's counts (as many as between two
        looks before the first write: a database left unanalyzed is seen at once)."""

    async def wrote(self, rows: int) -> None:
        """Record ``rows`` written (committed); analyze when they are due."""
        if not self._enabled or rows <= 0:
            return
        self._written += rows
        self._unchecked += rows
        mine = self._written >= self._due
        if not mine and self._unchecked < CHECK_EVERY_ROWS:
            return
        self._unchecked = 0
        if mine:
            self._due = self._written * 2  # doubling: a few analyses over any import
        try:
            async with self._engine.connect() as conn:
                due = _NAMES
                if not mine:  # only the tables the server counts enough changes of
                    params = {
                        "first": FIRST_ANALYZE_ROWS,
                        "unanalyzed": UNANALYZED_ROWS,
                        "tables": _NAMES,
                    }
                    found = set((await conn.execute(_CHANGED, params)).scalars())
                    due = [name for name in _NAMES if name in found]
                if due:
                    await conn.execute(text(f"ANALYZE {', '.join(due)}"))
                await conn.commit()
        except DBAPIError as error:  # the role may not own the tables: the server decides
            self._enabled = False
            logger.info("chatledger: cannot analyze its tables (%s); left to autovacuum", error)
