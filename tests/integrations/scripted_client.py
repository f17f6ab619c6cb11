"""An offline Agent Framework chat client that plays a script and records every request.

Composed as the framework's own clients are: the function-invocation layer over the chat
middleware layer over the telemetry layer over ``BaseChatClient``. Each model call
records the messages it was sent (and the options), then answers with the next step of
a scripted policy: per user turn, ``tool_calls`` calls of the ``lookup`` tool, then a
text answer (:class:`ScriptedChatClient`), or one response of parallel ``search`` calls,
then a text answer (:class:`ParallelSearchClient`, which also streams).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_framework import (
    BaseChatClient,
    ChatMiddlewareLayer,
    ChatResponse,
    ChatResponseUpdate,
    Content,
    FunctionInvocationLayer,
    Message,
    UsageDetails,
)
from agent_framework.observability import ChatTelemetryLayer


@dataclass
class Recorded:
    """One model call: the messages sent and the options."""

    messages: list[Message]
    options: dict[str, Any] = field(default_factory=dict)


SCRIPTED_MODEL = "scripted-1"
"""The model the scripted clients name in a response that reports usage."""


def scripted_usage(n: int) -> UsageDetails:
    """What the ``n``-th call (from 1) reports: every lane, the cache and reasoning ones
    included, each different from one call to the next."""
    return UsageDetails(
        input_token_count=1000 + 10 * n,
        output_token_count=40 + n,
        total_token_count=1040 + 11 * n,
        cache_read_input_token_count=600 + n,
        cache_creation_input_token_count=50 + n,
        reasoning_output_token_count=20 + n,
    )


def big_result(call_id: str, size: int) -> str:
    """A deterministic, large tool result (words, so that tokenizers count it honestly)."""
    return " ".join(f"{call_id}-row{i}" for i in range(size))


class ScriptedChatClient(
    FunctionInvocationLayer[Any],
    ChatMiddlewareLayer[Any],
    ChatTelemetryLayer[Any],
    BaseChatClient[Any],
):
    """Answers each user turn with ``tool_calls`` sequential tool calls, then text."""

    def __init__(
        self,
        *,
        tool_calls: int = 2,
        report_usage: bool = False,
        response_ids: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.tool_calls = tool_calls
        self.report_usage = report_usage
        """Whether each response reports its usage (:func:`scripted_usage`)."""
        self.response_ids = response_ids
        """Whether each response has an id (``resp_<n>``, n counting the calls from 1)."""
        self.calls: list[Recorded] = []
        self.responses: list[ChatResponse] = []
        """Every response, in the order of the calls."""
        self._counter = 0
        self._made: dict[str, int] = {}

    def _next_id(self) -> str:
        self._counter += 1
        return f"call_{self._counter}"

    async def _respond(self, messages: Sequence[Message]) -> ChatResponse:
        # The script keeps its own count per request: compaction may hide earlier calls.
        last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
        user_text = messages[last_user].text if last_user >= 0 else ""
        made = self._made.get(user_text, 0)
        if made < self.tool_calls:
            self._made[user_text] = made + 1
            call = Content.from_function_call(
                call_id=self._next_id(), name="lookup", arguments={"query": f"{user_text}#{made}"}
            )
            reply = Message(role="assistant", contents=[call])
        else:
            reply = Message(role="assistant", contents=[f"answer to {user_text}"])
        n = len(self.calls)
        response = ChatResponse(
            messages=[reply],
            response_id=f"resp_{n}" if self.response_ids else None,
            model=SCRIPTED_MODEL if self.report_usage else None,
            usage_details=scripted_usage(n) if self.report_usage else None,
        )
        self.responses.append(response)
        return response

    def _inner_get_response(
        self,
        *,
        messages: Sequence[Message],
        stream: bool,
        options: Mapping[str, Any],
        **kwargs: Any,
    ) -> Any:
        if stream:
            raise NotImplementedError("the scripted client does not stream")
        self.calls.append(Recorded(list(messages), dict(options)))
        return self._respond(messages)


class ParallelSearchClient(
    FunctionInvocationLayer[Any],
    ChatMiddlewareLayer[Any],
    ChatTelemetryLayer[Any],
    BaseChatClient[Any],
):
    """Answers each user turn with one response of parallel ``search`` calls, then text.

    The calls of a turn ask for ``queries`` (one call each, all in one response); once
    their results are in the request, the client answers ``"done: <user text>"``. It
    streams when asked to, one update per content.
    """

    def __init__(
        self, queries: Sequence[str], *, report_usage: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.queries = list(queries)
        self.report_usage = report_usage
        """Whether each response reports its usage (:func:`scripted_usage`; streamed, as
        a last update of its own)."""
        self.calls: list[Recorded] = []
        self._counter = 0

    def _reply(self, messages: Sequence[Message]) -> Message:
        last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
        turn = messages[last_user:] if last_user >= 0 else []
        if any(c.type == "function_result" for m in turn for c in m.contents):
            return Message(role="assistant", contents=[f"done: {turn[0].text}"])
        calls = []
        for query in self.queries:
            self._counter += 1
            calls.append(
                Content.from_function_call(
                    call_id=f"search_{self._counter}", name="search", arguments={"query": query}
                )
            )
        return Message(role="assistant", contents=calls)

    async def _respond(self, messages: Sequence[Message]) -> ChatResponse:
        usage = scripted_usage(len(self.calls)) if self.report_usage else None
        model = SCRIPTED_MODEL if self.report_usage else None
        return ChatResponse(messages=[self._reply(messages)], usage_details=usage, model=model)

    async def _stream(self, messages: Sequence[Message]) -> AsyncIterator[ChatResponseUpdate]:
        n = len(self.calls)
        for content in self._reply(messages).contents:
            yield ChatResponseUpdate(role="assistant", contents=[content])
        if self.report_usage:
            yield ChatResponseUpdate(
                role="assistant",
                contents=[Content.from_usage(scripted_usage(n))],
                model=SCRIPTED_MODEL,
            )

    def _inner_get_response(
        self,
        *,
        messages: Sequence[Message],
        stream: bool,
        options: Mapping[str, Any],
        **kwargs: Any,
    ) -> Any:
        self.calls.append(Recorded(list(messages), dict(options)))
        if stream:
            return self._build_response_stream(self._stream(messages))
        return self._respond(messages)
