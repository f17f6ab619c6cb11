"""The systems compared, behind one small interface, and their registry.

Every system stores one session and offers the same operations: bulk-load batches of
messages, append a turn, run its after-run step, produce the next request context, and
read the full history. Conversion of generated OpenAI chat dicts into the system's own
types (:meth:`System.prepare`) is done outside the timed sections, as a caller would
hold its framework's native objects already.

Systems are loaded lazily by name so that a missing optional peer is reported as
skipped, with the reason, instead of failing the run. A chatledger system can also run
at another commit (``--baseline``): ``chatledger@<commit>`` is the registered
``chatledger`` entry, run on that commit's ``store`` and ``strategies``.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from benchmarks.generator import ChatDict
from benchmarks.tokenizing import TokenCounter, Unavailable

__all__ = [
    "REGISTRY",
    "System",
    "SystemSpec",
    "Target",
    "baseline_name",
    "load_system",
    "spec_for",
]

Backend = Literal["sqlite", "postgresql", "file"]

CONTEXT_WINDOW = 128_000
"""The model window every compacting system is configured with."""
MAX_OUTPUT_TOKENS = 16_384
"""Output reservation used with :data:`CONTEXT_WINDOW`."""
SESSION_ID = "bench-session"


@dataclass(frozen=True, slots=True)
class Target:
    """Where a system keeps its state: a file path (SQLite, pickle) or a database URL."""

    backend: Backend
    location: str

    def sqlalchemy_url(self, *, driver: str) -> str:
        """An SQLAlchemy URL for this target with the given driver (``aiosqlite``...)."""
        if self.backend == "sqlite":
            return f"sqlite+{driver}:///{self.location}"
        if self.backend == "postgresql":
            return self.location.replace("postgresql://", f"postgresql+{driver}://", 1)
        raise ValueError(f"no SQL URL for a {self.backend} target")


class System(ABC):
    """One system under test, holding one session."""

    name: str = ""

    def __init__(self, target: Target, *, tokenizer: TokenCounter | None = None) -> None:
        self.target = target
        self.tokenizer = tokenizer
        self.session_id = SESSION_ID
        """The session used (the workloads of many sessions or writers change it)."""

    @abstractmethod
    async def open(self, *, create: bool) -> None:
        """Connect; ``create`` sets up empty storage first."""

    @abstractmethod
    def prepare(self, items: list[ChatDict]) -> Any:
        """Convert generated dicts to this system's native objects (not timed)."""

    @abstractmethod
    async def load(self, native: Any) -> None:
        """Bulk-load one prepared batch into the stored session."""

    async def finish_load(self) -> dict[str, float]:
        """Finish a bulk load after its last batch (timed as part of a bulk import)."""
        return {}

    settle_every: int = 0
    """When above 0, a template build settles after every this many messages (as a
    long-lived agent compacts as it goes), which bounds the work of each settling."""

    async def settle(self) -> dict[str, float]:
        """Bring a built template to the steady state a long-lived agent would have
        (compaction applied); not part of the bulk-import figure."""
        return {}

    @abstractmethod
    async def append_turn(self, native: Any) -> None:
        """Append one prepared turn."""

    async def after_run(self) -> None:  # noqa: B027 - optional hook, no-op by default
        """Run the system's after-run step (compaction on write), if it has one."""

    @abstractmethod
    async def context(self) -> int:
        """Produce the next request context; return its number of messages."""

    @abstractmethod
    async def full_read(self) -> int:
        """Read the whole stored history; return its number of messages."""

    async def count_stored_once(self, tokenizer: TokenCounter) -> int | None:
        """Count every stored message once with ``tokenizer`` (the baseline of the
        token-counting workload); return how many messages, or None when the system
        keeps no stored history of its own to count."""
        return None

    def extra_metrics(self) -> dict[str, float]:
        """System-specific figures gathered during the run (sub-timings)."""
        return {}

    @abstractmethod
    async def close(self) -> None:
        """Release connections and write back any state."""


@dataclass(frozen=True, slots=True)
class SystemSpec:
    """A registry entry: where the system lives and what it supports."""

    module: str
    cls: str
    backend: Backend
    peer: bool = True
    """False for chatledger itself."""
    counts_tokens: bool = False
    """Whether the token-counting workload applies."""
    description: str = ""
    missing_reason: str = "optional peer not installed"
    """Why the system is skipped when its module cannot be imported."""
    workloads: frozenset[str] = field(
        default_factory=lambda: frozenset(
            {"per_turn", "bulk_import", "projection", "full_read", "full_read_tools"}
        )
    )


REGISTRY: dict[str, SystemSpec] = {
    # chatledger's own store: skipped with "store not yet available" until
    # store.HistoryStore exists (issues 4 to 6).
    "chatledger": SystemSpec(
        "benchmarks.peers.chatledger",
        "ChatledgerSystem",
        "sqlite",
        peer=False,
        counts_tokens=True,
        description="chatledger HistoryStore on SQLite (aiosqlite)",
        missing_reason="store not yet available",
        workloads=frozenset(
            {
                "per_turn",
                "bulk_import",
                "projection",
                "full_read",
                "full_read_tools",
                "many_sessions",
                "many_writers",
                "shared_session",
                "deferred_compaction",
                "branches",
                "search",
                "search_sessions",
                "erasure",
            }
        ),
    ),
    "chatledger_pg": SystemSpec(
        "benchmarks.peers.chatledger",
        "ChatledgerSystem",
        "postgresql",
        peer=False,
        description="chatledger HistoryStore on PostgreSQL (asyncpg)",
        missing_reason="store not yet available",
        workloads=frozenset(
            {
                "per_turn",
                "bulk_import",
                "projection",
                "many_writers",
                "shared_session",
                "branches",
                "search",
                "search_sessions",
                "erasure",
            }
        ),
    ),
    "chatledger_sealed": SystemSpec(
        "benchmarks.peers.chatledger",
        "SealedChatledgerSystem",
        "sqlite",
        peer=False,
        description="chatledger on SQLite with encryption at rest (AES-GCM, a local key file)",
        missing_reason="store not yet available",
        workloads=frozenset({"per_turn", "bulk_import", "projection", "full_read"}),
    ),
    "chatledger_unindexed": SystemSpec(
        "benchmarks.peers.chatledger",
        "UnindexedChatledgerSystem",
        "sqlite",
        peer=False,
        description="chatledger on SQLite with search off (no index to keep)",
        missing_reason="store not yet available",
        workloads=frozenset({"per_turn", "bulk_import", "erasure"}),
    ),
    "chatledger_pg_unindexed": SystemSpec(
        "benchmarks.peers.chatledger",
        "UnindexedChatledgerSystem",
        "postgresql",
        peer=False,
        description="chatledger on PostgreSQL with search off (no index to keep)",
        missing_reason="store not yet available",
        workloads=frozenset({"per_turn", "bulk_import", "erasure"}),
    ),
    "chatledger_direct_index": SystemSpec(
        "benchmarks.peers.chatledger",
        "DirectIndexChatledgerSystem",
        "sqlite",
        peer=False,
        description="chatledger on SQLite with search off, each batch's normalized text "
        "then inserted into an FTS5 index directly",
        missing_reason="store not yet available",
        workloads=frozenset({"bulk_import"}),
    ),
    "chatledger_pg_direct_index": SystemSpec(
        "benchmarks.peers.chatledger",
        "DirectIndexChatledgerSystem",
        "postgresql",
        peer=False,
        description="chatledger on PostgreSQL with search off, each batch's normalized "
        "text then inserted into a tsvector column with a GIN index directly",
        missing_reason="store not yet available",
        workloads=frozenset({"bulk_import"}),
    ),
    "agent_framework": SystemSpec(
        "benchmarks.peers.af_list",
        "AgentFrameworkSystem",
        "file",
        counts_tokens=True,
        description="Agent Framework 1.23.0: list + apply_compaction per model call",
        # a list in memory: bulk import and full read would measure list.extend
        workloads=frozenset({"per_turn", "projection"}),
    ),
    "openai_agents": SystemSpec(
        "benchmarks.peers.oai_sqlalchemy",
        "OpenAIAgentsSystem",
        "sqlite",
        description="OpenAI Agents SDK SQLAlchemySession on aiosqlite",
    ),
    "openai_agents_pg": SystemSpec(
        "benchmarks.peers.oai_sqlalchemy",
        "OpenAIAgentsSystem",
        "postgresql",
        description="OpenAI Agents SDK SQLAlchemySession on asyncpg",
        workloads=frozenset({"per_turn", "projection"}),
    ),
    "langchain": SystemSpec(
        "benchmarks.peers.lc_sql",
        "LangChainSystem",
        "sqlite",
        description="LangChain SQLChatMessageHistory on sqlite3",
    ),
    "limit": SystemSpec(
        "benchmarks.peers.limit",
        "LimitSystem",
        "sqlite",
        description="physical limit: sqlite3 executemany in one transaction + tiktoken",
    ),
}


WORKING_TREE_ONLY = frozenset(
    {
        "many_sessions",
        "many_writers",
        "shared_session",
        "deferred_compaction",
        "branches",
        "search",
        "search_sessions",
        "erasure",
    }
)
"""Workloads a ``--baseline`` twin does not run (their harness needs today's store;
``full_read_tools`` is ``full_read`` on another data set, which any store can hold)."""


def baseline_name(name: str, commit: str) -> str:
    """The name of chatledger system ``name`` run at ``commit`` (short hash)."""
    return f"{name}@{commit}"


def spec_for(name: str) -> SystemSpec:
    """The registry entry of ``name``, a registered name or a :func:`baseline_name`."""
    registered, _, commit = name.partition("@")
    spec = REGISTRY[registered]
    if not commit:
        return spec
    return replace(
        spec,
        description=f"{spec.description}, at commit {commit}",
        workloads=spec.workloads - WORKING_TREE_ONLY,
    )


def load_system(name: str, target: Target, *, tokenizer: TokenCounter | None = None) -> System:
    """Import and build the named system, or raise :class:`Unavailable` with the reason."""
    spec = spec_for(name)
    try:
        module = importlib.import_module(spec.module)
    except ImportError as exc:
        raise Unavailable(f"{spec.missing_reason} ({exc})") from exc
    system_cls: type[System] = getattr(module, spec.cls)
    system = system_cls(target, tokenizer=tokenizer)
    system.name = name
    return system
