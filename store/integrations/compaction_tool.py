"""The compaction tool the adapters can give the model: ``compact_context``.

``compact_context(reason, focus=None)`` asks for compaction of the current session
(:meth:`~store.provider.TwoPhaseProvider.request_compaction`, reason
:data:`MODEL_REQUESTED`, the model's ``focus``): once the tool's call has its result, the
next model call is sent the projection compacted as asked (the before-call strategy run
whatever its triggers say), and the after-run compaction compacts the stored history and
records an event whose reason is ``model_requested`` and whose focus is the model's. The
model's own words for why stay in its stored call. It is off by default, as in the
frameworks themselves: :func:`store.integrations.openai_agents.compaction_tool` (OpenAI
Agents SDK), ``ChatledgerMiddleware(..., compaction_tool=True)`` (LangChain); Agent
Framework 1.26 has its own (``AgentTriggeredCompactionStrategy``), as does Pydantic AI
(``request_compaction``). A request the store refuses comes back as one line of text for
the model, never as an exception. It imports no framework.
"""

from __future__ import annotations

from typing import Final, Protocol

from store.errors import ChatledgerError, SessionNotFound
from store.models import CompactionEvent

__all__ = [
    "COMPACT_TOOL_DESCRIPTION",
    "COMPACT_TOOL_NAME",
    "MODEL_REQUESTED",
    "CompactionPhases",
    "compact_context",
]

COMPACT_TOOL_NAME: Final = "compact_context"
"""The tool's name, as Agent Framework names its own."""

MODEL_REQUESTED: Final = "model_requested"
"""The reason of a compaction the model asked for."""

COMPACT_TOOL_DESCRIPTION: Final = (
    "Ask for this conversation's context to be compacted before your next model call: "
    "older turns are summarized or left out (they stay stored and can be restored). "
    "Call it when the context holds much you no longer need. `reason`: why, in a few "
    "words. `focus` (optional): what the compacted context must keep."
)


class CompactionPhases(Protocol):
    """What the tool asks (a :class:`~store.provider.TwoPhaseProvider` has it)."""

    async def request_compaction(
        self, session_id: str, *, reason: str = ..., focus: str | None = ..., now: bool = ...
    ) -> CompactionEvent | None:
        """See :meth:`~store.provider.TwoPhaseProvider.request_compaction`."""
        ...


async def compact_context(
    phases: CompactionPhases, session_id: str, reason: str, focus: str | None = None
) -> str:
    """Ask ``phases`` for compaction of ``session_id`` as the model did; the tool's
    result text (one line)."""
    said = " ".join(str(reason).split())[:200]
    try:
        await phases.request_compaction(session_id, reason=MODEL_REQUESTED, focus=focus)
    except SessionNotFound:
        return "Nothing to compact yet: this conversation has no stored history."
    except ChatledgerError as error:
        return f"Compaction was not requested: {error}"
    suffix = f" (reason: {said})" if said else ""
    return f"Compaction requested: the context is compacted before your next model call{suffix}."
