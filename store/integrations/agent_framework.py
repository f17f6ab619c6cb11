"""Microsoft Agent Framework: a history provider, a strategy adapter, bounded tool results.

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

Usage: every model call's reported usage is recorded in the session
(:meth:`~store.provider.TwoPhaseProvider.record_usage`): by :class:`UsageMiddleware`,
which :meth:`~ChatledgerHistoryProvider.before_run` adds to each run of a plain
``Agent``, or, for an agent that saves around every call (the harness), by
:meth:`~ChatledgerHistoryProvider.after_run` before it saves the call's messages. The
call is tied to the id its assistant message is stored under (:func:`stored_id`).

:func:`as_agent_framework` adapts any chatledger strategy to the framework's
``compaction_strategy`` protocol; :func:`agent_triggered` gives Agent Framework 1.26's
``AgentTriggeredCompactionStrategy`` around one run as asked for, and the provider asks
the store for compaction (reason ``model_requested``) when it saves a completed call of
its ``compact_context`` tool.

Client-managed history (Agent Framework 1.23 to 1.26): a strategy that sets
``requires_client_managed_history = True`` (itself, or one it wraps or composes; see
:func:`needs_client_managed_history`) compacts a history kept on the client, so it
cannot run on a conversation the service keeps (``store`` on, by the run's options, the
agent's or the chat client's default, or a service conversation id): the provider's
hooks refuse it with :class:`ClientManagedHistoryRequired`, and the adapted strategy
passes the capability on, so that Agent Framework 1.26's chat client refuses it as it
refuses its own (1.23's knows no such capability).

:func:`bounded_tools` returns the middleware that bounds every tool result before the
framework puts it into the history (:mod:`strategies.bounded`), one token allowance per
model response shared by that response's calls:

- an agent middleware opens the run's scope (a context variable, so nothing is shared
  between runs, concurrent ones included) and picks the tokenizer: the one given, else
  the store's when the agent has a :class:`ChatledgerHistoryProvider`, else
  ``o200k_base``;
- a chat middleware sees each model response and opens one
  :class:`~strategies.bounded.ToolResultAllowance` for the function calls it asks for,
  announcing how many (``fair_share`` divides by that number);
- a function middleware bounds each result by its tool's budget and its response's
  allowance, and puts back compact JSON (the framework's own serialization adds spaces).
"""

from __future__ import annotations

import contextlib
import json
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Self

try:
    from agent_framework import (
        AgentContext,
        AgentMiddleware,
        ChatContext,
        ChatMiddleware,
        ChatResponse,
        ChatResponseUpdate,
        Content,
        FunctionInvocationContext,
        FunctionMiddleware,
        FunctionTool,
        HistoryProvider,
        MiddlewareTermination,
        ResponseStream,
    )
    from agent_framework import Message as AFMessage
    from agent_framework._sessions import is_local_history_conversation_id
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "store.integrations.agent_framework needs Microsoft Agent Framework: "
        "pip install 'chatledger[agent-framework]'"
    ) from exc

from store.contract import HistoryBackend
from store.deferred import DEFAULT_CLOSE_TIMEOUT, FlushResult
from store.errors import InvalidInput
from store.formats import (
    AF_ANNOTATIONS_KEY,
    ORIGINAL_ID_KEY,
    from_agent_framework,
    to_agent_framework,
)
from store.integrations._shared import StoreLease, adapter_options, provider_for
from store.integrations.compaction_tool import COMPACT_TOOL_NAME, MODEL_REQUESTED
from store.integrations.recall import Recall, RecallOptions, recall_options
from store.integrations.usage import record_call, usage_from_agent_framework
from store.models import ImportResult
from store.provider import CompactionMode, ContextWindow, SaveResult, unanswered_call_ids
from store.rules.checks import resolve_strategy
from store.search.recall import RECALL_DESCRIPTION, RECALL_TOOL_NAME, with_recall_note
from strategies.base import CompactionStrategy
from strategies.bounded import (
    AllowancePolicy,
    ResultBudgetError,
    ToolResultAllowance,
    bound_result,
    notice_tokens,
)
from strategies.bounded.allowance import POLICIES
from strategies.bounded.results import check_int, default_tokenizer
from strategies.messages import FunctionCallContent, FunctionResultContent, Message
from strategies.requested import requested
from strategies.tokenizers import Tokenizer
from strategies.view import View

if TYPE_CHECKING:
    from agent_framework import AgentSession, SessionContext, SupportsAgentRun

__all__ = [
    "AgentFrameworkStrategy",
    "BoundedToolsMiddleware",
    "ChatledgerHistoryProvider",
    "ClientManagedHistoryRequired",
    "MissingSessionId",
    "UsageMiddleware",
    "agent_triggered",
    "as_agent_framework",
    "bounded_tools",
    "from_af_messages",
    "needs_client_managed_history",
    "stored_id",
    "to_af_messages",
]


logger = logging.getLogger("chatledger.integrations")


class MissingSessionId(InvalidInput):
    """The framework called the provider without a session id."""


class ClientManagedHistoryRequired(InvalidInput):
    """A strategy that needs client-managed history was to run on a conversation the
    service keeps (Agent Framework 1.26's own refusal, in chatledger's error tree)."""


def needs_client_managed_history(strategy: object) -> bool:
    """Whether ``strategy`` needs the history kept on the client: Agent Framework 1.26's
    optional capability ``requires_client_managed_history = True``, on the strategy or
    on any strategy it wraps (``strategy``) or composes (``strategies``), which is how
    the framework asks wrappers and compositions to pass it on."""
    seen: set[int] = set()
    todo = [strategy]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if getattr(current, "requires_client_managed_history", False) is True:
            return True
        todo.append(getattr(current, "strategy", None))
        nested = getattr(current, "strategies", None)
        if isinstance(nested, list | tuple):
            todo.extend(nested)
    return False


def _service_history(agent: object, session: AgentSession, context: SessionContext) -> str | None:
    """How the service keeps the run's conversation, or None when the client does: the
    test of Agent Framework 1.26's chat client (``store`` from the run's options, else
    the agent's, else the client's default; a continuation option such as a service
    conversation id), the session's service id, and, when saving, the conversation id
    the service answered with."""
    defaults = getattr(agent, "default_options", None)
    options: dict[str, Any] = dict(defaults) if isinstance(defaults, Mapping) else {}
    options.update(context.options)
    client = getattr(agent, "client", None)
    store = options.get("store")
    if store is None and getattr(client, "STORES_BY_DEFAULT", False) is True:
        return f"{type(client).__name__} stores the history by default"
    if store is not None and store is not False:
        return f"store={store!r}"
    names = getattr(client, "SERVICE_CONTINUATION_OPTION_NAMES", ("conversation_id",))
    for name in names if isinstance(names, tuple) else ("conversation_id",):
        value = options.get(name)
        if value is None or value == "":
            continue
        if name == "conversation_id" and isinstance(value, str):
            if is_local_history_conversation_id(value):
                continue
        return f"{name}={value!r}"
    service_id = context.service_session_id or session.service_session_id
    if service_id and not (
        isinstance(service_id, str) and is_local_history_conversation_id(service_id)
    ):
        return f"service_session_id={service_id!r}"
    response = context.response  # set when saving: the service may have named it
    raw = response.raw_representation if response is not None else None
    named = raw.conversation_id if isinstance(raw, ChatResponse) else None
    if named and not is_local_history_conversation_id(named):
        return f"the service's conversation_id={named!r}"
    return None


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


_TRIGGERS_KEPT: Final = 1024
"""Calls of the trigger tool a provider remembers while their results are not saved."""


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
        compaction: CompactionMode = "inline",
        window: ContextWindow | None = None,
        recall: bool | RecallOptions = False,
        calibrate: bool = False,
        record_usage: bool = True,
        trigger_tool: str | None = COMPACT_TOOL_NAME,
    ) -> None:
        """Configure; opens nothing. Without ``store``, ``HistoryStore.open(url, ...)``
        runs on first use, shared by the providers on the same URL, tenant and tokenizer,
        and :meth:`aclose` gives it back (the last one closes it); a given store is used,
        ``url`` is then unused, and it is left open. The strategies and window sizes
        choose the compaction, as for :class:`store.provider.TwoPhaseProvider`, or give
        them all as one :class:`~store.provider.ContextWindow` (``window=``), whose
        tokenizer an owned store is opened with. ``compaction="deferred"`` runs the after
        phase in the background; :meth:`aclose` waits for it. ``recall=True`` (or
        :class:`~store.integrations.recall.RecallOptions`) adds the recall tool to each
        run's tools, searching the run's session, and a sentence after each summary the
        model is sent (see :mod:`store.integrations.recall`). ``calibrate=True`` judges
        both phases in the provider's tokens by the session's fit
        (:class:`~store.provider.TwoPhaseProvider`). With ``record_usage`` (the default)
        each run gets :attr:`usage_middleware`, which records every model call's usage
        (see the module docstring). A completed call of the tool ``trigger_tool`` (Agent
        Framework 1.26's ``AgentTriggeredCompactionStrategy``'s, ``compact_context``; None:
        none) asks for compaction of the stored history, as the model did (see the
        module docstring)."""
        super().__init__(source_id)
        with adapter_options():
            window = ContextWindow.of(
                window,
                before_strategy=before_strategy,
                after_strategy=after_strategy,
                max_context_window_tokens=max_context_window_tokens,
                max_output_tokens=max_output_tokens,
                reserved_tokens=reserved_tokens,
                tokenizer=tokenizer,
            )
        self._lease = StoreLease(store, url=url, tenant=tenant, tokenizer=window.tokenizer)
        self.phases = provider_for(self._lease, window, compaction=compaction, calibrate=calibrate)
        self.records_usage = record_usage
        """Whether :meth:`before_run` adds :attr:`usage_middleware` to each run."""
        self.usage_middleware = UsageMiddleware(self)
        """The chat middleware that records each model call's usage in the run's session
        (:meth:`before_run` adds it to each run when :attr:`records_usage` is on)."""
        options = recall_options(recall)
        self.recall: Recall | None = None if options is None else Recall.of(self._lease, options)
        """The recall tool's searching, or None when it is off."""
        self.last_save: SaveResult | None = None
        """What the latest :meth:`save_messages` did (ids appended, replays, event)."""
        if trigger_tool is not None and (not isinstance(trigger_tool, str) or not trigger_tool):
            raise InvalidInput(f"trigger_tool must be a tool name or None, got {trigger_tool!r}")
        self.trigger_tool = trigger_tool
        """The tool whose completed call asks for compaction (None: none)."""
        self._triggers: dict[str, None] = {}
        """Calls of :attr:`trigger_tool` saved without their result yet (the newest kept)."""
        self._client_history = [
            s
            for s in (self.phases.before_strategy, self.phases.after_strategy)
            if s is not None and needs_client_managed_history(s)
        ]

    def _refuse_service_history(
        self, agent: object, session: AgentSession, context: SessionContext
    ) -> None:
        """Raise :class:`ClientManagedHistoryRequired` when a strategy of this provider
        needs client-managed history and the service keeps the run's conversation."""
        if not self._client_history:
            return
        how = _service_history(agent, session, context)
        if how is not None:
            raise ClientManagedHistoryRequired(
                f"strategy {self._client_history[0].name!r} requires client-managed history, "
                f"but the service keeps this conversation ({how}): set store=False and do "
                "not use a service-managed continuation option"
            )

    async def store(self) -> HistoryBackend:
        """The store, opened if needed."""
        return await self._lease.get()

    async def aclose(self, *, timeout: float = DEFAULT_CLOSE_TIMEOUT) -> FlushResult:  # noqa: ASYNC109
        """Finish the deferred compactions (within ``timeout`` seconds, see
        :meth:`TwoPhaseProvider.aclose`), then give back the store this provider opened;
        name the sessions whose compaction was left undone."""
        result = await self.phases.aclose(timeout=timeout)
        await self._lease.release()
        return result

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
        return to_af_messages(self._noted(await self.phases.load(_session(session_id))))

    def _noted(self, projection: list[Message]) -> list[Message]:
        """The projection with the recall note after each summary, when the tool is on."""
        return projection if self.recall is None else with_recall_note(projection, self.recall.note)

    def recall_tool(self, session_id: str) -> FunctionTool:
        """The recall tool of one session (what :meth:`before_run` adds to a run's tools)."""
        recall = self.recall
        if recall is None:
            raise InvalidInput("this provider was made without recall=True")

        async def search(query: str, cursor: str | None = None) -> str:
            return await recall(session_id, query, cursor)

        return FunctionTool(name=RECALL_TOOL_NAME, description=RECALL_DESCRIPTION, func=search)

    async def before_run(
        self,
        *,
        agent: SupportsAgentRun,
        session: AgentSession,
        context: SessionContext,
        state: dict[str, Any],
    ) -> None:
        """Add the projection to the context, planned with the call's input in flight,
        and the recall tool to the run's tools when it is on.

        The input messages count against the budget; the framework sends them itself,
        so they are left out of what is added.

        Raises:
            ClientManagedHistoryRequired: a strategy of this provider needs
                client-managed history and the service keeps the conversation.
        """
        self._refuse_service_history(agent, session, context)
        session_id = _session(context.session_id)
        pending = from_af_messages(context.input_messages)
        projection = self._noted(await self.phases.load(session_id, pending))
        pending_ids = {m.message_id for m in pending}
        history = [m for m in projection if m.message_id not in pending_ids]
        context.extend_messages(self, to_af_messages(history))
        if self.records_usage and not _per_call(agent):
            context.extend_middleware(self.source_id, [self.usage_middleware])
        if self.recall is not None:
            context.extend_tools(self.source_id, [self.recall_tool(session_id)])

    async def after_run(
        self,
        *,
        agent: SupportsAgentRun,
        session: AgentSession,
        context: SessionContext,
        state: dict[str, Any],
    ) -> None:
        """Save the run's messages (the framework's ``HistoryProvider.after_run``). An
        agent that saves around every model call (``create_harness_agent``) calls it once
        per call, with that call's response, whose usage is recorded first (such an
        agent applies no middleware a provider adds). A strategy that needs
        client-managed history is refused here too for such an agent, whose
        :meth:`before_run` is not called when the service keeps its history (a plain
        agent's was, before the model call; Agent Framework 1.23 has taken ``store`` out
        of the run's options by now)."""
        if _per_call(agent):
            self._refuse_service_history(agent, session, context)
        response = context.response
        if self.records_usage and _per_call(agent) and response is not None:
            raw = response.raw_representation
            if isinstance(raw, ChatResponse) and context.session_id is not None:
                await self.usage_middleware.record(context.session_id, raw)
        await super().after_run(agent=agent, session=session, context=context, state=state)

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
        session = _session(session_id)
        answered = self._answered_triggers(ours)
        if not answered:
            self.last_save = await self.phases.save_turn(session, ours, end_of_turn=end_of_turn)
            return
        # the model asked for compaction: ask the store once the result is stored, then
        # run the after phase, which compacts as asked
        stored = await self.phases.save_turn(session, ours, end_of_turn=False)
        phases = self.phases
        compacts = phases.after_strategy is not None or phases.before_strategy is not None
        if compacts and answered & set(stored.appended):
            await phases.request_compaction(session, reason=MODEL_REQUESTED)
        if end_of_turn:
            after = await self.phases.save_turn(session, [], end_of_turn=True, existing=())
            stored = replace(stored, compaction=after.compaction, deferred=after.deferred)
        self.last_save = stored

    def _answered_triggers(self, messages: Sequence[Message]) -> set[str]:
        """The ids of the messages in ``messages`` that hold the result of a call of
        :attr:`trigger_tool` (made in them or in a batch saved before)."""
        if self.trigger_tool is None:
            return set()
        answered: set[str] = set()
        for message in messages:
            for content in message.contents:
                if isinstance(content, FunctionCallContent) and content.name == self.trigger_tool:
                    self._triggers[content.call_id] = None
                elif (
                    isinstance(content, FunctionResultContent) and content.call_id in self._triggers
                ):
                    del self._triggers[content.call_id]
                    answered.add(message.message_id)
        while len(self._triggers) > _TRIGGERS_KEPT:
            del self._triggers[next(iter(self._triggers))]
        return answered

    async def import_messages(self, session_id: str, messages: Sequence[AFMessage]) -> ImportResult:
        """Import messages from another Agent Framework history, annotations kept.

        The store's ``import_messages`` turns the framework's exclusions and summaries into
        its own, with an ``import`` audit event.
        """
        store = await self.store()
        return await store.import_messages(session_id, from_af_messages(messages))


def _per_call(agent: object) -> bool:
    """Whether ``agent`` loads and saves its history around every model call (then it
    calls a provider's hooks once per call, and applies no middleware they add)."""
    return getattr(agent, "require_per_service_call_history_persistence", False) is True


def _stable(message_id: str | None) -> bool:
    """Whether the store keeps a message's own id ``message_id`` (not positional, not
    missing)."""
    if not message_id:
        return False
    [ours] = from_agent_framework([{"role": "assistant", "message_id": message_id}])
    return ORIGINAL_ID_KEY not in ours.metadata


def _usage_only(update: ChatResponseUpdate) -> bool:
    return bool(update.contents) and all(c.type == "usage" for c in update.contents)


def _fresh_id() -> str:
    return f"chatledger-{uuid.uuid4().hex}"


def stored_id(message: AFMessage) -> str:
    """The id ``message`` is stored under by :class:`ChatledgerHistoryProvider`: its own
    when the store keeps it, else a fresh one given to it now (the framework saves the
    message object it was given, id included)."""
    if message.message_id is not None and _stable(message.message_id):
        return message.message_id
    message.message_id = _fresh_id()
    return message.message_id


class UsageMiddleware(ChatMiddleware):
    """Records the usage of each model response in the run's session, through the
    provider's phases (:meth:`~store.provider.TwoPhaseProvider.record_usage`).

    It sees every model call, those of the framework's function-invocation loop
    included, streamed or not. A response that reports no usage records nothing. The
    call is tied to the response's last assistant message, by the id that message is
    stored under (:func:`stored_id`; streamed, each update of the response is given
    that id as it passes, since the framework builds the saved messages from the
    updates); its ``call_id`` is the response's id, or, when
    the response has none, one made of that message id (the same response seen twice,
    by this middleware added twice for instance, is recorded once).
    """

    def __init__(self, provider: ChatledgerHistoryProvider) -> None:
        self.provider = provider

    async def process(self, context: ChatContext, call_next: Callable[[], Awaitable[None]]) -> None:
        await call_next()
        session_id = getattr(context.session, "session_id", None)
        if not isinstance(session_id, str):
            return
        result = context.result
        if isinstance(result, ChatResponse):
            await self.record(session_id, result)
        elif isinstance(result, ResponseStream):
            given: dict[str | None, str] = {}

            def named(update: ChatResponseUpdate) -> ChatResponseUpdate:
                # the framework builds the messages it saves from the updates: the id the
                # call is tied to must be on them (a usage-only update makes no message)
                if update.role not in (None, "assistant") or _usage_only(update):
                    return update
                original = update.message_id
                if original not in given:
                    given[original] = original if _stable(original) and original else _fresh_id()
                update.message_id = given[original]
                return update

            async def recorded(response: ChatResponse) -> ChatResponse:
                await self.record(session_id, response)
                return response

            result.with_update_transform(named)
            result.with_result_hook(recorded)

    async def record(self, session_id: str, response: ChatResponse) -> bool:
        """Record ``response``'s usage in ``session_id``; False when it reports none."""
        usage = usage_from_agent_framework(response.usage_details, model=response.model)
        if usage is None:
            return False
        answers = [m for m in response.messages if m.role == "assistant"]
        message_id = stored_id(answers[-1]) if answers else None
        call_id = response.response_id or (f"chatledger-call-{message_id or uuid.uuid4().hex}")
        return await record_call(
            self.provider.phases, session_id, usage, message_id=message_id, call_id=call_id
        )


class AgentFrameworkStrategy:
    """A chatledger strategy in Agent Framework's ``compaction_strategy`` protocol.

    Called with the framework's message list, it plans on the included messages and
    marks what the projection leaves out as excluded (``_excluded``, with the reason),
    inserts summaries where they belong and puts reduced contents in place, in the list
    it is given, as the framework's own strategies do.

    :attr:`requires_client_managed_history` passes the wrapped strategy's capability on
    (:func:`needs_client_managed_history`), as Agent Framework asks of a wrapper.
    """

    def __init__(self, strategy: CompactionStrategy, *, tokenizer: Tokenizer | None = None):
        """Wrap ``strategy``; count with ``tokenizer`` (else the strategy's, else chars/4)."""
        self.strategy = strategy
        self.tokenizer = tokenizer or getattr(strategy, "tokenizer", None)
        self.__name__ = strategy.name

    @property
    def requires_client_managed_history(self) -> bool:
        """Whether the wrapped strategy needs client-managed history; Agent Framework
        1.26's chat client then refuses to run it on a conversation the service keeps."""
        return needs_client_managed_history(self.strategy)

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


def agent_triggered(
    strategy: CompactionStrategy | str,
    *,
    tokenizer: Tokenizer | None = None,
    tool_name: str = COMPACT_TOOL_NAME,
    exclude_trigger: bool = False,
) -> Any:
    """Agent Framework 1.26's ``AgentTriggeredCompactionStrategy`` around ``strategy``
    (a strategy or a spec) run as asked for (:func:`strategies.requested.requested`: its
    trigger fires), so the model's ``compact_context`` call compacts the next model
    call's messages whatever the strategy's triggers say. Give the agent its ``tool``
    and it as ``compaction_strategy``; a :class:`ChatledgerHistoryProvider` then asks the
    store for compaction when it saves the call's result (reason ``model_requested``).
    The framework marks the class experimental (it warns when it is made)."""
    try:
        from agent_framework import AgentTriggeredCompactionStrategy
    except ImportError as exc:  # pragma: no cover - Agent Framework before 1.26
        raise ImportError(
            "agent_triggered needs agent-framework-core 1.26 or later "
            "(AgentTriggeredCompactionStrategy)"
        ) from exc
    chosen = resolve_strategy(strategy)
    adapted = as_agent_framework(requested(chosen), tokenizer=tokenizer)
    return AgentTriggeredCompactionStrategy(
        adapted, tool_name=tool_name, exclude_trigger=exclude_trigger
    )


BoundedToolsMiddleware = AgentMiddleware | ChatMiddleware | FunctionMiddleware
"""The kinds of middleware :func:`bounded_tools` returns."""


@dataclass(frozen=True, slots=True)
class _Budgets:
    """What :func:`bounded_tools` was configured with."""

    default_max_tokens: int
    per_tool: Mapping[str, int]
    turn_tokens: int | None
    policy: AllowancePolicy
    tokenizer: Tokenizer | None

    def max_tokens(self, tool: str) -> int:
        return self.per_tool.get(tool, self.default_max_tokens)

    def check(self, tokenizer: Tokenizer) -> None:
        """Refuse budgets too small for the notice, before any tool runs."""
        needed = notice_tokens(tokenizer)
        small = {"default_max_tokens": self.default_max_tokens, **self.per_tool}
        small = {name: value for name, value in small.items() if value < needed}
        if small:
            raise InvalidInput(
                f"tool result budgets below the {needed} tokens of the ResultTooLarge notice "
                f"with {tokenizer.name}: {small}"
            )


@dataclass(slots=True)
class _Run:
    """One agent run: its tokenizer and the allowance of each pending function call."""

    budgets: _Budgets
    tokenizer: Tokenizer
    allowances: dict[str, ToolResultAllowance] = field(default_factory=dict)

    def open(self, response: ChatResponse) -> None:
        """Open one allowance for the function calls ``response`` asks for."""
        turn_tokens = self.budgets.turn_tokens
        if turn_tokens is None:
            return
        calls = list(
            dict.fromkeys(
                content.call_id
                for message in response.messages
                for content in message.contents
                if content.type == "function_call" and content.call_id
            )
        )
        if not calls:
            return
        allowance = ToolResultAllowance(turn_tokens, policy=self.budgets.policy)
        allowance.new_turn(expected_calls=len(calls))
        self.allowances.update(dict.fromkeys(calls, allowance))


_RUN: Final[ContextVar[_Run | None]] = ContextVar("chatledger_bounded_run", default=None)
"""The run in progress, set by :class:`_RunScope` (tool tasks inherit it)."""


@contextlib.contextmanager
def _inside(run: _Run) -> Iterator[None]:
    token = _RUN.set(run)
    try:
        yield
    finally:
        _RUN.reset(token)


class _RunScope(AgentMiddleware):
    """Opens the scope of one run, with the tokenizer its results are counted with."""

    def __init__(self, budgets: _Budgets) -> None:
        self.budgets = budgets

    async def tokenizer(self, agent: object) -> Tokenizer:
        """The one given, else the store's of the agent's chatledger provider, else o200k_base."""
        if self.budgets.tokenizer is not None:
            return self.budgets.tokenizer
        for provider in getattr(agent, "context_providers", None) or ():
            if isinstance(provider, ChatledgerHistoryProvider):
                return (await provider.store()).tokenizer
        return default_tokenizer()

    async def process(
        self, context: AgentContext, call_next: Callable[[], Awaitable[None]]
    ) -> None:
        tokenizer = await self.tokenizer(context.agent)
        self.budgets.check(tokenizer)
        run = _Run(self.budgets, tokenizer)
        with _inside(run):
            await call_next()
        if isinstance(context.result, ResponseStream):  # the run happens while it is read
            context.result.with_pull_context_manager(lambda: _inside(run))


class _ResponseAllowances(ChatMiddleware):
    """Opens the allowance of each model response that asks for function calls."""

    async def process(self, context: ChatContext, call_next: Callable[[], Awaitable[None]]) -> None:
        await call_next()
        run = _RUN.get()
        if run is None:
            return
        if isinstance(context.result, ChatResponse):
            run.open(context.result)
        elif isinstance(context.result, ResponseStream):
            context.result.with_result_hook(run.open)  # before the loop runs the calls


_KEEP: Final = object()
"""A tool result left as it is (rich content, approval requests)."""


def _structured(text: str) -> object:
    """The value behind the framework's JSON text of a tool result, or the text itself."""
    if not text.startswith(("{", "[")):
        return text

    def refuse(constant: str) -> object:
        raise ValueError(constant)

    try:
        value = json.loads(text, parse_constant=refuse)
    except ValueError:
        return text
    return value if isinstance(value, dict | list) else text


def _tool_value(result: object) -> object:
    """What to bound of a function middleware's result, or :data:`_KEEP`.

    The framework hands function middleware a list of contents: text (a string result
    as it was, any other value as its ``json.dumps`` with spaces) or rich contents
    (images, files). Text that is a JSON object or array is parsed back, so that it is
    bounded and stored as compact JSON; results with rich contents are left alone. A
    raw value (a tool built with ``result_parser=SKIP_PARSING``, or one an inner
    middleware set) is bounded as it is.
    """
    if isinstance(result, Content):
        if result.type != "text":
            return _KEEP
        result = [result]
    if isinstance(result, list) and result and all(isinstance(c, Content) for c in result):
        if any(c.type != "text" for c in result):
            return _KEEP
        return _structured("\n".join(c.text for c in result if c.text))
    return result


class _BoundResults(FunctionMiddleware):
    """Bounds each tool result by its tool's budget and its response's allowance."""

    def __init__(self, budgets: _Budgets) -> None:
        self.budgets = budgets

    async def process(
        self, context: FunctionInvocationContext, call_next: Callable[[], Awaitable[None]]
    ) -> None:
        try:
            await call_next()
        except MiddlewareTermination:  # an inner middleware's result still enters the history
            if context.result is not None:
                self.bound(context)
            raise
        self.bound(context)

    def bound(self, context: FunctionInvocationContext) -> None:
        """Replace ``context.result`` with its bounded text."""
        value = _tool_value(context.result)
        if value is _KEEP:
            return
        run = _RUN.get()
        tokenizer = run.tokenizer if run else self.budgets.tokenizer or default_tokenizer()
        max_tokens = self.budgets.max_tokens(context.function.name)
        call_id = context.metadata.get("call_id")
        allowance = run.allowances.pop(call_id, None) if run and call_id else None
        if allowance is None:
            context.result = bound_result(value, max_tokens=max_tokens, tokenizer=tokenizer)
            return
        try:
            context.result = allowance.bound(value, max_tokens=max_tokens, tokenizer=tokenizer)
        except ResultBudgetError as error:
            logger.warning(
                "tool %s: %s; its result is sent empty to keep the turn within its allowance",
                context.function.name,
                error,
            )
            context.result = ""


def bounded_tools(
    default_max_tokens: int,
    *,
    per_tool: Mapping[str, int] | None = None,
    turn_tokens: int | None = None,
    policy: AllowancePolicy = "first_come",
    tokenizer: Tokenizer | None = None,
) -> list[BoundedToolsMiddleware]:
    """The middleware that bounds tool results; pass it as ``Agent(..., middleware=...)``.

    Every tool result is bounded by ``per_tool[name]`` tokens, or ``default_max_tokens``
    for tools not named there (:func:`~strategies.bounded.bound_result`), and, with
    ``turn_tokens``, the results of each model response's calls together by one
    allowance of ``turn_tokens`` divided by ``policy`` (``"first_come"`` or
    ``"fair_share"``, see :class:`~strategies.bounded.ToolResultAllowance`). Results are
    counted with ``tokenizer``, else the store's when the agent has a
    :class:`ChatledgerHistoryProvider`, else ``TiktokenTokenizer("o200k_base")``.

    The list holds an agent middleware (one scope per run), a chat middleware (one
    allowance per model response) and a function middleware (the bounding); pass all
    three, alone or among others.

    Raises:
        ValueError: a budget or ``policy`` is not valid. A budget too small for the
            ``ResultTooLarge`` notice raises when a run starts (the tokenizer may be
            the store's).
    """
    check_int(default_max_tokens, "default_max_tokens")
    tools = dict(per_tool or {})
    for name, value in tools.items():
        check_int(value, f"per_tool[{name!r}]")
    if turn_tokens is not None:
        check_int(turn_tokens, "turn_tokens")
    if policy not in POLICIES:
        raise InvalidInput(f"policy must be one of {', '.join(POLICIES)}, got {policy!r}")
    if policy == "fair_share" and turn_tokens is None:
        raise InvalidInput("policy='fair_share' divides turn_tokens: give turn_tokens too")
    budgets = _Budgets(default_max_tokens, tools, turn_tokens, policy, tokenizer)
    return [_RunScope(budgets), _ResponseAllowances(), _BoundResults(budgets)]
