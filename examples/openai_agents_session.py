"""An OpenAI Agents SDK agent whose session is kept in chatledger.

    python examples/openai_agents_session.py [--turns N] [--url URL] [--session ID]

An offline scripted model (the SDK's own ``agents.testing.ScriptedModel``) plays an
assistant that looks things up twice per question, then answers; swap in
``model="gpt-4o-mini"`` to talk to OpenAI. Every item lands in the SQL store
(``./chatledger.db`` by default); the session sends the model a context that fits its
window, on every model call (``call_model_input_filter``). Afterwards, inspect it with
``chatledger show SESSION --context`` and ``chatledger audit SESSION``.

Needs the extra: ``pip install 'chatledger[openai-agents]'``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import uuid
from typing import Any

from agents import Agent, RunConfig, Runner, function_tool, set_tracing_disabled
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

from store.integrations.openai_agents import ChatledgerSession

WINDOW = 2_000
OUTPUT = 200


@function_tool
def lookup(query: str) -> str:
    """Look ``query`` up in the inventory."""
    return " ".join(f"{query}: item {i} in stock" for i in range(40))


class Script:
    """Two lookups per question, then an answer."""

    def __init__(self) -> None:
        self.calls = 0

    def respond(self, call: ModelCall) -> ModelStep:
        self.calls += 1
        items = [call.input] if isinstance(call.input, str) else list(call.input)
        lookups = 0
        for item in reversed(items):
            if isinstance(item, str) or item.get("role") == "user":
                break
            lookups += item.get("type") == "function_call_output"
        if lookups < 2:
            query = {"query": f"shelf {lookups}"}
            output = function_call("lookup", query, call_id=f"c{self.calls}")
        else:
            output = assistant_message("Everything is in stock.", item_id=f"msg{self.calls}")
        return ModelStep(output=[output], response_id=f"resp{self.calls}")


async def main(turns: int, url: str | None, session_id: str) -> dict[str, Any]:
    set_tracing_disabled(True)
    script = Script()
    model = ScriptedModel([ModelStep.respond(script.respond) for _ in range(3 * turns)])
    agent = Agent(name="clerk", instructions="Answer with lookups.", model=model, tools=[lookup])
    session = ChatledgerSession(
        session_id, url=url, max_context_window_tokens=WINDOW, max_output_tokens=OUTPUT
    )
    config = RunConfig(call_model_input_filter=session.call_model_input_filter)
    try:
        for turn in range(turns):
            result = await Runner.run(
                agent, f"Is order {turn} in stock?", session=session, run_config=config
            )
            print(f"turn {turn}: {result.final_output}")
        store = await session.store()
        stats = await store.stats(session_id)
        return {
            "session": session_id,
            "stored_items": len(await session.get_items(limit=10_000)),
            "context_items": len(await session.get_items()),
            "excluded_groups": len(await store.excluded(session_id)),
            "events": stats.events,
        }
    finally:
        await session.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--url", default=None)
    parser.add_argument("--session", default=f"sdk-{uuid.uuid4().hex[:8]}")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.turns, args.url, args.session))))
