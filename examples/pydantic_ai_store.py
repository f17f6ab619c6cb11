"""A Pydantic AI agent whose conversations are kept in chatledger.

    python examples/pydantic_ai_store.py [--turns N] [--url URL] [--conversation ID]

An offline scripted model (Pydantic AI's own ``FunctionModel``) plays an assistant that
adds numbers with a tool, then answers; swap in ``"openai:gpt-4o-mini"`` to talk to a
real model. Each turn loads the conversation, runs the agent and saves it through
:class:`~store.integrations.pydantic_ai.ChatledgerConversationStore`; then the example
branches the conversation back one turn, forks it, and reloads only the last messages
(``load(limit=...)``). Every message lands in the SQL store (``./chatledger.db`` by
default); inspect it with ``chatledger show ID`` and ``chatledger branches ID``.

Needs the extra: ``pip install 'chatledger[pydantic-ai]'``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import uuid
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from store.integrations.pydantic_ai import ChatledgerConversationStore


def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Call the tool once a turn, then say what it returned."""
    returned = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
    if returned:
        return ModelResponse(parts=[TextPart(f"The total is {returned[0].content}.")])
    return ModelResponse(parts=[ToolCallPart("add", {"a": len(messages), "b": 40})])


agent = Agent(FunctionModel(reply), instructions="Add with the tool, then answer.")


@agent.tool_plain
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def main(turns: int, url: str | None, conversation_id: str) -> dict[str, Any]:
    store = ChatledgerConversationStore(url=url or "sqlite:///chatledger.db")
    try:
        for turn in range(turns):
            loaded = await store.load(conversation_id)
            conversation = loaded or Conversation(conversation_id=conversation_id)
            result = await agent.run(f"Add for order {turn}.", conversation=conversation)
            await store.save(result)
            print(f"turn {turn}: {result.output}")
        loaded = await store.load(conversation_id)
        assert loaded is not None
        # Back one turn (4 messages: prompt, call, result, answer), and a new last turn.
        branched = await store.branch(
            conversation_id, at=len(loaded.messages) - 4, expected_revision=loaded.revision
        )
        await store.save(await agent.run("Add once more.", conversation=branched))
        forked = await store.fork(conversation_id, at=4, new_conversation_id=f"{conversation_id}-f")
        await store.save(await agent.run("Add in the fork.", conversation=forked))
        recent = await store.load(conversation_id, limit=4)
        record = await store.read_record(conversation_id)
        assert recent is not None and record is not None
        return {
            "conversation": conversation_id,
            "messages": len((await store.load(conversation_id) or loaded).messages),
            "recent": len(recent.messages),
            "branches_left": len(record.branches),
            "conversations": len(await store.list_conversations()),
        }
    finally:
        await store.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument(
        "--url", default=None, help="database URL (default sqlite:///chatledger.db)"
    )
    parser.add_argument("--conversation", default=f"pyd-{uuid.uuid4().hex[:8]}")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.turns, args.url, args.conversation))))
