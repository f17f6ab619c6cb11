"""The SQL backend: SQLAlchemy over SQLite (aiosqlite) and PostgreSQL (asyncpg).

* :mod:`~store.sql.store`: :class:`~store.sql.store.HistoryStore`, the backend's one
  class: open, close, the write-retry loop, thin public methods.
* :mod:`~store.sql.append`: appends (the transaction, the rows, the insert pipeline,
  the counting thread).
* :mod:`~store.sql.projection`: the active view a strategy plans on and the model is
  sent, with the in-flight messages of a run, and the cache of active views.
* :mod:`~store.sql.compaction`: compaction on write (snapshot, plan, optimistic apply),
  the write-back of what the rules changed, restore and pin, the import of compacted
  history.
* :mod:`~store.sql.history`: history pages and streams, session listings.
* :mod:`~store.sql.audit`: events, excluded groups, why, stats.
* :mod:`~store.sql.recount`: recounting a session with another tokenizer.
* :mod:`~store.sql.mapping`: rows to models and back.
* :mod:`~store.sql.statements`: statements prebuilt once per shape; :mod:`~store.sql.sessions`:
  the session row (read, lock, create).
* :mod:`~store.sql.schema` (the tables), :mod:`~store.sql.migrations` (Alembic, driven
  from code), :mod:`~store.sql.engine` (URLs and connection setup),
  :mod:`~store.sql.sqlite_driver` (the one-hop aiosqlite adapter),
  :mod:`~store.sql.errors` (driver errors translated) and :mod:`~store.sql.dialect`,
  the one place that knows SQLite from PostgreSQL.
"""

from store.sql.store import HistoryStore, StoreOpener

__all__ = ["HistoryStore", "StoreOpener"]
