"""The OpenAI Agents SDK: :class:`ChatledgerSession`, a ``Session`` kept in chatledger.

``Runner.run(agent, input, session=ChatledgerSession("user-42"))`` and the streamed and
sync runners use it as the SDK's own sessions:

- :meth:`~ChatledgerSession.get_items` without a limit is what the SDK prepends to a
  run's input, read once per run: the *request context*, the stored history projected
  through the before strategy, with every call next to its output (a call whose output
  is not stored yet is left out). With ``limit=N`` it returns the newest ``N`` stored
  items verbatim, as the SDK's own sessions do: the SDK reads them back to reconcile
  what it wrote and to rewind.
- :meth:`~ChatledgerSession.add_items` stores the items (one message an item, through
  :mod:`store.formats.openai_responses`); when the batch ends a turn (it holds an
  assistant message and leaves no call unanswered) the after strategy runs and its
  changes are stored with an audit event. :meth:`~ChatledgerSession.run_compaction`, the
  SDK's compaction hook, runs it too, so it runs whether or not the model reports
  response ids.
- With the run's context (``wrapper``, which the SDK passes to a session whose four
  history methods accept it, as these do), ``add_items`` records the usage of each
  model request of the run once, tied to the stored id of the response's last item
  (:meth:`~ChatledgerSession.add_items`).
- :meth:`~ChatledgerSession.pop_item` takes back the newest item for good
  (:meth:`~store.contract.HistoryBackend.retract_last`);
  :meth:`~ChatledgerSession.clear_session` deletes the session.

Item ids: an item's ``id`` is its message id. Items without one get a fresh id, and so
do those carrying the SDK's placeholder id (``__fake_id__``, given to every item of a
Chat Completions model) or an id already used in the same batch; the original is kept
and written back, so what :meth:`get_items` returns with a limit is what was added.

The SDK's own tables (``agent_sessions``, ``agent_messages``) and chatledger's
(``chatledger_*``) share a database without a clash.

:func:`compaction_tool` gives an agent the compaction tool of a session
(:mod:`store.integrations.compaction_tool`): ``Agent(..., tools=[compaction_tool(session)])``.

:func:`recall_tool` gives an agent the recall tool of a session
(:mod:`store.integrations.recall`): ``Agent(..., tools=[recall_tool(session)])``. It
also turns on the session's :attr:`~ChatledgerSession.recall_note`, the sentence the
request context adds after each summary.
"""

from __future__ import annotations

import json
import weakref
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from store.contract import DEFAULT_TENANT, HistoryBackend
from store.errors import SessionNotFound
from store.formats import ORIGINAL_ID_KEY
from store.formats.openai_responses import from_openai_responses, to_openai_responses
from store.integrations._shared import StoreLease, adapter_options, provider_for
from store.integrations.compaction_tool import COMPACT_TOOL_DESCRIPTION, COMPACT_TOOL_NAME
from store.integrations.compaction_tool import compact_context as request_compaction
from store.integrations.recall import Recall, RecallOptions, recall_options
from store.integrations.usage import record_call, usage_from_openai_agents
from store.provider import ContextWindow, TwoPhaseProvider, unanswered_call_ids
from store.search.recall import RECALL_DESCRIPTION, RECALL_TOOL_NAME, with_recall_note
from strategies.base import CompactionStrategy
from strategies.messages import FunctionCallContent, Message, OtherContent
from strategies.tokenizers import Tokenizer

try:
    from agents import FunctionTool, function_tool
    from agents.items import TResponseInputItem
    from agents.memory import SessionSettings
    from agents.memory.session import OpenAIResponsesCompactionArgs
    from agents.models.fake_id import FAKE_RESPONSES_ID
    from agents.run_config import CallModelData, ModelInputData
    from agents.run_context import RunContextWrapper
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "store.integrations.openai_agents needs the OpenAI Agents SDK: "
        "pip install 'chatledger[openai-agents]'"
    ) from exc

__all__ = [
    "ChatledgerSession",
    "compaction_tool",
    "ends_turn",
    "items_to_messages",
    "recall_tool",
    "response_groups",
]


def items_to_messages(items: Sequence[TResponseInputItem]) -> list[Message]:
    """The messages of SDK items, one an item (see the module docstring on ids)."""
    seen: set[str] = set()
    messages: list[Message] = []
    for item in items:
        raw = dict(cast(dict[str, Any], item))
        item_id = raw.get("id")
        foreign = isinstance(item_id, str) and (item_id == FAKE_RESPONSES_ID or item_id in seen)
        if foreign:
            del raw["id"]
        [message] = from_openai_responses([raw], allow_custom_roles=True)
        if foreign:
            metadata = {**message.metadata, ORIGINAL_ID_KEY: item_id}
            message = message.model_copy(update={"metadata": metadata})
        seen.add(message.message_id)
        messages.append(message)
    return messages


def _fingerprint(item: Any) -> str:
    return json.dumps(item, sort_keys=True, default=str, ensure_ascii=False)


def _is_call(message: Message) -> bool:
    return any(
        isinstance(c, FunctionCallContent) or (isinstance(c, OtherContent) and c.pairing == "call")
        for c in message.contents
    )


def ends_turn(messages: Sequence[Message]) -> bool:
    """Whether a batch ends a turn: it holds an assistant message that is not a call,
    and leaves no call unanswered."""
    answered = any(m.role == "assistant" and not _is_call(m) for m in messages)
    return answered and not unanswered_call_ids(messages)


def _without_pending_calls(messages: list[Message]) -> list[Message]:
    """``messages`` without the calls no message of them answers (nor their reasoning)."""
    pending = unanswered_call_ids(messages)
    if not pending:
        return messages
    kept: list[Message] = []
    for message in messages:
        calls = {c.call_id for c in message.contents if isinstance(c, FunctionCallContent)}
        if calls and calls <= pending:
            continue
        kept.append(message)
    return kept


def response_groups(messages: Sequence[Message]) -> list[list[Message]]:
    """The model responses of a batch: each run of consecutive assistant messages (a
    response's reasoning, text and parallel calls), in order. A tool output or a user
    message ends a run."""
    groups: list[list[Message]] = []
    current: list[Message] = []
    for message in messages:
        if message.role == "assistant":
            current.append(message)
        elif current:
            groups.append(current)
            current = []
    if current:
        groups.append(current)
    return groups


@dataclass(slots=True)
class _RunUsage:
    """How many of one run's request entries a session has looked at."""

    usage: weakref.ref[Any]
    seen: int = 0


class ChatledgerSession:
    """An OpenAI Agents SDK ``Session`` stored in chatledger (see the module docstring).

    Give a ``store`` (used, never closed), or a ``url`` (default ``$CHATLEDGER_URL``, then
    ``./chatledger.db``): sessions with the same URL and tenant share one store, opened on
    first use and closed when the last of them calls :meth:`aclose`, or at exit.
    ``before_strategy`` and ``after_strategy`` (strategies or specs), or the window sizes,
    choose the compaction, as for :class:`~store.provider.TwoPhaseProvider`; or give them
    all as one :class:`~store.provider.ContextWindow` (``window=``), whose tokenizer an
    owned store is opened with. ``calibrate=True`` judges both phases in the provider's
    tokens by the session's fit (:class:`~store.provider.TwoPhaseProvider`).

    Every model call's usage is recorded (see :meth:`add_items`): the SDK passes the
    run's context (``wrapper``) to a session whose four history methods accept it, as
    these do. ``model`` names the model in those records (the SDK's per-request usage
    does not).
    """

    def __init__(
        self,
        session_id: str,
        *,
        store: HistoryBackend | None = None,
        url: str | None = None,
        tenant: str = DEFAULT_TENANT,
        before_strategy: CompactionStrategy | str | None = None,
        after_strategy: CompactionStrategy | str | None = None,
        max_context_window_tokens: int | None = None,
        max_output_tokens: int | None = None,
        reserved_tokens: int = 0,
        tokenizer: Tokenizer | None = None,
        session_settings: SessionSettings | None = None,
        window: ContextWindow | None = None,
        calibrate: bool = False,
        model: str | None = None,
    ) -> None:
        self.session_id = session_id
        self.session_settings = session_settings
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
        self._lease = StoreLease.of(store, url=url, tenant=tenant, tokenizer=window.tokenizer)
        self._provider = provider_for(self._lease, window, calibrate=calibrate)
        self.model = model
        """The model name recorded with each call's usage (the SDK does not report it)."""
        self._runs: dict[int, _RunUsage] = {}
        """Each run's usage object (by id) and how many of its request entries were seen."""
        self._history_length = 0
        """How many items the last :meth:`get_items` without a limit returned."""
        self._added: Counter[str] = Counter()
        """The items added since then (the in-flight items of the run that are stored)."""
        self.recall_note: str | None = None
        """The sentence the request context adds after each summary (None: none);
        :func:`recall_tool` sets it."""

    @property
    def provider(self) -> TwoPhaseProvider:
        """The two phases this session runs (its strategies)."""
        return self._provider

    async def store(self) -> HistoryBackend:
        """The store (opened now when this session opens its own)."""
        return await self._lease.get()

    async def get_items(
        self, limit: int | None = None, *, wrapper: RunContextWrapper[Any] | None = None
    ) -> list[TResponseInputItem]:
        """The request context (no ``limit``), or the newest ``limit`` items as stored
        (``wrapper``, the run's context, is not needed here)."""
        if limit is None:
            loaded = await self._provider.load(self.session_id)
            messages = with_recall_note(_without_pending_calls(loaded), self.recall_note)
            items = to_openai_responses(messages)
            self._history_length = len(items)
            self._added.clear()
            return cast(list[TResponseInputItem], items)
        if limit <= 0:
            return []
        messages = await self._provider.stored_tail(self.session_id, limit)
        return cast(list[TResponseInputItem], to_openai_responses(messages))

    async def add_items(
        self,
        items: list[TResponseInputItem],
        *,
        wrapper: RunContextWrapper[Any] | None = None,
    ) -> None:
        """Record the usage of the model calls that produced ``items`` (first, so that
        the after phase judges by the newest fit), store them, and run the after
        strategy when they end a turn.

        With ``wrapper`` (the run's context, which the SDK passes), each request entry
        of the run's usage (``wrapper.usage.request_usage_entries``) not seen yet is
        recorded once, tied to the model response of the batch it answers: the newest
        entries to the batch's last responses (:func:`response_groups`), each by the id
        of the response's last message, as stored. Its ``call_id`` is
        ``openai-agents-<that id>``. An entry no response of the batch answers (one of
        a run resumed from a ``RunState``, recorded before the interruption) is left out.
        """
        if not items:
            return
        self._added.update(_fingerprint(item) for item in items)
        messages = items_to_messages(items)
        if wrapper is not None:  # first, so that the after phase judges by the newest fit
            await self._record_usage(wrapper, messages)
        await self._provider.save_turn(
            self.session_id, messages, end_of_turn=ends_turn(messages), existing=()
        )

    def _run_of(self, usage: object) -> _RunUsage:
        """What this session saw of the run whose usage object is ``usage``."""
        for key in [k for k, run in self._runs.items() if run.usage() is None]:
            del self._runs[key]
        run = self._runs.get(id(usage))
        if run is None or run.usage() is not usage:
            run = self._runs[id(usage)] = _RunUsage(weakref.ref(usage))
        return run

    async def _record_usage(
        self, wrapper: RunContextWrapper[Any], messages: Sequence[Message]
    ) -> None:
        """Record the run's request entries not seen yet that the batch's responses
        answer (the newest entries, to the last responses); a batch without a model
        response (the run's input) leaves them for the next batch."""
        usage = getattr(wrapper, "usage", None)
        if usage is None:
            return
        entries = list(getattr(usage, "request_usage_entries", None) or ())
        groups = response_groups(messages)
        if not groups:
            return
        run = self._run_of(usage)
        unseen, run.seen = entries[run.seen :], len(entries)
        answered = min(len(unseen), len(groups))
        if not answered:
            return
        pairs = zip(unseen[-answered:], groups[-answered:], strict=True)
        for entry, group in pairs:
            reported = usage_from_openai_agents(entry, model=self.model)
            if reported is None:
                continue
            message_id = group[-1].message_id
            await record_call(
                self._provider,
                self.session_id,
                reported,
                message_id=message_id,
                call_id=f"openai-agents-{message_id}",
            )

    async def pop_item(
        self, *, wrapper: RunContextWrapper[Any] | None = None
    ) -> TResponseInputItem | None:
        """Take back the newest stored item, for good; None when there is none, or when the
        message taken back holds nothing the Responses API can carry."""
        try:
            stored = await (await self.store()).retract_last(self.session_id)
        except SessionNotFound:
            return None
        if stored is None:
            return None
        items = to_openai_responses([stored.message])
        # a message of another format may hold nothing the Responses API takes
        # (reasoning without its id, another system's content): it is taken back all the same
        return cast(TResponseInputItem, items[0]) if items else None

    async def clear_session(self, *, wrapper: RunContextWrapper[Any] | None = None) -> None:
        """Delete the session and everything stored for it."""
        try:
            await (await self.store()).delete_session(self.session_id)
        except SessionNotFound:
            return

    async def run_compaction(self, args: OpenAIResponsesCompactionArgs | None = None) -> None:
        """The SDK's compaction hook: run the after strategy now (``args`` are the SDK's
        Responses-compaction options, which a local store has no use for)."""
        await self._provider.save_turn(self.session_id, [], end_of_turn=True, existing=())

    async def call_model_input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """A ``RunConfig.call_model_input_filter`` that projects every model call.

        The SDK reads :meth:`get_items` once per run; the items a run adds (tool calls and
        their outputs) are sent on as they come. Passed as
        ``RunConfig(call_model_input_filter=session.call_model_input_filter)``, each model
        call is sent the projection of the stored history plus the run's items not stored
        yet, through the before strategy, instead.
        """
        items = list(data.model_data.input)
        added = Counter(self._added)
        pending: list[Any] = []
        for item in items[self._history_length :]:
            key = _fingerprint(item)
            if added[key] > 0:
                added[key] -= 1
            else:
                pending.append(item)
        loaded = await self._provider.load(self.session_id, items_to_messages(pending))
        messages = with_recall_note(loaded, self.recall_note)
        projected = cast(list[TResponseInputItem], to_openai_responses(messages))
        return ModelInputData(input=projected, instructions=data.model_data.instructions)

    async def aclose(self) -> None:
        """Release the store this session opened (a given store stays open)."""
        await self._lease.release()


def recall_tool(session: ChatledgerSession, recall: RecallOptions | None = None) -> FunctionTool:
    """The recall tool of ``session``, a ``FunctionTool`` named ``recall``: searches the
    session's stored messages, the excluded ones first (see
    :mod:`store.integrations.recall`), with ``recall`` (default :class:`RecallOptions`:
    1,500 tokens a result). Sets the session's :attr:`~ChatledgerSession.recall_note`
    to the options' note."""
    options = recall_options(recall or True)
    assert options is not None
    searcher = Recall.of(_SessionStore(session), options)
    session.recall_note = options.note

    async def recall_messages(query: str, cursor: str | None = None) -> str:
        return await searcher(session.session_id, query, cursor)

    return function_tool(
        recall_messages,
        name_override=RECALL_TOOL_NAME,
        description_override=RECALL_DESCRIPTION,
        use_docstring_info=False,
    )


def compaction_tool(session: ChatledgerSession) -> FunctionTool:
    """The compaction tool of ``session``, a ``FunctionTool`` named ``compact_context``
    (``reason``, ``focus=None``): asks for compaction as the model did (see
    :mod:`store.integrations.compaction_tool`). The next model call of the run is sent the
    compacted projection when the run is given
    ``RunConfig(call_model_input_filter=session.call_model_input_filter)`` (else the next
    run's first call), and the after-run compaction records ``model_requested``."""

    async def compact_context(reason: str, focus: str | None = None) -> str:
        return await request_compaction(session.provider, session.session_id, reason, focus)

    return function_tool(
        compact_context,
        name_override=COMPACT_TOOL_NAME,
        description_override=COMPACT_TOOL_DESCRIPTION,
        use_docstring_info=False,
    )


class _SessionStore:
    """The store of a session, handed to :class:`Recall` on each call."""

    def __init__(self, session: ChatledgerSession) -> None:
        self.session = session

    async def get(self) -> HistoryBackend:
        return await self.session.store()
