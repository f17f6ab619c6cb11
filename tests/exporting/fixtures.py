"""Sessions of every source the import reads, written by the real libraries where one
writes the format (see :mod:`tests.importing.sources`), imported into a store: what the
export tests export, validate and import back."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from store.contract import HistoryBackend
from store.importing import import_sources
from tests.importing.sources import (
    anthropic_body,
    langchain_messages,
    weather_chat,
    write_agent_framework_files,
    write_chat_jsonl,
    write_langchain,
    write_openai_agents,
)

ADK_FIXTURE = Path(__file__).parents[1] / "importing" / "fixtures" / "adk_v1.db"

PARALLEL_SESSION = "agents-parallel"
"""The Agents SDK session whose model turn calls the tool twice at once."""


def _answer(item_id: str, text: str) -> dict[str, Any]:
    """An assistant output message as the Agents SDK stores it."""
    return {
        "type": "message",
        "id": item_id,
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
    }


def agents_items(turns: int) -> list[dict[str, Any]]:
    """Responses items as the Agents SDK stores a conversation with a call a turn."""
    items: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}]
    for turn in range(turns):
        items += [
            {"role": "user", "content": f"weather {turn}?"},
            {
                "type": "function_call",
                "id": f"fc_{turn}",
                "call_id": f"call_{turn}",
                "name": "weather",
                "arguments": "{}",
                "status": "completed",
            },
            {"type": "function_call_output", "call_id": f"call_{turn}", "output": f"sunny {turn}"},
            _answer(f"msg_{turn}", f"sunny ({turn})"),
        ]
    return items


def parallel_items() -> list[dict[str, Any]]:
    """Responses items as the Agents SDK stores a turn of two parallel calls: a
    reasoning item, one ``function_call`` item a call, then one output each, then the
    answer."""
    cities = {"call_paris": "Paris", "call_tokyo": "東京"}
    items: list[dict[str, Any]] = [
        {"role": "user", "content": "Weather in Paris and 東京?"},
        {"type": "reasoning", "id": "rs_1", "summary": []},
    ]
    items += [
        {
            "type": "function_call",
            "id": f"fc_{index}",
            "call_id": call_id,
            "name": "weather",
            "arguments": json.dumps({"city": city}, ensure_ascii=False),
            "status": "completed",
        }
        for index, (call_id, city) in enumerate(cities.items())
    ]
    items += [
        {"type": "function_call_output", "call_id": call_id, "output": f"sunny in {city}"}
        for call_id, city in cities.items()
    ]
    items.append(_answer("msg_1", "Sunny in both."))
    return items


async def write_sources(folder: Path) -> list[Path]:
    """One source of each format, in ``folder``."""
    chats = folder / "chats.jsonl"
    write_chat_jsonl(chats, {"chat": weather_chat(2)})
    bodies = folder / "bodies.json"
    bodies.write_text(json.dumps([{**anthropic_body(2), "id": "claude"}]), encoding="utf-8")
    agents = folder / "agents.db"
    await write_openai_agents(
        agents, {"agents": agents_items(2), PARALLEL_SESSION: parallel_items()}
    )
    langchain = folder / "langchain.db"
    write_langchain(langchain, {"lc": langchain_messages(2)})
    af_folder = folder / "af"
    await write_agent_framework_files(af_folder, {"af": 2})
    adk = folder / "adk.db"
    shutil.copyfile(ADK_FIXTURE, adk)
    return [chats, bodies, agents, langchain, af_folder, adk]


async def seed(store: HistoryBackend, folder: Path) -> list[str]:
    """Import one source of each format into ``store``; the session ids."""
    report = await import_sources(store, await write_sources(folder))
    return list(report.session_ids)
