"""A LangChain ``create_agent`` agent whose history is kept in chatledger.

    python examples/langchain_agent.py [--turns N] [--url URL] [--session ID]

An offline scripted chat model plays an assistant that looks things up twice per
question, then answers; pass any LangChain chat model instead (``init_chat_model(...)``).
:class:`~store.integrations.langchain.ChatledgerMiddleware` sends each model call the
projection of the stored history (it fits the window), stores every response and tool
result as the run goes, and compacts when the run ends. The same session then serves a
:class:`~store.integrations.langchain.ChatledgerChatMessageHistory`. Inspect it with
``chatledger show SESSION --context`` and ``chatledger audit SESSION``.

Needs the extra: ``pip install 'chatledger[langchain]'``.
"""

from __future__ import annotations

import argparse
import json
import uuid
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

from store.integrations.langchain import ChatledgerChatMessageHistory, ChatledgerMiddleware

WINDOW = 2_000
OUTPUT = 200


@tool
def lookup(query: str) -> str:
    """Look ``query`` up in the inventory."""
    return " ".join(f"{query}: item {i} in stock" for i in range(40))


class ScriptedModel(BaseChatModel):
    """Two lookups per question, then an answer."""

    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.calls += 1
        lookups = 0
        for message in reversed(messages):
            if isinstance(message, HumanMessage):
                break
            lookups += isinstance(message, ToolMessage)
        if lookups < 2:
            call = {"name": "lookup", "args": {"query": f"shelf {lookups}"}, "id": f"c{self.calls}"}
            reply = AIMessage(content="", tool_calls=[call], id=f"ai{self.calls}")
        else:
            reply = AIMessage(content="Everything is in stock.", id=f"ai{self.calls}")
        return ChatResult(generations=[ChatGeneration(message=reply)])


def main(turns: int, url: str | None, session_id: str) -> dict[str, Any]:
    middleware = ChatledgerMiddleware(
        url=url, max_context_window_tokens=WINDOW, max_output_tokens=OUTPUT
    )
    agent = create_agent(ScriptedModel(), tools=[lookup], middleware=[middleware])
    config: Any = {"configurable": {"thread_id": session_id}}
    history = ChatledgerChatMessageHistory(session_id, url=url)
    try:
        for turn in range(turns):
            state = agent.invoke({"messages": [HumanMessage(f"Is order {turn} in stock?")]}, config)
            print(f"turn {turn}: {state['messages'][-1].content}")
        store = middleware.store()
        return {
            "session": session_id,
            "stored_messages": store.stats(session_id).stored_messages,
            "context_messages": len(history.messages),
            "excluded_groups": len(store.excluded(session_id)),
            "events": store.stats(session_id).events,
        }
    finally:
        history.close()
        middleware.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--url", default=None)
    parser.add_argument("--session", default=f"lc-{uuid.uuid4().hex[:8]}")
    args = parser.parse_args()
    print(json.dumps(main(args.turns, args.url, args.session)))
