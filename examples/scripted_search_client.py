"""An offline Agent Framework chat client that searches the way a careful model would.

Composed as the framework's own clients are (function invocation over chat middleware
over telemetry over ``BaseChatClient``), so the agent runs its real tool loop. Per user
turn it makes the ``search_tickets`` calls the example's plan gives it, all at once,
then reads each result *from the messages it was sent*: a ``ResultTooLarge`` notice
makes it ask again (with fewer fields, or alone), a page with more after it makes it
follow the cursor once when the plan says so, and when nothing is left to ask it answers
with what it found.
"""

from __future__ import annotations

import json
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

Plan = Mapping[str, Sequence[Mapping[str, Any]]]
"""Per user request, the calls to make at once: each ``{"arguments": {...}}``, with
``"next_page": True`` to follow that query's cursor once."""


def _parsed(result: Any) -> dict[str, Any]:
    text = result if isinstance(result, str) else json.dumps(result)
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


class ScriptedSearchClient(
    FunctionInvocationLayer[Any],
    ChatMiddlewareLayer[Any],
    ChatTelemetryLayer[Any],
    BaseChatClient[Any],
):
    """Plays the model of the bounded search example (see the module docstring).

    After the planned calls, each response is, in this order of preference: the calls
    whose last result was a ``ResultTooLarge`` notice, asked again (without ``fields``
    if they had some, else once more as they were); the next page of each query
    planned with ``next_page``; an answer.
    """

    def __init__(self, plan: Plan, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.plan = plan
        self._calls = 0

    def _call(self, arguments: Mapping[str, Any]) -> Content:
        self._calls += 1
        return Content.from_function_call(
            call_id=f"call_{self._calls}", name="search_tickets", arguments=dict(arguments)
        )

    def _retries(
        self, batch: list[Content], results: dict[str, Any], asked: list[Any]
    ) -> list[Any]:
        retries: list[Any] = []
        for call in batch:
            if _parsed(results.get(call.call_id)).get("outcome") != "ResultTooLarge":
                continue
            arguments = call.parse_arguments() or {}
            if "fields" in arguments:
                retries.append({k: v for k, v in arguments.items() if k != "fields"})
            elif asked.count(arguments) < 2:
                retries.append(arguments)
        return retries

    def _next_pages(self, request: str, calls: list[Content], results: dict[str, Any]) -> list[Any]:
        asked = [call.parse_arguments() or {} for call in calls]
        follow = {
            step["arguments"]["query"]
            for step in self.plan.get(request, ())
            if step.get("next_page")
        }
        follow -= {arguments.get("query") for arguments in asked if "cursor" in arguments}
        pages: list[Any] = []
        for call, arguments in zip(calls, asked, strict=True):
            result = _parsed(results.get(call.call_id))
            if arguments.get("query") in follow and result.get("has_more"):
                follow.discard(arguments["query"])
                pages.append({**arguments, "cursor": result["next_cursor"]})
        return pages

    async def _respond(self, messages: Sequence[Message]) -> ChatResponse:
        start = max((i for i, m in enumerate(messages) if m.role == "user"), default=0)
        turn = messages[start:]
        request = turn[0].text if turn else ""
        batches = [[c for c in m.contents if c.type == "function_call"] for m in turn]
        batches = [batch for batch in batches if batch]
        calls = [call for batch in batches for call in batch]
        results = {
            c.call_id: c.result for m in turn for c in m.contents if c.type == "function_result"
        }
        if not batches:
            wanted = [step["arguments"] for step in self.plan.get(request, ())]
        else:
            asked = [call.parse_arguments() or {} for call in calls]
            wanted = self._retries(batches[-1], results, asked)
            wanted = wanted or self._next_pages(request, calls, results)
        if wanted:
            contents = [self._call(arguments) for arguments in wanted]
            return ChatResponse(messages=[Message(role="assistant", contents=contents)])
        found = {
            item["id"]
            for result in results.values()
            for item in _parsed(result).get("items", [])
            if isinstance(item, dict) and "id" in item
        }
        text = f"Found {len(found)} tickets; the first: {sorted(found)[:3]}."
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
        return self._respond(messages)
