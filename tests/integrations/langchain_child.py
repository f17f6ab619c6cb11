"""Resume LangChain sessions in a fresh process: ``python -m tests.integrations.langchain_child``.

Argument: ``URL``.

Runs turn 2 of the agent thread ``t1`` (``create_agent`` with the middleware) and turn 1
of the history session ``h`` (``RunnableWithMessageHistory``) with nothing but the URL
and the session ids, and prints one JSON object describing what the models were sent.
"""

from __future__ import annotations

import json
import sys
import warnings
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables.history import RunnableWithMessageHistory

from store.integrations.langchain import ChatledgerChatMessageHistory, ChatledgerMiddleware
from tests.integrations.langchain_support import (
    ScriptedChatModel,
    lookup,
    pairing_problems,
    tool_loop,
)


def users(messages: list[BaseMessage]) -> list[str]:
    return [str(m.content) for m in messages if isinstance(m, HumanMessage)]


def resume(url: str) -> dict[str, Any]:
    """Run one more turn of each session from new objects; describe it."""
    middleware = ChatledgerMiddleware(url=url)
    model = ScriptedChatModel(counter=1_000)  # a model never reuses a message id
    agent = create_agent(model, tools=[lookup], middleware=[middleware])
    agent.invoke(
        {"messages": [HumanMessage("question 2")]}, config={"configurable": {"thread_id": "t1"}}
    )
    history = ChatledgerChatMessageHistory("h", url=url)
    chat = ScriptedChatModel(counter=2_000)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "RunnableWithMessageHistory is deprecated")
        chain = RunnableWithMessageHistory(tool_loop(chat), lambda session_id: history)
    chain.invoke("question 1", config={"configurable": {"session_id": "h"}})
    report = {
        "agent_first_call": users(model.calls[0]),
        "agent_calls": len(model.calls),
        "agent_pairing": [pairing_problems(c) for c in model.calls],
        "history_first_call": users(chat.calls[0]),
        "history_stored": len(history.messages),
    }
    middleware.close()
    history.close()
    return report


if __name__ == "__main__":
    print(json.dumps(resume(sys.argv[1])))
