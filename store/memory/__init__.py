"""An in-memory store with the whole contract of the SQL store, for tests and demos.

:class:`InMemoryHistoryStore` is real code that passes the same conformance suite as
:class:`store.history.HistoryStore`: appends with incremental annotation and cached
token counts, history paging, sessions and metadata, tenants, projections with pending
messages, compaction on write with its conflict check, audit, restore, pin and the
import of Agent Framework's compacted history. Simple rather than fast: use it in tests,
and as the plain model a stateful test compares the SQL store against.

A message joins its group's state: a late result (or a call after reasoning) joining a
group that compaction excluded is excluded with it, so that a group is always sent
whole or not at all.
"""

from store.memory._base import MemoryDatabase
from store.memory._store import InMemoryHistoryStore

__all__ = ["InMemoryHistoryStore", "MemoryDatabase"]
