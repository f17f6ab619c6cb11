"""The SQL backend: SQLAlchemy over SQLite (aiosqlite) and PostgreSQL (asyncpg).

* :mod:`~store.sql.store`: :class:`~store.sql.store.HistoryStore`, the backend's one
  class: open, close, the write-retry loop, its primitives behind
  :class:`~store.contract.BackendBase`'s front.
* :mod:`~store.sql.append`: appends (the transaction, the rows, the inserts, the
  pipeline that writes one slice while the next is built, the counting thread).
* :mod:`~store.sql.annotation`: the annotation state new messages are annotated from,
  read by appends and by projections of in-flight messages alike.
* :mod:`~store.sql.projection`: the active view a strategy plans on and the model is
  sent, with the in-flight messages of a run, and the cache of active views. It only
  reads, and imports nothing of :mod:`~store.sql.append`.
* :mod:`~store.sql.compaction`: compaction on write (snapshot, plan, optimistic apply),
  the write-back of what the rules changed, restore and pin, the import of compacted
  history.
* :mod:`~store.sql.history`: history pages and streams, session listings.
* :mod:`~store.sql.audit`: the audit's events, written and read; excluded groups, why,
  stats.
* :mod:`~store.sql.upkeep`: the doctor, erasure (purge, redact, vacuum), recounting,
  the planner's statistics.
* :mod:`~store.sql.drivers`: the engine and connection setup, the one-hop aiosqlite
  and asyncpg paths, statements compiled once, the SQLite file read before opening; the
  only place that imports a database driver.
* :mod:`~store.sql.mapping`: rows to models and back, every row decoder derived from one
  table of the message columns; :mod:`~store.sql.codec`: every stored text encoded and
  decoded at one place.
* :mod:`~store.sql.statements`: statements prebuilt once per shape; :mod:`~store.sql.sessions`:
  the session row (read, lock, create).
* :mod:`~store.sql.schema` (the tables), :mod:`~store.sql.migrations.revisions` (the revisions
  shipped, read without Alembic), :mod:`~store.sql.migrations` (the schema checked on
  open, created, upgraded), :mod:`~store.sql.migrations.migrator` (Alembic, driven from code and
  imported only when the schema moves), :mod:`~store.sql.errors` (driver errors
  translated) and :mod:`~store.sql.dialect`, the one place that knows SQLite from
  PostgreSQL.

``HistoryStore`` and ``StoreOpener`` load on first use, so that importing one module of
this package does not import the whole backend.
"""

import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:
    from store.sql.store import HistoryStore, StoreOpener

__all__ = ["HistoryStore", "StoreOpener"]


def __getattr__(name: str) -> _typing.Any:
    if name not in __all__:
        raise AttributeError(f"module 'store.sql' has no attribute {name!r}")
    value = getattr(_importlib.import_module("store.sql.store"), name)
    globals()[name] = value
    return value
