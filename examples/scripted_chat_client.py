"""An offline Agent Framework chat client that plays an operations assistant.

Composed as the framework's own clients are (function invocation over chat middleware
over telemetry over ``BaseChatClient``), so the agent runs its real tool loop. Per user
turn it calls the tool the request names, reads the result *from the messages it was
sent*, and answers with a number taken from it; a result missing from the request is an
error, never a guess.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from agent_framework import (
    BaseChatClient,
    ChatMiddlewareLayer,
    ChatResponse,
    Content,
    FunctionInvocationLayer,
    Message,
)
from agent_framework.observability import ChatTelemetryLayer

_SUBJECT = re.compile(r"\b(logs|metrics|file) of ([\w./-]+)")
_TOOLS = {"logs": "search_logs", "metrics": "get_metrics", "file": "read_file"}
_ARGUMENT = {"logs": "service", "metrics": "service", "file": "path"}


def _last_user(messages: Sequence[Message]) -> int:
    return max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)


def _answer(kind: str, result: Any) -> str:
    text = result if isinstance(result, str) else json.dumps(result)
    if kind == "logs":
        return f"{text.split(' ', 1)[0]} error lines found."
    if kind == "metrics":
        data = json.loads(text)
        return f"p99 is {data['p99_ms']} ms over {data['requests']} requests."
    return f"The file defines {text.count('def handler_')} handlers."


class ScriptedChatClient(
    FunctionInvocationLayer[Any],
    ChatMiddlewareLayer[Any],
    ChatTelemetryLayer[Any],
    BaseChatClient[Any],
):
    """Calls the tool a request asks for ("logs|metrics|file of X"), then answers."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.requests: list[list[Message]] = []
        self._calls = 0

    async def _respond(self, messages: Sequence[Message]) -> ChatResponse:
        start = _last_user(messages)
        turn = messages[start:] if start >= 0 else []
        match = _SUBJECT.search(turn[0].text if turn else "")
        if match is None:
            return ChatResponse(messages=[Message(role="assistant", contents=["Noted."])])
        kind, subject = match.groups()
        results = [c for m in turn for c in m.contents if c.type == "function_result"]
        if not results:
            self._calls += 1
            call = Content.from_function_call(
                call_id=f"call_{self._calls}",
                name=_TOOLS[kind],
                arguments={_ARGUMENT[kind]: subject},
            )
            return ChatResponse(messages=[Message(role="assistant", contents=[call])])
        text = _answer(kind, results[-1].result)
        return ChatResponse(messages=[Message(role="assistant", contents=[text])])

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
        self.requests.append(list(messages))
        return self._respond(messages)
