"""Microsoft Agent Framework: a history provider over the store, and a strategy adapter.

:class:`ChatledgerHistoryProvider` is an Agent Framework ``HistoryProvider``. It works in
both of the framework's modes:

- ``Agent(client, context_providers=[provider])``: the framework loads history once per
  run (:meth:`~ChatledgerHistoryProvider.before_run`) and saves the whole turn once
  (``after_run``), which then runs the *after* strategy.
- ``create_harness_agent(client, history_provider=provider, ...)``: the framework loads
  and saves around every model call; what was saved comes back on the next call. The
  *after* strategy runs when a saved batch ends the tool loop (it leaves no call
  unanswered).

Rules:

- Agent Framework's ids (positional ``msg_N``, or none) are not identities: the store
  gets fresh ids and keeps the originals in metadata. Replays (messages handed to
  ``save_messages`` that are already stored) are found with the framework's ordered
  tail-overlap rule (:func:`store.provider.new_messages`) against the stored tail,
  excluded and reduced messages included, never by content alone.
- Live saves drop the framework's compaction annotations (``_group``, ``_excluded``,
  summary links): in a live run they come from the request-only phase and must not
  become persistent. :meth:`~ChatledgerHistoryProvider.import_messages` keeps them, and
  the store turns them into exclusions and summaries with an audit event.
- ``session_id=None`` raises :class:`MissingSessionId`: pass an ``AgentSession`` to
  ``run`` (the framework also creates one when a run has none).

:func:`as_agent_framework` adapts any chatledger strategy to the framework's
``compaction_strategy`` protocol.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from pydantic import JsonValue

try:
    from agent_framework import HistoryProvider
    from agent_framework import Message as AFMessage
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "store.integrations.agent_framework needs Microsoft Agent Framework: "
        "pip install 'chatledger[agent-framework]'"
    ) from exc

from store.contract import HistoryBackend
from store.formats import AF_ANNOTATIONS_KEY, from_agent_framework, to_agent_framework
from store.models import CompactionEvent, ImportResult, Phase, StoredMessage
from store.provider import SaveResult, TwoPhaseProvider, unanswered_call_ids
from strategies.base import CompactionStrategy
from strategies.messages import Message
from strategies.tokenizers import Tokenizer
from strategies.view import View

if TYPE_CHECKING:
    from agent_framework import AgentSession, SessionContext, SupportsAgentRun

__all__ = [
    "AgentFrameworkStrategy",
    "ChatledgerHistoryProvider",
    "MissingSessionId",
    "as_agent_framework",
    "from_af_messages",
    "to_af_messages",
]


class MissingSessionId(ValueError):
    """The framework called the provider without a session id."""


def from_af_messages(messages: Sequence[AFMessage]) -> list[Message]:
    """Agent Framework messages as chatledger messages (see :mod:`store.formats`)."""
    return from_agent_framework([m.to_dict() for m in messages])


def to_af_messages(messages: Sequence[Message]) -> list[AFMessage]:
    """Chatledger messages as Agent Framework messages."""
    return [AFMessage.from_dict(item) for item in to_agent_framework(messages)]


def _without_annotations(messages: Sequence[Message]) -> list[Message]:
    out: list[Message] = []
    for message in messages:
        if AF_ANNOTATIONS_KEY in message.metadata:
            metadata = {k: v for k, v in message.metadata.items() if k != AF_ANNOTATIONS_KEY}
            message = message.model_copy(update={"metadata": metadata})
        out.append(message)
    return out


def _session(session_id: str | None) -> str:
    if session_id is None:
        raise MissingSessionId(
            "ChatledgerHistoryProvider needs a session id: run the agent with a session "
            "(agent.create_session() or AgentSession(session_id=...))"
        )
    return session_id


class _LazyStore:
    """A :class:`~store.contract.ProviderBackend` that opens the store on first use."""

    def __init__(
        self,
        store: HistoryBackend | None,
        url: str | None,
        tenant: str,
        tokenizer: Tokenizer | None,
    ) -> None:
        self.store = store
        self.owned = store is None
        self.url = url
        self.tenant = tenant
        self.tokenizer = tokenizer
        self._lock = asyncio.Lock()

    async def get(self) -> HistoryBackend:
        async with self._lock:
            if self.store is None:
                from store.sql.store import HistoryStore

                self.store = await HistoryStore.open(
                    self.url, tenant=self.tenant, tokenizer=self.tokenizer
                )
            return self.store

    async def aclose(self) -> None:
        store, owned = self.store, self.owned
        if owned and store is not None:
            self.store = None
            await store.aclose()

    async def append(self, session_id: str, messages: Sequence[Message]) -> list[str]:
        return await (await self.get()).append(session_id, messages)

    async def context(
        self,
        session_id: str,
        *,
        strategy: CompactionStrategy | None = None,
        pending: Sequence[Message] = (),
    ) -> list[Message]:
        backend = await self.get()
        return await backend.context(session_id, strategy=strategy, pending=pending)

    async def compact(
        self, session_id: str, strategy: CompactionStrategy, *, phase: Phase = "manual"
    ) -> CompactionEvent | None:
        return await (await self.get()).compact(session_id, strategy, phase=phase)

    async def history(
        self,
        session_id: str,
        *,
        include_excluded: bool = False,
        limit: int | None = None,
        before: int | None = None,
    ) -> list[StoredMessage]:
        backend = await self.get()
        return await backend.history(
            session_id, include_excluded=include_excluded, limit=limit, before=before
        )

    async def get_metadata(self, session_id: str) -> dict[str, JsonValue]:
        return await (await self.get()).get_metadata(session_id)

    async def set_metadata(self, session_id: str, metadata: Mapping[str, JsonValue]) -> None:
        await (await self.get()).set_metadata(session_id, metadata)


class ChatledgerHistoryProvider(HistoryProvider):
    """An Agent Framework history provider backed by a chatledger store."""

    def __init__(
        self,
        store: HistoryBackend | None = None,
        *,
        url: str | None = None,
        tenant: str = "default",
        source_id: str = "chatledger",
        before_strategy: CompactionStrategy | str | None = None,
        after_strategy: CompactionStrategy | str | None = None,
        max_context_window_tokens: int | None = None,
        max_output_tokens: int | None = None,
        reserved_tokens: int = 0,
        tokenizer: Tokenizer | None = None,
    ) -> None:
        """Configure; opens nothing. Without ``store``, ``HistoryStore.open(url, ...)``
        runs on first use and :meth:`aclose` closes it; a given store is left open."""
        super().__init__(source_id)
        self._store = _LazyStore(store, url, tenant, tokenizer)
        self.phases = TwoPhaseProvider(
            self._store,
            before_strategy=before_strategy,
            after_strategy=after_strategy,
            max_context_window_tokens=max_context_window_tokens,
            max_output_tokens=max_output_tokens,
            reserved_tokens=reserved_tokens,
            tokenizer=tokenizer,
        )
        self.last_save: SaveResult | None = None
        """What the latest :meth:`save_messages` did (ids appended, replays, event)."""

    async def store(self) -> HistoryBackend:
        """The store, opened if needed."""
        return await self._store.get()

    async def aclose(self) -> None:
        """Close the store if this provider opened it."""
        await self._store.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def get_messages(
        self, session_id: str | None, *, state: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[AFMessage]:
        """The before phase's projection of the stored session (no in-flight messages)."""
        return to_af_messages(await self.phases.load(_session(session_id)))

    async def before_run(
        self,
        *,
        agent: SupportsAgentRun,
        session: AgentSession,
        context: SessionContext,
        state: dict[str, Any],
    ) -> None:
        """Add the projection to the context, planned with the call's input in flight.

        The input messages count against the budget; the framework sends them itself,
        so they are left out of what is added.
        """
        session_id = _session(context.session_id)
        pending = from_af_messages(context.input_messages)
        projection = await self.phases.load(session_id, pending)
        pending_ids = {m.message_id for m in pending}
        history = [m for m in projection if m.message_id not in pending_ids]
        context.extend_messages(self, to_af_messages(history))

    async def save_messages(
        self,
        session_id: str | None,
        messages: Sequence[AFMessage],
        *,
        state: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Append what is new; run the after phase when the batch leaves no call open."""
        ours = _without_annotations(from_af_messages(messages))
        end_of_turn = any(m.role == "assistant" for m in ours) and not unanswered_call_ids(ours)
        self.last_save = await self.phases.save_turn(
            _session(session_id), ours, end_of_turn=end_of_turn
        )

    async def import_messages(self, session_id: str, messages: Sequence[AFMessage]) -> ImportResult:
        """Import messages from another Agent Framework history, annotations kept.

        The store's ``import_messages`` turns the framework's exclusions and summaries into
        its own, with an ``import`` audit event.
        """
        store = await self.store()
        return await store.import_messages(session_id, from_af_messages(messages))


class AgentFrameworkStrategy:
    """A chatledger strategy in Agent Framework's ``compaction_strategy`` protocol.

    Called with the framework's message list, it plans on the included messages and
    marks what the projection leaves out as excluded (``_excluded``, with the reason),
    inserts summaries where they belong and puts reduced contents in place, in the list
    it is given, as the framework's own strategies do.
    """

    def __init__(self, strategy: CompactionStrategy, *, tokenizer: Tokenizer | None = None):
        """Wrap ``strategy``; count with ``tokenizer`` (else the strategy's, else chars/4)."""
        self.strategy = strategy
        self.tokenizer = tokenizer or getattr(strategy, "tokenizer", None)
        self.__name__ = strategy.name

    async def __call__(self, messages: list[AFMessage]) -> bool:
        """Compact ``messages`` in place; return whether anything changed."""
        included = [
            i for i, m in enumerate(messages) if not m.additional_properties.get("_excluded")
        ]
        ours = _without_annotations(from_af_messages([messages[i] for i in included]))
        position = {m.message_id: i for m, i in zip(ours, included, strict=True)}
        view = View.from_messages(ours, self.tokenizer)
        changes = await self.strategy.plan(view)
        projection = await view.apply(changes).project()
        kept = {m.message_id for m in projection}
        reasons = {e.group_id: e.reason for e in changes.exclusions}
        changed = False
        for message in ours:
            target = messages[position[message.message_id]]
            if message.message_id not in kept:
                reason = reasons.get(f"group_{message.message_id}", "compacted")
                target.additional_properties["_excluded"] = True
                target.additional_properties["_exclude_reason"] = reason
                changed = True
        changed = self._reduce(messages, position, projection, ours) or changed
        return self._insert_summaries(messages, position, projection) or changed

    @staticmethod
    def _reduce(
        messages: list[AFMessage],
        position: dict[str, int],
        projection: list[Message],
        ours: list[Message],
    ) -> bool:
        originals = {m.message_id: m for m in ours}
        changed = False
        for message in projection:
            original = originals.get(message.message_id)
            if original is not None and original.contents != message.contents:
                reduced = to_af_messages([message])[0]
                messages[position[message.message_id]].contents = reduced.contents
                changed = True
        return changed

    @staticmethod
    def _insert_summaries(
        messages: list[AFMessage], position: dict[str, int], projection: list[Message]
    ) -> bool:
        inserts: list[tuple[int, AFMessage]] = []
        next_index = len(messages)
        for message in reversed(projection):
            if message.message_id in position:
                next_index = position[message.message_id]
                continue
            inserts.append((next_index, to_af_messages([message])[0]))
        for index, summary in inserts:  # reversed order keeps earlier indexes valid
            messages.insert(index, summary)
        return bool(inserts)


def as_agent_framework(
    strategy: CompactionStrategy, *, tokenizer: Tokenizer | None = None
) -> AgentFrameworkStrategy:
    """Adapt ``strategy`` to Agent Framework's ``compaction_strategy`` protocol."""
    return AgentFrameworkStrategy(strategy, tokenizer=tokenizer)
