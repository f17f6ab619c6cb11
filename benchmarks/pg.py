"""PostgreSQL template databases: build a stored size once, copy it per run.

``CREATE DATABASE run TEMPLATE tpl`` copies a database file by file, which is much
faster than reloading it; the template must have no open connection while copied.
"""

from __future__ import annotations

import asyncio
import re
from urllib.parse import urlsplit, urlunsplit

__all__ = ["PgAdmin"]


class PgAdmin:
    """Creates and drops the harness's databases through one admin URL."""

    def __init__(self, url: str, *, prefix: str) -> None:
        self.url = url
        self.prefix = prefix

    def url_for(self, database: str) -> str:
        """The admin URL with its database replaced."""
        parts = urlsplit(self.url)
        return urlunsplit(parts._replace(path=f"/{database}"))

    def name(self, *parts: object) -> str:
        """A database name owned by this run of the harness (a plain identifier)."""
        return re.sub(r"\W", "_", "_".join([self.prefix, *(str(p) for p in parts)]).lower())

    def reachable(self) -> str | None:
        """None when the server answers, else the reason it does not."""
        try:
            asyncio.run(self._execute("SELECT 1"))
        except (OSError, ImportError) as exc:
            return f"PostgreSQL not reachable at {self.url}: {exc}"
        except Exception as exc:  # asyncpg's errors share no base with OSError
            return f"PostgreSQL not usable at {self.url}: {type(exc).__name__}: {exc}"
        return None

    def create(self, database: str, *, template: str | None = None) -> str:
        """Create ``database`` (empty, or as a copy of ``template``); return its URL."""
        suffix = f" TEMPLATE {template}" if template else ""
        asyncio.run(self._execute(f"DROP DATABASE IF EXISTS {database}"))
        asyncio.run(self._execute(f"CREATE DATABASE {database}{suffix}"))
        return self.url_for(database)

    def analyze(self, database: str) -> None:
        """Gather planner statistics in ``database`` (copied along with a template).

        A server with autovacuum on does this by itself after a bulk load; this one may
        not (``autovacuum = off`` on the benchmark machines), and without statistics
        PostgreSQL picks whole-session scans for primary-key lookups.
        """
        asyncio.run(self._execute("ANALYZE", database=database))

    def drop(self, database: str) -> None:
        """Drop ``database`` if it exists."""
        asyncio.run(self._execute(f"DROP DATABASE IF EXISTS {database}"))

    async def _execute(self, statement: str, *, database: str | None = None) -> None:
        import asyncpg  # type: ignore[import-untyped]

        url = self.url if database is None else self.url_for(database)
        dsn = url.replace("postgresql+asyncpg://", "postgresql://", 1)
        connection = await asyncpg.connect(dsn, timeout=5)
        try:
            await connection.execute(statement)
        finally:
            await connection.close()
