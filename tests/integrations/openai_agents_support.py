"""An offline OpenAI Agents SDK agent: the SDK's own ``ScriptedModel`` playing a policy.

Per user turn the model asks for ``tool_calls`` calls of the ``lookup`` tool, one per
response, then answers in text. It keeps its own count per user request (compaction may
hide earlier calls from it), so the same turns give the same items whatever the session
shows it: runs on chatledger and on the SDK's own ``SQLiteSession`` can be compared item
for item. With ``response_ids`` false it behaves like a Chat Completions model: no
response id, and every item carries the SDK's placeholder id.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents import Agent, FunctionTool, function_tool, set_tracing_disabled
from agents.models.fake_id import FAKE_RESPONSES_ID
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call
from agents.usage import Usage
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

from store.integrations.openai_agents import items_to_messages
from strategies.tokenizers import Tokenizer, count_message_tokens

set_tracing_disabled(True)

TOOL_CALLS = 2
RESULT_ROWS = 60


def lookup_result(query: str, rows: int = RESULT_ROWS) -> str:
    """A deterministic, large tool result (words, so that tokenizers count it honestly)."""
    return " ".join(f"{query}-row{i}" for i in range(rows))


def item_text(item: Mapping[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return ""


def last_user_text(items: Sequence[Mapping[str, Any]]) -> str:
    """The text of the newest user message among ``items``."""
    for item in reversed(items):
        if item.get("role") == "user":
            return item_text(item)
    return ""


@dataclass
class Policy:
    """The script: ``tool_calls`` lookups per user request, then an answer."""

    tool_calls: int = TOOL_CALLS
    response_ids: bool = True
    report_usage: bool = False
    """Whether each response reports its usage (:func:`scripted_usage`)."""
    counter: int = 0
    made: dict[str, int] = field(default_factory=dict)

    def _id(self, prefix: str) -> str:
        return f"{prefix}_{self.counter}" if self.response_ids else FAKE_RESPONSES_ID

    def respond(self, call: ModelCall) -> ModelStep:
        """The next response to ``call``."""
        if isinstance(call.input, str):
            asked = call.input
        else:
            asked = last_user_text([dict(item) for item in call.input])
        made = self.made.get(asked, 0)
        self.counter += 1
        if made < self.tool_calls:
            self.made[asked] = made + 1
            query = f"{asked}#{made}"
            output = function_call(
                "lookup", {"query": query}, call_id=f"call_{self.counter}", item_id=self._id("fc")
            )
        else:
            output = assistant_message(f"answer to {asked}", item_id=self._id("msg"))
        response_id = f"resp_{self.counter}" if self.response_ids else None
        usage = scripted_usage(self.counter) if self.report_usage else Usage()
        return ModelStep(output=[output], response_id=response_id, usage=usage)

    def model(self, steps: int = 200) -> ScriptedModel:
        """A scripted model with room for ``steps`` calls."""
        return ScriptedModel([ModelStep.respond(self.respond) for _ in range(steps)])


def scripted_usage(n: int) -> Usage:
    """What the ``n``-th call (from 1) reports: every lane, the cache and reasoning ones
    included, each different from one call to the next."""
    return Usage(
        requests=1,
        input_tokens=1000 + 10 * n,
        output_tokens=40 + n,
        total_tokens=1040 + 11 * n,
        input_tokens_details=InputTokensDetails.model_validate(
            {"cached_tokens": 600 + n, "cache_write_tokens": 50 + n}
        ),
        output_tokens_details=OutputTokensDetails(reasoning_tokens=20 + n),
    )


def lookup_tool(*, needs_approval: bool = False) -> FunctionTool:
    """The ``lookup`` tool (optionally one that needs approval)."""

    @function_tool(needs_approval=needs_approval)
    def lookup(query: str) -> str:
        """Look ``query`` up."""
        return lookup_result(query)

    return lookup


def make_agent(model: ScriptedModel, *, needs_approval: bool = False) -> Agent[Any]:
    """An agent with the ``lookup`` tool on ``model``."""
    return Agent(
        name="assistant",
        instructions="Answer with the lookup tool.",
        model=model,
        tools=[lookup_tool(needs_approval=needs_approval)],
    )


def model_inputs(model: ScriptedModel) -> list[list[dict[str, Any]]]:
    """What each model call was sent, as plain items."""
    out: list[list[dict[str, Any]]] = []
    for call in model.calls:
        if isinstance(call.input, str):
            out.append([{"role": "user", "content": call.input}])
        else:
            out.append([json.loads(json.dumps(dict(item), default=str)) for item in call.input])
    return out


def pairing_problems(items: Sequence[Mapping[str, Any]]) -> list[str]:
    """Calls sent without their output and outputs sent without their call."""
    calls = {i["call_id"] for i in items if i.get("type") == "function_call"}
    outputs = {i["call_id"] for i in items if i.get("type") == "function_call_output"}
    return [f"call {c} without output" for c in sorted(calls - outputs)] + [
        f"output {c} without call" for c in sorted(outputs - calls)
    ]


def input_tokens(items: Sequence[Mapping[str, Any]], tokenizer: Tokenizer) -> int:
    """Tokens of a model call's input, counted as the store counts messages."""
    messages = items_to_messages([dict(i) for i in items])  # type: ignore[misc]
    return sum(count_message_tokens(m, tokenizer) for m in messages)
