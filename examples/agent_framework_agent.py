"""The demo's operations assistant on Microsoft Agent Framework, with chatledger as history.

    python examples/agent_framework_agent.py [--turns N] [--url URL] [--session ID]

With ``OPENAI_API_KEY`` set it talks to an OpenAI-compatible endpoint
(``OPENAI_BASE_URL``, ``OPENAI_MODEL``, default ``gpt-4o-mini``; needs
``pip install agent-framework-openai``). Without it, an offline scripted client plays the
model, so the example runs anywhere. Either way every message lands in the SQL store
(``./chatledger.db`` by default), and the provider sends the model a context that fits
its window: inspect it afterwards with ``chatledger show SESSION --context`` and
``chatledger audit SESSION``.

Needs the extra: ``pip install 'chatledger[agent-framework]'``.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import shlex
import sys
import uuid
from pathlib import Path
from typing import Any

from agent_framework import Agent

from store.demo import tools
from store.integrations.agent_framework import ChatledgerHistoryProvider, as_agent_framework
from strategies.context_window import ContextWindowCompactionStrategy

WINDOW = 8192
OUTPUT = 1024
RESERVED = 512  # the instructions and tool schemas the framework adds after compaction
INSTRUCTIONS = "You are an operations assistant. Use the tools, then answer in one line."
SEED = 11
REQUESTS = [
    "Show me the logs of checkout.",
    "What are the metrics of search?",
    "Review the file of app/server.py.",
    "Now the logs of billing.",
    "And the metrics of gateway?",
    "Check the file of lib/retry.py.",
]


def search_logs(service: str) -> str:
    """Search the service's logs for ERROR lines (first line: the count)."""
    return tools.search_logs(service, "ERROR", seed=SEED, turn=0)


def get_metrics(service: str) -> str:
    """The service's request count, errors and latency percentiles, as JSON."""
    return json.dumps(tools.get_metrics(service, seed=SEED, turn=0))


def read_file(path: str) -> str:
    """The source of the file at ``path``."""
    return tools.read_file(path, seed=SEED, turn=0)


def chat_client() -> Any:
    """An OpenAI-compatible client when ``OPENAI_API_KEY`` is set, else the scripted one."""
    if not os.environ.get("OPENAI_API_KEY"):
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from scripted_chat_client import ScriptedChatClient

        return ScriptedChatClient()
    try:
        from agent_framework.openai import OpenAIChatCompletionClient
    except ImportError as error:
        message = f"OPENAI_API_KEY is set: pip install agent-framework-openai ({error})"
        raise SystemExit(message) from None
    model = os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
    params = inspect.signature(OpenAIChatCompletionClient).parameters
    options: dict[str, Any] = {"model" if "model" in params else "model_id": model}
    options["api_key"] = os.environ["OPENAI_API_KEY"]
    if os.environ.get("OPENAI_BASE_URL"):
        options["base_url"] = os.environ["OPENAI_BASE_URL"]
    return OpenAIChatCompletionClient(**options)


async def main(turns: int, url: str | None, session_id: str, memory: bool) -> None:
    """Run ``turns`` requests through an agent whose history is chatledger."""
    store = None
    if memory:
        from store.memory import InMemoryHistoryStore

        store = InMemoryHistoryStore()
    window = {"max_context_window_tokens": WINDOW, "max_output_tokens": OUTPUT}
    provider = ChatledgerHistoryProvider(store, url=url, reserved_tokens=RESERVED, **window)
    in_run = ContextWindowCompactionStrategy(reserved_tokens=RESERVED, **window)
    async with provider:
        agent = Agent(
            chat_client(),
            instructions=INSTRUCTIONS,
            tools=[search_logs, get_metrics, read_file],
            context_providers=[provider],
            compaction_strategy=as_agent_framework(in_run),
        )
        session = agent.create_session(session_id=session_id)
        for turn in range(turns):
            request = REQUESTS[turn % len(REQUESTS)]
            response = await agent.run(request, session=session)
            info = await (await provider.store()).session(session_id)
            print(f"[{turn + 1}] > {request}\n    {response.text}")
            print(f"    stored {info.stored_tokens:,} tokens, active {info.active_tokens:,}")
    if not memory:
        where = f" --url {shlex.quote(url)}" if url else ""
        sid = shlex.quote(session_id)
        print(f"\nsession {session_id}: chatledger show {sid} --context{where}")
        print(f"  what was excluded and why: chatledger audit {sid}{where}")


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=len(REQUESTS))
    parser.add_argument("--url", default=None, help="database URL (default ./chatledger.db)")
    parser.add_argument("--session", default=f"af-{uuid.uuid4().hex[:12]}")
    parser.add_argument("--memory", action="store_true", help="in-memory store (nothing kept)")
    return parser.parse_args()


if __name__ == "__main__":
    args = _arguments()
    asyncio.run(main(args.turns, args.url, args.session, args.memory))
