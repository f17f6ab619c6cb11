"""Resume a session in a fresh process: ``python -m tests.integrations.resume_child``.

Arguments: ``URL SESSION_ID MODE TURN``. Opens a new provider on ``URL`` with nothing but
the session id, runs turn ``TURN`` with the scripted client in ``MODE`` (``plain`` or
``harness``), and prints one JSON object describing what the model was sent and what
the store holds afterwards. The test that starts it asserts on that object.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from agent_framework import AgentSession

from store import HistoryStore
from strategies.tokenizers import TiktokenTokenizer
from tests.integrations.agents import BUILDERS, TOOL_CALLS, run_turns, window_provider
from tests.integrations.scripted_client import ScriptedChatClient


async def resume(url: str, session_id: str, mode: str, turn: int) -> dict[str, Any]:
    """Run turn ``turn`` of ``session_id`` from a new provider; describe the outcome."""
    tokenizer = TiktokenTokenizer("o200k_base")
    async with window_provider(url=url, tokenizer=tokenizer) as provider:
        client = ScriptedChatClient(tool_calls=TOOL_CALLS)
        agent = BUILDERS[mode](client, provider, tokenizer)
        checks = await run_turns(
            agent, client, AgentSession(session_id=session_id), tokenizer, range(turn, turn + 1)
        )
        store = await provider.store()
        assert isinstance(store, HistoryStore)
        stored = await store.history(session_id, include_excluded=True)
        stats = await store.stats(session_id)
        return {
            "first_call": [{"role": m.role, "text": m.text} for m in client.calls[0].messages],
            "model_calls": len(client.calls),
            "max_tokens_sent": max(c.tokens for c in checks),
            "stored_users": [s.message.text for s in stored if s.message.role == "user"],
            "stored_appended": sum(1 for s in stored if s.kind != "summary"),
            "stored_messages": stats.stored_messages,
            "events": stats.events,
            "last_save_appended": len(provider.last_save.appended) if provider.last_save else 0,
        }


def main(argv: list[str]) -> None:
    """Entry point: ``URL SESSION_ID MODE TURN``."""
    url, session_id, mode, turn = argv
    print(json.dumps(asyncio.run(resume(url, session_id, mode, int(turn)))))


if __name__ == "__main__":
    main(sys.argv[1:])
