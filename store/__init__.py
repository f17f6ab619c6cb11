"""chatledger's persistence: the SQL store, its migrations, the formats and the provider.

Integrations (``store.integrations.*``) and the CLI (``store.cli``) are never imported
from here: they load optional dependencies.
"""

from store.audit_models import CompactionEvent, ExcludedGroup, ImportResult, Stats, WhyResult
from store.engine import create_engine, normalize_url
from store.errors import (
    ChatledgerError,
    ConcurrentWriteError,
    CorruptRowError,
    InvalidInput,
    MigrationRequired,
    SessionNotFound,
    StoreError,
)
from store.history import HistoryStore
from store.memory import InMemoryHistoryStore
from store.migrations import downgrade, ensure_schema, migrate, migrate_sync
from store.models import Provenance, SessionInfo, StoredMessage

__all__ = [
    "ChatledgerError",
    "CompactionEvent",
    "ConcurrentWriteError",
    "CorruptRowError",
    "ExcludedGroup",
    "HistoryStore",
    "ImportResult",
    "InMemoryHistoryStore",
    "InvalidInput",
    "MigrationRequired",
    "Provenance",
    "SessionInfo",
    "SessionNotFound",
    "Stats",
    "StoreError",
    "StoredMessage",
    "WhyResult",
    "create_engine",
    "downgrade",
    "ensure_schema",
    "migrate",
    "migrate_sync",
    "normalize_url",
]
