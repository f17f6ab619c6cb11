"""chatledger's persistence: the store's contract, its backends, the provider, the formats.

``HistoryStore`` (SQL: SQLite or PostgreSQL) and ``InMemoryHistoryStore`` implement the
contract (``HistoryBackend``, with its parts ``ProviderBackend`` and ``DemoBackend``),
both on ``BackendBase``, the one front a backend is written on;
``TwoPhaseProvider`` gives an agent framework the before-call projection and the
after-run compaction over any of them. Integrations (``store.integrations.*``) and the
CLI (``store.cli``) are never imported from here: they load optional dependencies.

Names load on first use (``from store import HistoryStore`` imports the SQL backend
then), so that importing ``store`` or one of its light modules (the CLI's help, the
errors) costs no database library.
"""

import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:
    from store.contract import (
        BackendBase,
        DemoBackend,
        HistoryBackend,
        MetadataBackend,
        ProviderBackend,
    )
    from store.encryption import KeyRing
    from store.errors import (
        ChatledgerError,
        ConcurrentWriteError,
        CorruptRowError,
        EncryptionError,
        InvalidInput,
        InvalidKey,
        InvalidSource,
        KeyRequired,
        MigrationRequired,
        PlaintextRows,
        RecordConflict,
        SessionNotFound,
        StoreClosed,
        StoreError,
        StoreTimeout,
        WrongKey,
    )
    from store.formats import FormatError
    from store.memory import InMemoryHistoryStore
    from store.models import (
        BranchInfo,
        CompactionEvent,
        ExcludedGroup,
        ImportResult,
        Provenance,
        SearchHit,
        SearchPage,
        SessionInfo,
        Stats,
        StoredMessage,
        WhyResult,
    )
    from store.provider import ContextWindow, TwoPhaseProvider
    from store.sql.drivers.engine import create_engine, normalize_url
    from store.sql.migrations import downgrade, ensure_schema, migrate, migrate_sync
    from store.sql.store import HistoryStore
    from store.sync.store import SyncHistoryStore
    from store.usage import Calibration, ModelPrice, Usage, UsageCall, UsageReport, UsageRow

_HOMES: dict[str, tuple[str, ...]] = {
    "store.contract": (
        "BackendBase",
        "DemoBackend",
        "HistoryBackend",
        "MetadataBackend",
        "ProviderBackend",
    ),
    "store.errors": (
        "ChatledgerError",
        "ConcurrentWriteError",
        "CorruptRowError",
        "EncryptionError",
        "InvalidInput",
        "InvalidKey",
        "InvalidSource",
        "KeyRequired",
        "MigrationRequired",
        "PlaintextRows",
        "RecordConflict",
        "SessionNotFound",
        "StoreClosed",
        "StoreError",
        "StoreTimeout",
        "WrongKey",
    ),
    "store.encryption": ("KeyRing",),
    "store.formats": ("FormatError",),
    "store.memory": ("InMemoryHistoryStore",),
    "store.models": (
        "BranchInfo",
        "CompactionEvent",
        "ExcludedGroup",
        "ImportResult",
        "Provenance",
        "SearchHit",
        "SearchPage",
        "SessionInfo",
        "Stats",
        "StoredMessage",
        "WhyResult",
    ),
    "store.provider": ("ContextWindow", "TwoPhaseProvider"),
    "store.sql.drivers.engine": ("create_engine", "normalize_url"),
    "store.sql.migrations": ("downgrade", "ensure_schema", "migrate", "migrate_sync"),
    "store.sql.store": ("HistoryStore",),
    "store.sync.store": ("SyncHistoryStore",),
    "store.usage": (
        "Calibration",
        "ModelPrice",
        "Usage",
        "UsageCall",
        "UsageReport",
        "UsageRow",
    ),
}
"""The module each public name is imported from."""
_HOME = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str) -> _typing.Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'store' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "BackendBase",
    "BranchInfo",
    "Calibration",
    "ChatledgerError",
    "CompactionEvent",
    "ConcurrentWriteError",
    "ContextWindow",
    "CorruptRowError",
    "DemoBackend",
    "EncryptionError",
    "ExcludedGroup",
    "FormatError",
    "HistoryBackend",
    "HistoryStore",
    "ImportResult",
    "InMemoryHistoryStore",
    "InvalidInput",
    "InvalidKey",
    "InvalidSource",
    "KeyRequired",
    "KeyRing",
    "MetadataBackend",
    "MigrationRequired",
    "ModelPrice",
    "PlaintextRows",
    "Provenance",
    "ProviderBackend",
    "RecordConflict",
    "SearchHit",
    "SearchPage",
    "SessionInfo",
    "SessionNotFound",
    "Stats",
    "StoreClosed",
    "StoreError",
    "StoreTimeout",
    "StoredMessage",
    "SyncHistoryStore",
    "TwoPhaseProvider",
    "Usage",
    "UsageCall",
    "UsageReport",
    "UsageRow",
    "WhyResult",
    "WrongKey",
    "create_engine",
    "downgrade",
    "ensure_schema",
    "migrate",
    "migrate_sync",
    "normalize_url",
]
