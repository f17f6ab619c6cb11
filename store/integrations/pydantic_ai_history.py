"""Pydantic AI: a capability that sends the model chatledger's projection and compacts on request.

:class:`ChatledgerHistory` is an ``AbstractCapability`` for ``Agent(capabilities=[...])``.
Its hooks, per run:

- ``before_model_request``: the run's messages not stored yet are stored in the
  session, and the model is sent the session's projection (the before-call strategy on
  the stored active context) instead of the run's history. The replacement is
  request-only: the run's own history (``result.all_messages()``) stays whole, as the
  stored history does, and only what one request sends differs.
- ``after_model_request``: the model's response is stored at once (its tool calls are
  stored before the tools run) and its usage (``ModelResponse.usage``) recorded in the
  usage ledger, tied to the stored message.
- ``compact_history`` (Pydantic AI asks for it when ``RunContext.request_compaction``,
  ``agent.request_compaction``, ``compact=`` on a run or ``agent.compact_history`` asked
  for compaction, or when the model rejected a request as too long): the request goes to
  the session (:meth:`~store.contract.HistoryBackend.request_compaction` with Pydantic
  AI's reason, ``model_requested`` when the model asked, and its focus), so that this
  and every later projection compacts as asked until the after-run compaction runs it
  and records both on its event. The hook returns the compacted projection as Pydantic
  AI expects it: a ``CompactionPart`` in a request of its own, holding the summaries the
  strategy wrote (or a sentence saying earlier turns were left out), after the standing
  system prompt, followed by the newest messages kept as they were.
- ``after_run``: what is left is stored and the after-run compaction runs.

The session is ``session_id``, else the run's ``conversation_id`` (Pydantic AI gives
every run one: the one passed to ``run``, the one of ``message_history``, or a new one).
A run may be given the whole history again (``message_history=result.all_messages()``)
or none (the projection then brings the stored history): messages already stored are
recognised, by their content, as in :func:`~store.provider.new_messages`, and a system
prompt the session already holds is not stored again. A ``CompactionPart`` this
capability wrote is never stored: the summary it holds is chatledger's own, and what
precedes it in a history given again stands for messages the session already holds.
A ``CompactionPart`` another capability wrote (a provider's compaction, a summarizing
capability placed before this one) is stored as a chatledger summary
(:class:`AdoptedCompaction`) of the groups before the messages it kept, and sent back as
it was.

With ``compaction_tool=True`` the capability gives the model a tool,
:data:`COMPACTION_TOOL_NAME`, that asks for compaction (Pydantic AI's own
``RunContext.request_compaction``, reason ``model_requested``): once its call has its
result, the next model request is sent the compacted projection. A tool's call and its
result are one group in chatledger, so no projection sends one without the other.

A store is given (``store``, used and never closed) or opened from ``url`` on first use
(see :mod:`store.integrations._shared`); :meth:`ChatledgerHistory.aclose` releases it.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from typing import Any, Final

from store.contract import DEFAULT_TENANT, RECORD_KEY, HistoryBackend
from store.errors import InvalidInput, SessionNotFound
from store.formats.pydantic_ai import from_pydantic_ai, to_pydantic_ai
from store.integrations._shared import StoreLease, adapter_options, provider_for
from store.integrations.usage import record_call, usage_from_pydantic_ai
from store.provider import ContextWindow, SaveResult, message_identity
from strategies.base import CompactionStrategy
from strategies.changeset import ChangeSet, SummaryInsert
from strategies.messages import Message, OtherContent, TextContent
from strategies.view import View

try:
    from pydantic_ai import RunContext, Tool
    from pydantic_ai.capabilities import AbstractCapability, CompactionRequest, CompactionResult
    from pydantic_ai.messages import (
        CompactionPart,
        ModelMessage,
        ModelMessagesTypeAdapter,
        ModelRequest,
        ModelResponse,
        SystemPromptPart,
    )
    from pydantic_ai.models import ModelRequestContext
    from pydantic_ai.run import AgentRunResult
    from pydantic_ai.toolsets import FunctionToolset
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "store.integrations.pydantic_ai_history needs Pydantic AI: "
        "pip install 'chatledger[pydantic-ai]'"
    ) from exc

__all__ = [
    "COMPACTION_HANDLER",
    "COMPACTION_PART_KEY",
    "COMPACTION_TOOL_NAME",
    "AdoptedCompaction",
    "ChatledgerHistory",
    "usage_from_pydantic_ai",
]

COMPACTION_TOOL_NAME: Final = "request_compaction"
"""The name of the tool that lets the model ask for compaction (``compaction_tool=True``)."""

COMPACTION_HANDLER: Final = "chatledger"
"""The ``CompactionResult.handler`` (and ``CompactionRecord.handler``) of this capability."""

COMPACTION_PART_KEY: Final = "chatledger_session"
"""The key of a ``CompactionPart.metadata`` this capability wrote: the session's id."""

_TOOL_DESCRIPTION = (
    "Ask for the conversation history to be compacted before your next step: older turns "
    "are summarized or left out of what you are sent (they stay stored). Use it when the "
    "history has grown long or earlier turns no longer matter. `focus` says what a summary "
    "should keep."
)
_TOOL_ANSWER = "Compaction requested: the history you are sent next is compacted."
_LEFT_OUT = (
    "Earlier turns of this conversation were compacted: they are stored, and no longer sent."
)
_SUMMARY_OF_KEY = "summary_of_group_ids"
"""The metadata key of a summary message (:mod:`strategies.summarization`)."""
_MAX_REASON, _MAX_FOCUS = 200, 2000
"""The longest reason and focus a compaction request takes."""


def _to_stored(messages: Sequence[ModelMessage]) -> list[Message]:
    if not messages:
        return []
    items = ModelMessagesTypeAdapter.dump_python(list(messages), mode="json")
    return from_pydantic_ai(items, allow_custom_roles=True)


def _is_ours(message: ModelMessage) -> bool:
    """Whether ``message`` holds a ``CompactionPart`` this capability wrote."""
    return isinstance(message, ModelRequest) and any(
        isinstance(part, CompactionPart) and COMPACTION_PART_KEY in (part.metadata or {})
        for part in message.parts
    )


def _is_foreign_compaction(message: ModelMessage) -> bool:
    """Whether ``message`` holds a ``CompactionPart`` another capability wrote."""
    return not _is_ours(message) and any(isinstance(p, CompactionPart) for p in message.parts)


def _system_only(message: ModelMessage) -> bool:
    return isinstance(message, ModelRequest) and all(
        isinstance(part, SystemPromptPart) for part in message.parts
    )


def _after_our_compaction(messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    """``messages`` after the last one holding a ``CompactionPart`` this capability wrote
    (what precedes it stands for messages the session holds)."""
    for index in range(len(messages) - 1, -1, -1):
        if _is_ours(messages[index]):
            return list(messages[index + 1 :])
    return list(messages)


_Key = tuple[object, ...]


def _message_key(message: ModelMessage) -> _Key:
    return (message.kind, message.timestamp, len(message.parts))


def _part_key(part: Any) -> _Key:
    content = getattr(part, "content", None)
    return (
        str(part.part_kind),
        getattr(part, "timestamp", None),
        getattr(part, "tool_call_id", None),
        content if isinstance(content, str) else None,
    )


class _Originals:
    """The run's history, to send its own message and part objects where the projection
    shows them unchanged (Pydantic AI tells a request's edits from its history by identity)."""

    def __init__(self, history: Sequence[ModelMessage]) -> None:
        self.messages: dict[_Key, list[ModelMessage]] = {}
        self.parts: dict[_Key, list[Any]] = {}
        for message in history:
            self.messages.setdefault(_message_key(message), []).append(message)
            for part in message.parts:
                self.parts.setdefault((message.kind, *_part_key(part)), []).append(part)

    def reuse(self, message: ModelMessage) -> ModelMessage:
        """``message``, or the run's own object equal to it; its parts likewise."""
        for original in self.messages.get(_message_key(message), ()):
            if original == message:
                return original
        if isinstance(message, ModelRequest):
            return dataclasses.replace(
                message, parts=[self._part(message.kind, part) for part in message.parts]
            )
        return dataclasses.replace(
            message, parts=[self._part(message.kind, part) for part in message.parts]
        )

    def _part(self, kind: str, part: Any) -> Any:
        for original in self.parts.get((kind, *_part_key(part)), ()):
            if original == part:
                return original
        return part


def _is_summary(message: Message) -> bool:
    return _SUMMARY_OF_KEY in message.metadata


def _summary_request(text: str, session_id: str) -> ModelRequest:
    """A chatledger summary as Pydantic AI holds a summary written for it: a
    ``CompactionPart`` in a request of its own."""
    part = CompactionPart(content=text, metadata={COMPACTION_PART_KEY: session_id})
    return ModelRequest(parts=[part])


def _rebuilt(
    projected: Sequence[Message], history: Sequence[ModelMessage], session_id: str
) -> list[ModelMessage]:
    """The projection as Pydantic AI messages, the run's own objects where unchanged; a
    summary as a ``CompactionPart`` (:func:`_summary_request`)."""
    originals = _Originals(history)
    rebuilt: list[ModelMessage] = []
    chunk: list[Message] = []

    def flush() -> None:
        if chunk:
            items = ModelMessagesTypeAdapter.validate_python(to_pydantic_ai(chunk))
            rebuilt.extend(originals.reuse(message) for message in items)
            chunk.clear()

    for message in projected:
        if _is_summary(message):
            flush()
            rebuilt.append(_summary_request(_summary_text(message), session_id))
        else:
            chunk.append(message)
    flush()
    if history and isinstance(history[-1], ModelRequest) and not history[-1].parts:
        rebuilt.append(history[-1])  # an empty request, never stored, still being answered
    return rebuilt


def _summary_text(message: Message) -> str:
    return "\n".join(c.text for c in message.contents if isinstance(c, TextContent))


def _clipped(reason: str, focus: str | None) -> tuple[str, str | None]:
    """A reason and focus the store takes: the reason's first line, both at their longest."""
    lines = reason.strip().splitlines()
    line = lines[0].strip()[:_MAX_REASON] if lines else ""
    return line or "manual", focus[:_MAX_FOCUS] if focus else None


class AdoptedCompaction:
    """The strategy that stores a compaction another Pydantic AI capability made (a
    provider's ``CompactionPart``, or a summary another capability wrote) as a chatledger
    summary: ``summary`` (the message holding the part, as the converter reads it)
    replaces every active group, system groups and pinned ones aside, before the newest
    groups that hold a message whose identity is in ``kept`` (the messages the compaction
    kept, which are the session's newest)."""

    honours_requests = False
    """Adopting a summary is not the compaction asked for: a request waiting stays."""

    name = "pydantic-ai-compaction"

    def __init__(self, summary: Message, kept: set[tuple[str, ...]]) -> None:
        self.summary = summary
        self.kept = kept

    def params(self) -> dict[str, Any]:
        return {"kept_messages": len(self.kept)}

    async def plan(self, view: View) -> ChangeSet:
        candidates = [g for g in view.groups if g.kind != "system" and not g.pinned]
        loaded = await view.messages(g.group_id for g in candidates)
        start = len(candidates)  # the newest groups, those holding kept messages
        while start > 0 and any(
            message_identity(m) in self.kept for m in loaded.get(candidates[start - 1].group_id, ())
        ):
            start -= 1
        replaced = [g.group_id for g in candidates[:start]]
        if not replaced:
            return ChangeSet(strategy=self.name, params=self.params())
        insert = SummaryInsert(message=self.summary, replaces=tuple(replaced))
        return ChangeSet(summaries=(insert,), strategy=self.name, params=self.params())


@dataclasses.dataclass
class _RunState:
    """What one run's capability instance knows: its session, and the messages stored."""

    session_id: str
    started: bool = False
    """Whether the run's first history was stored (matched against the stored tail)."""
    seen: dict[int, ModelMessage] = dataclasses.field(default_factory=dict)
    """The run's messages stored or written here, by identity (held, so ids stay theirs)."""
    sent: tuple[str, ...] = ()
    """The ids of the messages of the last projection sent."""


class ChatledgerHistory(AbstractCapability[Any]):
    """The model is sent chatledger's projection of the session, and compaction asked
    of Pydantic AI runs chatledger's strategies (see the module docstring)."""

    def __init__(
        self,
        store: HistoryBackend | None = None,
        *,
        url: str | None = None,
        tenant: str = DEFAULT_TENANT,
        session_id: str | None = None,
        before_strategy: CompactionStrategy | str | None = None,
        after_strategy: CompactionStrategy | str | None = None,
        max_context_window_tokens: int | None = None,
        max_output_tokens: int | None = None,
        reserved_tokens: int = 0,
        window: ContextWindow | None = None,
        calibrate: bool = False,
        compaction_tool: bool = False,
    ) -> None:
        """Configure; opens nothing. ``before_strategy`` and ``after_strategy`` (strategies
        or specs), or the window sizes, choose the compaction, as for
        :class:`~store.provider.TwoPhaseProvider`; or give them all as one
        :class:`~store.provider.ContextWindow` (``window=``), whose tokenizer an owned
        store is opened with. ``session_id`` fixes the session (else the run's
        ``conversation_id``). ``calibrate=True`` judges both phases in the provider's
        tokens. ``compaction_tool=True`` gives the model the tool that asks for compaction.
        """
        with adapter_options():
            window = ContextWindow.of(
                window,
                before_strategy=before_strategy,
                after_strategy=after_strategy,
                max_context_window_tokens=max_context_window_tokens,
                max_output_tokens=max_output_tokens,
                reserved_tokens=reserved_tokens,
            )
        if session_id is not None and (not isinstance(session_id, str) or not session_id):
            raise InvalidInput(f"session_id must be a non-empty string, got {session_id!r}")
        if not isinstance(compaction_tool, bool):
            raise InvalidInput(f"compaction_tool must be True or False, got {compaction_tool!r}")
        self._lease = StoreLease.of(store, url=url, tenant=tenant, tokenizer=window.tokenizer)
        self.session_id = session_id
        """The session every run is stored in, or None for the run's ``conversation_id``."""
        self.window = window
        """The compaction options this capability runs with."""
        self.phases = provider_for(self._lease, window, calibrate=calibrate)
        """The two phases: each request's projection, the after-run compaction, usage."""
        self.compaction_tool = compaction_tool
        """Whether the model has the tool that asks for compaction."""
        self._toolset: FunctionToolset[Any] | None = (
            FunctionToolset(
                [
                    Tool(
                        _request_compaction,
                        takes_ctx=True,
                        name=COMPACTION_TOOL_NAME,
                        description=_TOOL_DESCRIPTION,
                    )
                ]
            )
            if compaction_tool
            else None
        )
        self._state: _RunState | None = None

    # -- the store ----------------------------------------------------------------

    async def store(self) -> HistoryBackend:
        """The store (opened now when this capability opens its own)."""
        return await self._lease.get()

    async def aclose(self) -> None:
        """Release the store this capability opened (a given store stays open)."""
        await self._lease.release()

    # -- per run --------------------------------------------------------------------

    async def for_run(self, ctx: RunContext[Any]) -> ChatledgerHistory:
        """A copy for the run, with the run's own record of what it stored."""
        run = copy.copy(self)
        run._state = None
        return run

    def get_toolset(self) -> FunctionToolset[Any] | None:
        """The compaction tool's toolset (``compaction_tool=True``), else None."""
        return self._toolset

    def _run(self, ctx: RunContext[Any]) -> _RunState:
        if self._state is None:
            session_id = self.session_id or ctx.conversation_id
            if not session_id:
                raise InvalidInput(
                    "ChatledgerHistory needs a session id: give session_id=, or run the agent "
                    "with conversation_id="
                )
            self._state = _RunState(session_id)
        return self._state

    async def _store_new(
        self, run: _RunState, history: Sequence[ModelMessage], *, end_of_turn: bool = False
    ) -> SaveResult | None:
        """Store the messages of ``history`` not stored yet (on a run's first call, those
        that do not replay the session's tail), a compaction from elsewhere as a summary;
        at ``end_of_turn`` run the after phase."""
        if run.started:
            fresh = [m for m in history if id(m) not in run.seen]
        else:
            await self._refuse_conversation(run.session_id)
            fresh = _after_our_compaction(history)
        new = {id(m) for m in fresh}
        for message in history:
            run.seen[id(message)] = message
        fresh = [m for m in fresh if m.parts and not _is_ours(m)]
        holder = next((m for m in reversed(fresh) if _is_foreign_compaction(m)), None)
        if holder is not None:
            at = next(i for i, m in enumerate(history) if m is holder)
            kept = [m for m in history[at + 1 :] if id(m) not in new]
            await self._adopt(run.session_id, holder, kept)
            after = next(i for i, m in enumerate(fresh) if m is holder) + 1
            fresh = [m for m in fresh[:after] if _system_only(m)] + fresh[after:]
        batch = await self._without_stored_system(run.session_id, _to_stored(fresh))
        run.started = True
        if not batch and not end_of_turn:
            return None
        return await self.phases.save_turn(run.session_id, batch, end_of_turn=end_of_turn)

    async def _refuse_conversation(self, session_id: str) -> None:
        """Refuse a session that ``ChatledgerConversationStore`` keeps a conversation in:
        both would store the same turns (once per run, one read)."""
        backend = await self._lease.get()
        try:
            metadata = await backend.get_metadata(session_id)
        except SessionNotFound:
            return
        if RECORD_KEY in metadata:
            raise InvalidInput(
                f"session {session_id!r} holds a conversation of ChatledgerConversationStore: "
                "ChatledgerHistory must store elsewhere (give it session_id=)"
            )

    async def _adopt(
        self, session_id: str, holder: ModelMessage, kept: Sequence[ModelMessage]
    ) -> None:
        """Store the ``CompactionPart`` of ``holder``, written by another capability, as a
        summary of the session's groups before the first that holds a message of ``kept``
        (the messages the compaction kept after it); once only."""
        summary = next(
            (
                m
                for m in reversed(_to_stored([holder]))
                if any(isinstance(c, OtherContent) and c.kind == "compaction" for c in m.contents)
            ),
            None,
        )
        if summary is None:
            return
        backend = await self._lease.get()
        identity = message_identity(summary)
        if any(message_identity(m) == identity for m in await backend.context(session_id)):
            return
        adopted = AdoptedCompaction(summary, {message_identity(m) for m in _to_stored(kept)})
        await backend.compact(session_id, adopted, phase="manual")

    async def _without_stored_system(self, session_id: str, batch: list[Message]) -> list[Message]:
        """``batch`` without the system messages the session holds already (a run given
        no history starts with the agent's system prompt again)."""
        if not any(m.role == "system" for m in batch):
            return batch
        backend = await self._lease.get()
        stored = {
            message_identity(m) for m in await backend.context(session_id) if m.role == "system"
        }
        kept: list[Message] = []
        for message in batch:
            if message.role == "system" and message_identity(message) in stored:
                continue
            kept.append(message)
        return kept

    # -- hooks --------------------------------------------------------------------

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Store the run's new messages; send the session's projection."""
        run = self._run(ctx)
        await self._store_new(run, ctx.messages)
        projected = await self.phases.load(run.session_id)
        run.sent = tuple(m.message_id for m in projected)
        request_context.messages = _rebuilt(projected, ctx.messages, run.session_id)
        return request_context

    async def after_model_request(
        self,
        ctx: RunContext[Any],
        *,
        request_context: ModelRequestContext,
        response: ModelResponse,
    ) -> ModelResponse:
        """Store the response at once; record its usage."""
        run = self._run(ctx)
        # stored as the run's history will hold it, with the run's fields the run fills in
        # after this hook
        model_id = request_context.model_id or request_context.model.model_id
        complete = dataclasses.replace(
            response,
            run_id=response.run_id or ctx.run_id,
            conversation_id=response.conversation_id or ctx.conversation_id,
            model_id=response.model_id or model_id,
        )
        saved = await self.phases.save_turn(
            run.session_id, _to_stored([complete]), end_of_turn=False
        )
        run.seen[id(response)] = response
        usage = usage_from_pydantic_ai(response.usage, model=response.model_name)
        if usage is not None and saved.appended:
            message_id = saved.appended[-1]
            call_id = response.provider_response_id or f"pydantic-ai-{message_id}"
            await record_call(
                self.phases, run.session_id, usage, message_id=message_id, call_id=call_id
            )
        return response

    async def compact_history(
        self, ctx: RunContext[Any], request: CompactionRequest
    ) -> CompactionResult | None:
        """Ask the session for compaction (Pydantic AI's reason and focus) and return the
        compacted projection; None when it compacts nothing more."""
        run = self._run(ctx)
        reason, focus = _clipped(request.reason, request.focus)
        await self.phases.request_compaction(run.session_id, reason=reason, focus=focus)
        compacted = await self.phases.load(run.session_id)
        if tuple(m.message_id for m in compacted) == run.sent:
            return None
        summaries = [m for m in compacted if _is_summary(m)]
        kept = [m for m in compacted if not _is_summary(m)]
        result = _compacted(
            _rebuilt(kept, ctx.messages, run.session_id),
            [_summary_text(m) for m in summaries],
            request.messages,
            run.session_id,
        )
        if result is not None:
            for message in result.messages:
                run.seen[id(message)] = message
        return result

    async def after_run(
        self, ctx: RunContext[Any], *, result: AgentRunResult[Any]
    ) -> AgentRunResult[Any]:
        """Store what is left of the run; run the after-run compaction."""
        await self._store_new(self._run(ctx), result.all_messages(), end_of_turn=True)
        return result


def _turn_length(given: Sequence[ModelMessage]) -> int:
    """How many messages end ``given`` as the turn being answered: its request, and the
    response whose tool calls that request answers (a result is never sent without its
    call)."""
    if len(given) >= 2 and isinstance(given[-2], ModelResponse) and given[-2].tool_calls:
        return 2
    return 1


def _compacted(
    rebuilt: list[ModelMessage], summaries: list[str], given: list[ModelMessage], session_id: str
) -> CompactionResult | None:
    """The result of ``compact_history``: what the compacted projection holds before the
    turn being answered, then a request holding the ``CompactionPart``, then that turn as
    Pydantic AI gave it (the projection always keeps it). None when the projection holds
    nothing before that turn.

    The ``CompactionPart`` comes last before the turn, so that a history given again
    (``message_history=result.all_messages()``) holds after it only messages the session
    stores as they are, which are recognised as stored.
    """
    turn = _turn_length(given)
    if not given or not isinstance(given[-1], ModelRequest) or len(rebuilt) <= turn:
        return None
    text = "\n\n".join(s for s in summaries if s.strip()) or _LEFT_OUT
    holder = _summary_request(text, session_id)
    part = holder.parts[0]
    assert isinstance(part, CompactionPart)
    prefix = [*rebuilt[: len(rebuilt) - turn], holder]
    return CompactionResult(
        messages=[*prefix, *given[len(given) - turn :]],
        part=part,
        handler=COMPACTION_HANDLER,
        kept_from=len(prefix),
        metadata={"session_id": session_id},
    )


async def _request_compaction(ctx: RunContext[Any], focus: str | None = None) -> str:
    """Ask for the history to be compacted before the next model request."""
    ctx.request_compaction(reason="model_requested", focus=focus)
    return _TOOL_ANSWER
