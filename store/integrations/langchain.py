"""LangChain: a chat message history and an agent middleware kept in chatledger.

:class:`ChatledgerChatMessageHistory` is a ``BaseChatMessageHistory`` for code that
hands a history to LangChain (``RunnableWithMessageHistory``, which LangChain deprecates
in favour of LangGraph's persistence, or code of your own): its ``messages`` are the
session's request context (the active history, excluded groups left out), and its sync
methods (through a :class:`~store.SyncHistoryStore`) and async ones do real I/O.
LangChain decides what to save by the length of the history it read, so an instance
keeps returning the same messages until its next ``add_messages``.

:class:`ChatledgerMiddleware` is an agent middleware for ``create_agent``: before each
model call it sends the model the projection of the stored history plus the run's
messages (the session id read from the run's ``configurable``), it stores each model
response and each tool result as the run goes, and it runs the after-run compaction
when the run ends. Messages are stored by their LangChain id (LangGraph gives every
state message one), so with a checkpointer that holds the messages too nothing is
stored twice: a message already stored is skipped.

Both record the usage each model response reports (``AIMessage.usage_metadata``),
tied to the id the message is stored under; the middleware runs its phases (each
call's projection, the after-run compaction, ``calibrate=True``) through a
:class:`~store.provider.TwoPhaseProvider` on the store's own loop.

With ``recall=True`` the middleware's tools hold the recall tool
(:mod:`store.integrations.recall`), which searches the run's session, and each summary
the model is sent ends with a sentence saying it can be recalled.

Both take a ``store`` (a :class:`~store.SyncHistoryStore`, used and never closed) or a
``url``: instances on the same URL and tenant share one store, opened on first use and
closed when the last of them calls ``close``, or at exit.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar, cast

from store.contract import DEFAULT_TENANT, HistoryBackend
from store.errors import InvalidInput, SessionNotFound
from store.formats.langchain import from_langchain, to_langchain
from store.integrations._shared import SyncLease, adapter_options, provider_for
from store.integrations.compaction_tool import COMPACT_TOOL_DESCRIPTION, COMPACT_TOOL_NAME
from store.integrations.compaction_tool import compact_context as request_compaction
from store.integrations.recall import Recall, RecallOptions, recall_options
from store.integrations.usage import langchain_model, record_call, usage_from_langchain
from store.provider import ContextWindow, TwoPhaseProvider
from store.search.recall import RECALL_DESCRIPTION, RECALL_TOOL_NAME, with_recall_note
from store.sync import SyncHistoryStore
from store.usage.models import Usage
from strategies.base import CompactionStrategy
from strategies.messages import Message

try:
    from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest
    from langchain.agents.middleware.types import ModelResponse
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.messages import AIMessage, BaseMessage, ToolMessage, messages_from_dict
    from langchain_core.tools import BaseTool, StructuredTool
    from langgraph.config import get_config
    from langgraph.prebuilt.tool_node import ToolCallRequest
    from langgraph.runtime import Runtime
    from langgraph.types import Command
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "store.integrations.langchain needs LangChain: pip install 'chatledger[langchain]'"
    ) from exc

__all__ = ["ChatledgerChatMessageHistory", "ChatledgerMiddleware"]

T = TypeVar("T")


def _to_objects(messages: Sequence[Message]) -> list[BaseMessage]:
    return list(messages_from_dict(to_langchain(messages)))


def _to_stored(messages: Sequence[BaseMessage]) -> list[Message]:
    return from_langchain(list(messages), allow_custom_roles=True)


async def _on(store: SyncHistoryStore, work: Callable[[HistoryBackend], Awaitable[T]]) -> T:
    """Await ``work`` on the store's own loop, from the caller's loop."""
    return await store.loop.arun(_awaited(work(store.async_store)))


async def _awaited(awaitable: Awaitable[T]) -> T:
    return await awaitable


def _usage_of(message: BaseMessage) -> Usage | None:
    """The usage an AI message reports (``usage_metadata``), or None."""
    if not isinstance(message, AIMessage):
        return None
    metadata = cast(dict[str, Any] | None, message.usage_metadata)
    return usage_from_langchain(metadata, model=langchain_model(message.response_metadata))


def _call_id(message: BaseMessage) -> str:
    """A model call's id: its response's (``response_metadata["id"]``), else the id of the
    message it produced (stored under it)."""
    response_id = message.response_metadata.get("id")
    if isinstance(response_id, str) and response_id:
        return response_id
    return f"langchain-{message.id}"


async def _record_calls(
    phases: TwoPhaseProvider, session_id: str, messages: Sequence[BaseMessage]
) -> int:
    """Record the usage of each AI message of ``messages`` that reports one, tied to its
    id (the id it is stored under); the number recorded."""
    recorded = 0
    for message in messages:
        usage = _usage_of(message)
        if usage is None or not message.id:
            continue
        if await record_call(
            phases, session_id, usage, message_id=message.id, call_id=_call_id(message)
        ):
            recorded += 1
    return recorded


class ChatledgerChatMessageHistory(BaseChatMessageHistory):
    """A LangChain chat message history stored in chatledger (see the module docstring)."""

    def __init__(
        self,
        session_id: str,
        *,
        store: SyncHistoryStore | None = None,
        url: str | None = None,
        tenant: str = DEFAULT_TENANT,
    ) -> None:
        super().__init__()
        self.session_id = session_id
        self._lease = SyncLease.of(store, url=url, tenant=tenant)
        self.phases = provider_for(_AsyncStore(self._lease), ContextWindow())
        """What records the usage of the AI messages added (no strategies)."""
        self._read: list[BaseMessage] | None = None

    def store(self) -> SyncHistoryStore:
        """The store (opened now when this history opens its own)."""
        return self._lease.get()

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The session's request context (the same list until the next add)."""
        if self._read is None:
            self._read = _to_objects(self._lease.get().context(self.session_id))
        return list(self._read)

    async def aget_messages(self) -> list[BaseMessage]:
        """The session's request context, read without blocking the caller's loop."""
        if self._read is None:
            store = self._lease.get()
            context = await _on(store, lambda s: s.context(self.session_id))
            self._read = _to_objects(context)
        return list(self._read)

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Store ``messages`` in one write; record the usage each AI message reports
        (``usage_metadata``), tied to its stored id (an AI message that reports usage
        and has no id is given one)."""
        _with_ids([m for m in messages if _usage_of(m) is not None])
        store = self._lease.get()
        store.append(self.session_id, _to_stored(messages))
        self._read = None
        store.loop.run(_record_calls(self.phases, self.session_id, messages))

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """As :meth:`add_messages`, without blocking the caller's loop."""
        _with_ids([m for m in messages if _usage_of(m) is not None])
        batch = _to_stored(messages)
        store = self._lease.get()
        await _on(store, lambda s: s.append(self.session_id, batch))
        self._read = None
        await _on(store, lambda s: _record_calls(self.phases, self.session_id, messages))

    def clear(self) -> None:
        """Delete the session and everything stored for it."""
        try:
            self._lease.get().delete_session(self.session_id)
        except SessionNotFound:
            pass
        self._read = None

    async def aclear(self) -> None:
        """Delete the session, without blocking the caller's loop."""
        try:
            await _on(self._lease.get(), lambda s: s.delete_session(self.session_id))
        except SessionNotFound:
            pass
        self._read = None

    def close(self) -> None:
        """Release the store this history opened (a given store stays open)."""
        self._lease.release()


def _with_ids(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """``messages``, each given an id when it has none (LangGraph keeps the id it finds,
    so the stored message and the state's are one)."""
    for message in messages:
        if not message.id:
            message.id = str(uuid.uuid4())
    return list(messages)


class ChatledgerMiddleware(AgentMiddleware):
    """``create_agent`` middleware: the history of each model call comes from chatledger
    (see the module docstring)."""

    def __init__(
        self,
        *,
        store: SyncHistoryStore | None = None,
        url: str | None = None,
        tenant: str = DEFAULT_TENANT,
        session_id_key: str = "thread_id",
        before_strategy: CompactionStrategy | str | None = None,
        after_strategy: CompactionStrategy | str | None = None,
        max_context_window_tokens: int | None = None,
        max_output_tokens: int | None = None,
        reserved_tokens: int = 0,
        window: ContextWindow | None = None,
        recall: bool | RecallOptions = False,
        calibrate: bool = False,
        compaction_tool: bool = False,
    ) -> None:
        """Configure; opens nothing. ``before_strategy`` and ``after_strategy`` (strategies
        or specs), or the window sizes, choose the compaction, as for
        :class:`~store.provider.TwoPhaseProvider`; or give them all as one
        :class:`~store.provider.ContextWindow` (``window=``), whose tokenizer an owned
        store is opened with. ``recall=True`` (or
        :class:`~store.integrations.recall.RecallOptions`) puts the recall tool in
        :attr:`tools` and the note after each summary the model is sent.
        ``calibrate=True`` judges both phases in the provider's tokens by the session's
        fit (:class:`~store.provider.TwoPhaseProvider`). ``compaction_tool=True`` puts the
        compaction tool ``compact_context(reason, focus=None)`` in :attr:`tools`
        (:mod:`store.integrations.compaction_tool`): the model's next call is sent the
        compacted projection, and the after-run compaction records ``model_requested``."""
        super().__init__()
        with adapter_options():
            window = ContextWindow.of(
                window,
                before_strategy=before_strategy,
                after_strategy=after_strategy,
                max_context_window_tokens=max_context_window_tokens,
                max_output_tokens=max_output_tokens,
                reserved_tokens=reserved_tokens,
            )
        self._lease = SyncLease.of(store, url=url, tenant=tenant, tokenizer=window.tokenizer)
        self.session_id_key = session_id_key
        self.window = window
        """The compaction options this middleware runs with."""
        self.before_strategy = window.before
        self.after_strategy = window.after
        self.phases = provider_for(_AsyncStore(self._lease), window, calibrate=calibrate)
        """The two phases, on the store's own loop: each model call's projection, the
        after-run compaction, and each call's usage."""
        options = recall_options(recall)
        self.recall: Recall | None = (
            None if options is None else Recall.of(_AsyncStore(self._lease), options)
        )
        """The recall tool's searching, or None when it is off."""
        if not isinstance(compaction_tool, bool):
            raise InvalidInput(f"compaction_tool must be True or False, got {compaction_tool!r}")
        self.tools: list[BaseTool] = [] if self.recall is None else [self._recall_tool()]
        """The tools the middleware gives the agent: the recall tool and the compaction
        tool, each when it is on."""
        if compaction_tool:
            self.tools.append(self._compaction_tool())

    def store(self) -> SyncHistoryStore:
        """The store (opened now when this middleware opens its own)."""
        return self._lease.get()

    def _session_id(self) -> str:
        configurable = get_config().get("configurable") or {}
        session_id = configurable.get(self.session_id_key)
        if not isinstance(session_id, str) or not session_id:
            raise InvalidInput(
                f"ChatledgerMiddleware needs the session id in the run's config: "
                f'config={{"configurable": {{"{self.session_id_key}": "..."}}}}'
            )
        return session_id

    # -- the recall tool --------------------------------------------------------

    def _recall_tool(self) -> BaseTool:
        """The recall tool, searching the session of the run that calls it."""
        recall = self.recall
        assert recall is not None

        def search(query: str, cursor: str | None = None) -> str:
            session_id = self._session_id()
            return self._lease.get().loop.run(recall(session_id, query, cursor))

        async def asearch(query: str, cursor: str | None = None) -> str:
            session_id = self._session_id()
            return await _on(self._lease.get(), lambda s: recall(session_id, query, cursor))

        return StructuredTool.from_function(
            func=search,
            coroutine=asearch,
            name=RECALL_TOOL_NAME,
            description=RECALL_DESCRIPTION,
        )

    # -- the compaction tool ----------------------------------------------------

    def _compaction_tool(self) -> BaseTool:
        """The compaction tool, asking for compaction of the run's session."""
        phases = self.phases

        def compact(reason: str, focus: str | None = None) -> str:
            session_id = self._session_id()
            return self._lease.get().loop.run(request_compaction(phases, session_id, reason, focus))

        async def acompact(reason: str, focus: str | None = None) -> str:
            session_id = self._session_id()
            return await _on(
                self._lease.get(), lambda s: request_compaction(phases, session_id, reason, focus)
            )

        return StructuredTool.from_function(
            func=compact,
            coroutine=acompact,
            name=COMPACT_TOOL_NAME,
            description=COMPACT_TOOL_DESCRIPTION,
        )

    # -- model calls ------------------------------------------------------------

    def _projected(self, request: ModelRequest, context: list[Message]) -> ModelRequest:
        if self.recall is not None:
            context = with_recall_note(context, self.recall.note)
        return request.override(messages=cast(Any, _to_objects(context)))

    def wrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], ModelResponse],
    ) -> ModelResponse:
        """Store the run's messages, send the projection, store the response."""
        session_id = self._session_id()
        store = self._lease.get()
        store.append(session_id, _to_stored(_with_ids(request.messages)))
        context = store.loop.run(self.phases.load(session_id))
        response = handler(self._projected(request, context))
        answer = _with_ids(response.result)
        store.append(session_id, _to_stored(answer))
        store.loop.run(_record_calls(self.phases, session_id, answer))
        return response

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse:
        """As :meth:`wrap_model_call`, without blocking the caller's loop."""
        session_id = self._session_id()
        store = self._lease.get()
        batch = _to_stored(_with_ids(request.messages))
        phases = self.phases
        await _on(store, lambda s: s.append(session_id, batch))
        context = await _on(store, lambda s: phases.load(session_id))
        response = await handler(self._projected(request, context))
        produced = _with_ids(response.result)
        answer = _to_stored(produced)
        await _on(store, lambda s: s.append(session_id, answer))
        await _on(store, lambda s: _record_calls(phases, session_id, produced))
        return response

    # -- tool calls -------------------------------------------------------------

    @staticmethod
    def _results(outcome: ToolMessage | Command) -> list[BaseMessage]:  # type: ignore[type-arg]
        if isinstance(outcome, ToolMessage):
            return _with_ids([outcome])
        update = outcome.update if isinstance(outcome.update, dict) else {}
        found = update.get("messages", []) if isinstance(update, dict) else []
        return _with_ids([m for m in found if isinstance(m, BaseMessage)])

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command],  # type: ignore[type-arg]
    ) -> ToolMessage | Command:  # type: ignore[type-arg]
        """Run the tool and store its result at once."""
        outcome = handler(request)
        self._lease.get().append(self._session_id(), _to_stored(self._results(outcome)))
        return outcome

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command]],  # type: ignore[type-arg]
    ) -> ToolMessage | Command:  # type: ignore[type-arg]
        """As :meth:`wrap_tool_call`, without blocking the caller's loop."""
        outcome = await handler(request)
        session_id = self._session_id()
        batch = _to_stored(self._results(outcome))
        await _on(self._lease.get(), lambda s: s.append(session_id, batch))
        return outcome

    # -- the end of a run -------------------------------------------------------

    def after_agent(self, state: AgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Run the after strategy on the session (audited as ``after_run``)."""
        if self.after_strategy is not None:
            session_id = self._session_id()
            self._lease.get().loop.run(self._after_run(session_id))
        return None

    async def _after_run(self, session_id: str) -> None:
        await self.phases.save_turn(session_id, [], end_of_turn=True, existing=())

    async def aafter_agent(
        self,
        state: AgentState,
        runtime: Runtime[Any],
    ) -> dict[str, Any] | None:
        """As :meth:`after_agent`, without blocking the caller's loop."""
        if self.after_strategy is not None:
            session_id = self._session_id()
            await _on(self._lease.get(), lambda s: self._after_run(session_id))
        return None

    def close(self) -> None:
        """Release the store this middleware opened (a given store stays open)."""
        self._lease.release()


class _AsyncStore:
    """The async store behind a synchronous lease, handed to :class:`Recall` (which
    runs on that store's loop)."""

    def __init__(self, lease: SyncLease) -> None:
        self.lease = lease

    async def get(self) -> HistoryBackend:
        return self.lease.get().async_store
