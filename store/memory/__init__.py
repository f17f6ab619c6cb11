"""The in-memory backend: the whole store contract in plain Python, for tests and demos.

:class:`InMemoryHistoryStore` is real code that passes the same conformance suite as
:class:`store.HistoryStore`: appends with incremental annotation and cached token
counts, history paging, sessions and metadata, tenants, projections with pending
messages, compaction on write with its conflict check, audit, restore, pin, the
import of Agent Framework's compacted history, and branches (fork, rewind and the
restore of a superseded tail), all by the shared rules of :mod:`store.rules`.
:class:`MemoryDatabase` holds the records several stores (one per tenant) may share.
"""

from store.memory.store import InMemoryHistoryStore, MemoryDatabase

__all__ = ["InMemoryHistoryStore", "MemoryDatabase"]
