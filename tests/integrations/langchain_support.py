"""An offline LangChain chat model that calls a tool, and the agents built on it.

:class:`ScriptedChatModel` answers each user request with ``tool_calls`` calls of the
``lookup`` tool, one per response, then with text, keeping its own count per request
(compaction may hide earlier calls from it), and records the messages of every call.
:func:`tool_loop` is a plain runnable agent loop (model, tools, model...) for
``RunnableWithMessageHistory``, which returns every message the turn produced.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import BaseTool, tool
from pydantic import Field

from store.formats.langchain import from_langchain
from strategies.tokenizers import Tokenizer, count_message_tokens

TOOL_CALLS = 2
RESULT_ROWS = 60


def lookup_result(query: str, rows: int = RESULT_ROWS) -> str:
    """A deterministic, large tool result."""
    return " ".join(f"{query}-row{i}" for i in range(rows))


@tool
def lookup(query: str) -> str:
    """Look ``query`` up."""
    return lookup_result(query)


SCRIPTED_MODEL = "scripted-1"
"""The model a reply that reports usage names (``response_metadata["model_name"]``)."""


def scripted_usage(n: int) -> UsageMetadata:
    """What the ``n``-th call (from 1) reports: every lane, the cache and reasoning ones
    included, each different from one call to the next."""
    return UsageMetadata(
        input_tokens=1000 + 10 * n,
        output_tokens=40 + n,
        total_tokens=1040 + 11 * n,
        input_token_details={"cache_read": 600 + n, "cache_creation": 50 + n},
        output_token_details={"reasoning": 20 + n},
    )


def last_user_text(messages: Sequence[BaseMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            return str(message.content)
    return ""


class ScriptedChatModel(BaseChatModel):
    """``tool_calls`` lookups per user request, then an answer; every call recorded."""

    tool_calls: int = TOOL_CALLS
    report_usage: bool = False
    """Whether each reply reports its usage (:func:`scripted_usage`)."""
    response_ids: bool = False
    """Whether each reply names its response (``response_metadata["id"]``, ``resp_<n>``)."""
    counter: int = 0
    made: dict[str, int] = Field(default_factory=dict)
    calls: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        return self

    def _reply(self, messages: list[BaseMessage]) -> ChatResult:
        self.calls.append([m.model_copy(deep=True) for m in messages])
        asked = last_user_text(messages)
        made = self.made.get(asked, 0)
        self.counter += 1
        if made < self.tool_calls:
            self.made[asked] = made + 1
            call = {
                "name": "lookup",
                "args": {"query": f"{asked}#{made}"},
                "id": f"call_{self.counter}",
                "type": "tool_call",
            }
            reply = AIMessage(content="", tool_calls=[call], id=f"ai_{self.counter}")
        else:
            reply = AIMessage(content=f"answer to {asked}", id=f"ai_{self.counter}")
        if self.report_usage:
            reply.usage_metadata = scripted_usage(self.counter)
            reply.response_metadata["model_name"] = SCRIPTED_MODEL
        if self.response_ids:
            reply.response_metadata["id"] = f"resp_{self.counter}"
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._reply(messages)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._reply(messages)


TOOLS: dict[str, BaseTool] = {"lookup": lookup}


def _results(reply: AIMessage) -> list[ToolMessage]:
    return [
        ToolMessage(
            content=TOOLS[c["name"]].invoke(c["args"]), tool_call_id=c["id"], name=c["name"]
        )
        for c in reply.tool_calls
    ]


def tool_loop(model: ScriptedChatModel) -> RunnableLambda[list[BaseMessage], list[BaseMessage]]:
    """A runnable that runs the model and its tools until it answers; returns the
    messages the turn produced."""

    def run(messages: list[BaseMessage]) -> list[BaseMessage]:
        produced: list[BaseMessage] = []
        while True:
            reply = model.invoke([*messages, *produced])
            assert isinstance(reply, AIMessage)
            produced.append(reply)
            if not reply.tool_calls:
                return produced
            produced.extend(_results(reply))

    async def arun(messages: list[BaseMessage]) -> list[BaseMessage]:
        produced: list[BaseMessage] = []
        while True:
            reply = await model.ainvoke([*messages, *produced])
            assert isinstance(reply, AIMessage)
            produced.append(reply)
            if not reply.tool_calls:
                return produced
            produced.extend(_results(reply))

    return RunnableLambda(run, afunc=arun)


def pairing_problems(messages: Sequence[BaseMessage]) -> list[str]:
    """Calls sent without their result and results sent without their call."""
    calls = {c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
    results = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    return [f"call {c} without result" for c in sorted(calls - results, key=str)] + [
        f"result {r} without call" for r in sorted(results - calls)
    ]


def tokens(messages: Sequence[BaseMessage], tokenizer: Tokenizer) -> int:
    """Tokens of a model call's messages, counted as the store counts them."""
    return sum(count_message_tokens(m, tokenizer) for m in from_langchain(list(messages)))


def without_ids(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """``messages`` with their ids cleared (LangGraph gives fresh random ones per run)."""
    return [m.model_copy(update={"id": None}) for m in messages]
