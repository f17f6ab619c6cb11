"""Import sources for the tests, written by code: by the real libraries where one writes
the format (the OpenAI Agents SDK, LangChain, Agent Framework), as the API documents
them otherwise. Each function returns the counts the tests expect, computed from what
it wrote. Google ADK's stores are committed fixtures (``fixtures/``, written by ADK
with ``fixtures/generate.py``); what they hold is ``fixtures/adk_sessions.py``."""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.importing.fixtures.adk_sessions import AdkSession


@dataclass(frozen=True)
class Expected:
    """What one session of a written source holds."""

    session_id: str
    roles: list[str]
    texts: list[str]
    call_ids: list[str]
    result_ids: list[str]


def weather_chat(turns: int) -> list[dict[str, Any]]:
    """A Chat Completions conversation: system, then per turn a question, a call, its
    result and an answer."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}]
    for turn in range(turns):
        call = f"call_{turn}"
        messages += [
            {"role": "user", "content": f"weather {turn}?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call,
                        "type": "function",
                        "function": {"name": "weather", "arguments": json.dumps({"t": turn})},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call, "content": f"sunny {turn}"},
            {"role": "assistant", "content": f"It is sunny ({turn})."},
        ]
    return messages


def chat_expected(session_id: str, messages: list[dict[str, Any]]) -> Expected:
    """The expected session of a Chat Completions conversation."""
    return Expected(
        session_id,
        [m["role"] for m in messages],
        [
            m["content"]
            for m in messages
            if isinstance(m.get("content"), str) and m["role"] != "tool"
        ],
        [c["id"] for m in messages for c in m.get("tool_calls", [])],
        [m["tool_call_id"] for m in messages if m["role"] == "tool"],
    )


def write_chat_jsonl(path: Path, conversations: dict[str | None, list[dict[str, Any]]]) -> None:
    """One conversation a line; a None key writes no id."""
    with path.open("w", encoding="utf-8") as handle:
        for key, messages in conversations.items():
            line: dict[str, Any] = {"messages": messages}
            if key is not None:
                line["id"] = key
            handle.write(json.dumps(line) + "\n")


def responses_items(turns: int) -> list[dict[str, Any]]:
    """Responses input items of a conversation with a function call a turn."""
    items: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}]
    for turn in range(turns):
        items += [
            {"role": "user", "content": f"weather {turn}?"},
            {
                "type": "function_call",
                "call_id": f"call_{turn}",
                "name": "weather",
                "arguments": "{}",
            },
            {"type": "function_call_output", "call_id": f"call_{turn}", "output": f"sunny {turn}"},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": f"sunny ({turn})", "annotations": []}],
            },
        ]
    return items


def responses_expected(session_id: str, items: list[dict[str, Any]]) -> Expected:
    """The expected session of Responses items."""
    roles = {"function_call": "assistant", "function_call_output": "tool"}
    texts: list[str] = []
    for item in items:
        content = item.get("content") if "role" in item else None
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts.append("".join(p["text"] for p in content))
    return Expected(
        session_id,
        [roles.get(item.get("type", ""), item.get("role", "")) for item in items],
        texts,
        [i["call_id"] for i in items if i.get("type") == "function_call"],
        [i["call_id"] for i in items if i.get("type") == "function_call_output"],
    )


async def write_openai_agents(path: Path, sessions: dict[str, list[dict[str, Any]]]) -> None:
    """An Agents SDK ``SQLiteSession`` database, written by the SDK."""
    agents = pytest.importorskip("agents", reason="the openai-agents extra is not installed")
    for session_id, items in sessions.items():
        session = agents.SQLiteSession(session_id, path)
        await session.add_items(items)
        session.close()


async def write_openai_agents_sqlalchemy(
    path: Path, sessions: dict[str, list[dict[str, Any]]]
) -> None:
    """An Agents SDK ``SQLAlchemySession`` database on SQLite, written by the SDK."""
    module = pytest.importorskip(
        "agents.extensions.memory.sqlalchemy_session",
        reason="the openai-agents extra is not installed",
    )
    for session_id, items in sessions.items():
        session = module.SQLAlchemySession.from_url(
            session_id, url=f"sqlite+aiosqlite:///{path}", create_tables=True
        )
        await session.add_items(items)
        await session.engine.dispose()


def write_langchain(path: Path, sessions: dict[str, list[Any]]) -> None:
    """A LangChain ``SQLChatMessageHistory`` database, written by LangChain."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # langchain-community's sunset notice
        history_module = pytest.importorskip(
            "langchain_community.chat_message_histories",
            reason="the langchain extra is not installed",
        )
    for session_id, messages in sessions.items():
        history = history_module.SQLChatMessageHistory(
            session_id=session_id, connection=f"sqlite:///{path}"
        )
        history.add_messages(messages)


def langchain_messages(turns: int) -> list[Any]:
    """LangChain messages of a conversation with a tool call a turn."""
    lc = pytest.importorskip("langchain_core.messages", reason="the langchain extra is missing")
    messages: list[Any] = [lc.SystemMessage("be brief")]
    for turn in range(turns):
        call = {"name": "weather", "args": {"t": turn}, "id": f"call_{turn}"}
        messages += [
            lc.HumanMessage(f"weather {turn}?"),
            lc.AIMessage("", tool_calls=[call]),
            lc.ToolMessage(f"sunny {turn}", tool_call_id=f"call_{turn}"),
            lc.AIMessage(f"It is sunny ({turn})."),
        ]
    return messages


async def write_agent_framework_files(folder: Path, sessions: dict[str, int]) -> None:
    """``FileHistoryProvider`` storage, written by Agent Framework."""
    af = pytest.importorskip("agent_framework", reason="agent-framework-core is not installed")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # FileHistoryProvider is marked experimental
        provider = af.FileHistoryProvider(folder)
    for session_id, turns in sessions.items():
        messages = [af.Message(role="system", contents=["be brief"])]
        for turn in range(turns):
            call = f"call_{turn}"
            messages += [
                af.Message(role="user", contents=[f"weather {turn}?"]),
                af.Message(
                    role="assistant",
                    contents=[af.Content.from_function_call(call, "weather", arguments={})],
                ),
                af.Message(
                    role="tool",
                    contents=[af.Content.from_function_result(call, result=f"sunny {turn}")],
                ),
                af.Message(role="assistant", contents=[f"It is sunny ({turn})."]),
            ]
        await provider.save_messages(session_id, messages)


def anthropic_body(turns: int) -> dict[str, Any]:
    """A Messages API request body with a tool call a turn."""
    messages: list[dict[str, Any]] = []
    for turn in range(turns):
        use = f"toolu_{turn}"
        messages += [
            {"role": "user", "content": f"weather {turn}?"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": use, "name": "weather", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": use, "content": f"sunny {turn}"}
                ],
            },
            {"role": "assistant", "content": f"It is sunny ({turn})."},
        ]
    return {"model": "claude", "max_tokens": 100, "system": "be brief", "messages": messages}


def adk_expected(session: AdkSession) -> Expected:
    """The expected session of an ADK session: one message an event with content (a
    function response makes a ``tool`` message, the ``model`` role ``assistant``), the
    session id its app name, user id and id."""
    events = [event for event in session.events if event.role is not None]
    roles = {"model": "assistant", "user": "user"}
    return Expected(
        f"{session.app_name}/{session.user_id}/{session.session_id}",
        ["tool" if event.results else roles[event.role or ""] for event in events],
        ["".join(event.texts) for event in events],
        [call.call_id for event in events for call in event.calls],
        [result.call_id for event in events for result in event.results],
    )
