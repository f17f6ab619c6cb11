"""A Claude Agent SDK session mirrored into chatledger, offline.

    python examples/claude_agent_sdk_store.py [--transcript FILE.jsonl] [--url URL]

With the SDK, the store is one option::

    from claude_agent_sdk import ClaudeAgentOptions, query
    from store.integrations.claude_agent_sdk import ChatledgerSessionStore

    options = ClaudeAgentOptions(session_store=ChatledgerSessionStore())
    async for message in query(prompt="...", options=options): ...

Claude Code then hands the store each batch of its transcript's new lines
(``append``), and reads a session back from it to resume (``load``). This example does
what the SDK does without running Claude Code: it feeds a recorded transcript (a Claude
Code ``.jsonl`` file, or the short one below) to the store a turn at a time, reads it
back, and shows what chatledger keeps of it. Afterwards, inspect it with
``chatledger show -- PROJECT/SESSION`` (the ``--`` because the SDK's project keys start
with ``-``), ``chatledger usage`` and ``chatledger export --format anthropic -- ...``.

Needs nothing beyond chatledger (the adapter imports nothing of the SDK); the SDK
itself comes with ``pip install 'chatledger[claude-agent-sdk]'``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
from pathlib import Path
from typing import Any

from store import HistoryStore
from store.integrations.claude_agent_sdk import ChatledgerSessionStore

SESSION = "0d6c1b7e-2f4a-4b8c-9d1e-3a5b7c9d1e2f"
CWD = "/home/ada/notes"
_FIELDS = {"sessionId": SESSION, "cwd": CWD, "isSidechain": False, "version": "2.1.12"}
TRANSCRIPT: list[dict[str, Any]] = [
    {"type": "queue-operation", "operation": "dequeue", "sessionId": SESSION},
    {
        **_FIELDS,
        "type": "user",
        "uuid": "e-1",
        "parentUuid": None,
        "timestamp": "2025-11-05T08:00:00.000Z",
        "message": {"role": "user", "content": "How many notes mention Decimal?"},
    },
    {
        **_FIELDS,
        "type": "assistant",
        "uuid": "e-2",
        "parentUuid": "e-1",
        "timestamp": "2025-11-05T08:00:02.000Z",
        "message": {
            "model": "claude-sonnet-4-5-20250929",
            "id": "msg_ex1",
            "type": "message",
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_ex1",
                    "name": "Grep",
                    "input": {"pattern": "Decimal"},
                }
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 20, "cache_read_input_tokens": 900, "output_tokens": 18},
        },
    },
    {
        **_FIELDS,
        "type": "user",
        "uuid": "e-3",
        "parentUuid": "e-2",
        "timestamp": "2025-11-05T08:00:03.000Z",
        "message": {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_ex1", "content": "a.md\nb.md"}
            ],
        },
    },
    {
        **_FIELDS,
        "type": "assistant",
        "uuid": "e-4",
        "parentUuid": "e-3",
        "timestamp": "2025-11-05T08:00:05.000Z",
        "message": {
            "model": "claude-sonnet-4-5-20250929",
            "id": "msg_ex2",
            "type": "message",
            "role": "assistant",
            "content": [{"type": "text", "text": "Two notes: a.md and b.md."}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 40, "cache_read_input_tokens": 918, "output_tokens": 11},
        },
    },
    {"type": "custom-title", "customTitle": "notes on Decimal", "sessionId": SESSION},
]
"""A short transcript, as Claude Code writes one."""


def project_key(cwd: str) -> str:
    """The SDK's default project key of a working directory (its sanitized path)."""
    return re.sub(r"[^a-zA-Z0-9]", "-", cwd)


def turns(entries: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The entries in the batches the SDK flushes by default: one a turn, ending at the
    assistant entry that ends the turn (and what follows it up to the next prompt)."""
    batches: list[list[dict[str, Any]]] = [[]]
    for entry in entries:
        batches[-1].append(entry)
        message = entry.get("message")
        ended = isinstance(message, dict) and message.get("stop_reason") == "end_turn"
        if entry.get("type") == "assistant" and ended:
            batches.append([])
    return [b for b in batches if b]


async def main(transcript: list[dict[str, Any]], url: str | None) -> dict[str, Any]:
    session_id = next((e["sessionId"] for e in transcript if "sessionId" in e), SESSION)
    cwd = next((e["cwd"] for e in transcript if "cwd" in e), CWD)
    key: Any = {"project_key": project_key(cwd), "session_id": session_id}
    async with HistoryStore.open(url) as store:
        mirror = ChatledgerSessionStore(store)
        for batch in turns(transcript):
            await mirror.append(key, batch)
        loaded = await mirror.load(key)
        name = f"{key['project_key']}/{session_id}"
        context = await store.context(name)
        for message in context:
            empty = "(tool result)" if message.role == "tool" else "(tool call)"
            print(f"{message.role}: {message.text or empty}")
        calls = await store.usage_calls(name)
        await mirror.aclose()
    return {
        "session": name,
        "entries": len(transcript),
        "loaded_back_identical": loaded == transcript,
        "context_messages": len(context),
        "model_calls": len(calls),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transcript", type=Path, help="a Claude Code transcript (.jsonl)")
    parser.add_argument("--url", default=None, help="database URL (default ./chatledger.db)")
    args = parser.parse_args()
    entries = (
        [json.loads(line) for line in args.transcript.read_text().splitlines() if line.strip()]
        if args.transcript
        else TRANSCRIPT
    )
    print(json.dumps(asyncio.run(main(entries, args.url))))
