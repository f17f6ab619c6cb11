"""chatledger's persistence: the store's contract, its backends, the provider, the formats.

``HistoryStore`` (SQL: SQLite or PostgreSQL) and ``InMemoryHistoryStore`` implement the
contract (``HistoryBackend``, with its parts ``ProviderBackend`` and ``DemoBackend``);
``TwoPhaseProvider`` gives an agent framework the before-call projection and the
after-run compaction over any of them. Integrations (``store.integrations.*``) and the
CLI (``store.cli``) are never imported from here: they load optional dependencies.
"""

from store.contract import DemoBackend, HistoryBackend, ProviderBackend
from store.errors import (
    ChatledgerError,
    ConcurrentWriteError,
    CorruptRowError,
    InvalidInput,
    MigrationRequired,
    SessionNotFound,
    StoreError,
)
from store.memory import InMemoryHistoryStore
from store.models import (
    CompactionEvent,
    ExcludedGroup,
    ImportResult,
    Provenance,
    SessionInfo,
    Stats,
    StoredMessage,
    WhyResult,
)
from store.provider import TwoPhaseProvider
from store.sql.engine import create_engine, normalize_url
from store.sql.migrations import downgrade, ensure_schema, migrate, migrate_sync
from store.sql.store import HistoryStore

__all__ = [
    "ChatledgerError",
    "CompactionEvent",
    "ConcurrentWriteError",
    "CorruptRowError",
    "DemoBackend",
    "ExcludedGroup",
    "HistoryBackend",
    "HistoryStore",
    "ImportResult",
    "InMemoryHistoryStore",
    "InvalidInput",
    "MigrationRequired",
    "Provenance",
    "ProviderBackend",
    "SessionInfo",
    "SessionNotFound",
    "Stats",
    "StoreError",
    "StoredMessage",
    "TwoPhaseProvider",
    "WhyResult",
    "create_engine",
    "downgrade",
    "ensure_schema",
    "migrate",
    "migrate_sync",
    "normalize_url",
]
