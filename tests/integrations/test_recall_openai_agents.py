"""The recall tool end to end with the OpenAI Agents SDK's real runner, offline.

A fact stated in the first turn is compacted away by the session's window; asked for it
later, the SDK's ``ScriptedModel`` calls ``recall_tool(session)``, and the output it is
sent holds the fact within the tool's budget. Every model call keeps its calls next to
their outputs, and each summary it is sent ends with the note.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, FunctionTool, RunConfig, Runner, function_tool
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call
from agents.tool_context import ToolContext

from store.contract import HistoryBackend
from store.integrations.openai_agents import ChatledgerSession, recall_tool
from store.integrations.recall import RecallOptions
from strategies.tokenizers import Tokenizer
from strategies.tool_result import tool_results_summary
from tests.integrations.openai_agents_support import (
    input_tokens,
    last_user_text,
    model_inputs,
    pairing_problems,
)
from tests.integrations.recall_support import (
    ASK,
    BUDGET,
    FACT,
    FILLER_TURNS,
    NOTE,
    OUTPUT,
    QUERY,
    RECALL_TOKENS,
    STATEMENT,
    WINDOW,
    answer_from,
    assert_fact_was_compacted_away,
    assert_recall_result,
    big_result,
    filler,
)

SUMMARY_PREFIX = tool_results_summary(["|"]).split("|")[0]


class RecallPolicy:
    """Per user turn one ``lookup`` then an answer; asked :data:`ASK`, one ``recall``
    then the output it got."""

    def __init__(self) -> None:
        self.counter = 0

    def respond(self, call: ModelCall) -> ModelStep:
        items = [dict(i) for i in call.input] if not isinstance(call.input, str) else []
        asked = call.input if isinstance(call.input, str) else last_user_text(items)
        last_user = max((i for i, it in enumerate(items) if it.get("role") == "user"), default=0)
        outputs = [i for i in items[last_user:] if i.get("type") == "function_call_output"]
        self.counter += 1
        if asked == STATEMENT:
            output: Any = assistant_message("noted", item_id=f"msg_{self.counter}")
        elif outputs:
            text = answer_from(str(outputs[-1]["output"])) if asked == ASK else "ok"
            output = assistant_message(text, item_id=f"msg_{self.counter}")
        else:
            name, args = (
                ("recall", {"query": QUERY, "cursor": None})
                if asked == ASK
                else ("lookup", {"query": asked})
            )
            output = function_call(
                name, args, call_id=f"call_{self.counter}", item_id=f"fc_{self.counter}"
            )
        return ModelStep(output=[output], response_id=f"resp_{self.counter}")

    def model(self, steps: int = 100) -> ScriptedModel:
        return ScriptedModel([ModelStep.respond(self.respond) for _ in range(steps)])


@function_tool
def lookup(query: str) -> str:
    """Look ``query`` up."""
    return big_result(query)


def _session(store: HistoryBackend, session_id: str) -> ChatledgerSession:
    return ChatledgerSession(
        session_id, store=store, max_context_window_tokens=WINDOW, max_output_tokens=OUTPUT
    )


def _outputs(sent: Sequence[Mapping[str, Any]], call_id: str) -> list[str]:
    return [
        str(i["output"])
        for i in sent
        if i.get("type") == "function_call_output" and i.get("call_id") == call_id
    ]


def _texts(sent: Sequence[Mapping[str, Any]]) -> list[str]:
    out: list[str] = []
    for item in sent:
        content = item.get("content")
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            out.append("".join(str(p.get("text", "")) for p in content if isinstance(p, dict)))
    return out


@pytest.mark.parametrize("filtered", [False, True], ids=["per-run", "per-call"])
async def test_a_compacted_fact_comes_back_through_recall(
    filtered: bool, recall_store: HistoryBackend, tokenizer: Tokenizer
) -> None:
    session = _session(recall_store, "recall-sdk")
    tool = recall_tool(session, RecallOptions(max_tokens=RECALL_TOKENS, note=NOTE))
    assert isinstance(tool, FunctionTool) and tool.name == "recall"
    assert session.recall_note == NOTE
    policy = RecallPolicy()
    model = policy.model()
    agent = Agent(name="assistant", model=model, tools=[lookup, tool])
    config = RunConfig(
        call_model_input_filter=session.call_model_input_filter if filtered else None
    )
    await Runner.run(agent, STATEMENT, session=session, run_config=config)
    for turn in range(FILLER_TURNS):
        await Runner.run(agent, filler(turn), session=session, run_config=config)
    fact_id = await assert_fact_was_compacted_away(recall_store, session.session_id)
    await recall_store.compact(session.session_id, "tool-result:keep_last_tool_call_groups=1")
    start = len(model.calls)

    result = await Runner.run(agent, ASK, session=session, run_config=config)

    asking, answered = model_inputs(model)[start:]
    assert all(FACT not in text for text in _texts(asking))
    [sent] = _outputs(answered, f"call_{policy.counter - 1}")
    assert_recall_result(sent, fact_id, tokenizer)
    assert FACT in str(result.final_output)
    await Runner.run(agent, filler(FILLER_TURNS), session=session, run_config=config)
    everything = model_inputs(model)
    assert [pairing_problems(items) for items in everything] == [[]] * len(everything)
    assert max(input_tokens(items, tokenizer) for items in everything) <= BUDGET + RECALL_TOKENS
    summaries = [t for items in everything for t in _texts(items) if t.startswith(SUMMARY_PREFIX)]
    assert summaries and all(t.endswith(f"\n\n{NOTE}") for t in summaries)
    stored = await recall_store.history(session.session_id, include_excluded=True)
    assert all(NOTE not in m.message.text for m in stored)


async def _invoke(tool: FunctionTool, query: str) -> dict[str, Any]:
    arguments = json.dumps({"query": query, "cursor": None})
    context = ToolContext(
        context=None, tool_name=tool.name, tool_call_id="call_x", tool_arguments=arguments
    )
    return dict(json.loads(await tool.on_invoke_tool(context, arguments)))


async def test_the_tool_finds_nothing_of_another_tenant(
    recall_store: HistoryBackend, other_tenant_store: HistoryBackend
) -> None:
    session = _session(recall_store, "shared-id")
    agent = Agent(name="assistant", model=RecallPolicy().model(), tools=[recall_tool(session)])
    await Runner.run(agent, STATEMENT, session=session)
    assert (await _invoke(recall_tool(session), QUERY))["hits"]
    other = _session(other_tenant_store, "shared-id")
    assert (await _invoke(recall_tool(other), QUERY))["hits"] == []
