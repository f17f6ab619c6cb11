"""Resume an SDK session in a fresh process: ``python -m tests.integrations.openai_agents_child``.

Arguments: ``URL SESSION_ID TURN``. Makes a :class:`ChatledgerSession` with nothing but
the URL and the session id, runs turn ``TURN`` with the scripted model, and prints one
JSON object describing what the model was sent and what the session holds afterwards.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from agents import Runner

from store.integrations.openai_agents import ChatledgerSession
from tests.integrations.openai_agents_support import (
    Policy,
    make_agent,
    model_inputs,
    pairing_problems,
)


async def resume(url: str, session_id: str, turn: int) -> dict[str, Any]:
    """Run turn ``turn`` of ``session_id`` from a new session object; describe it."""
    session = ChatledgerSession(
        session_id, url=url, max_context_window_tokens=4_000, max_output_tokens=400
    )
    model = Policy(counter=1_000 * turn).model()  # a model never reuses an item id
    await Runner.run(make_agent(model), f"question {turn}", session=session)
    sent = model_inputs(model)
    report = {
        "first_call": sent[0],
        "model_calls": len(sent),
        "pairing": [pairing_problems(items) for items in sent],
        "stored_items": len(await session.get_items(limit=10_000)),
    }
    await session.aclose()
    return report


def main(argv: list[str]) -> None:
    """Entry point: ``URL SESSION_ID TURN``."""
    url, session_id, turn = argv
    print(json.dumps(asyncio.run(resume(url, session_id, int(turn)))))


if __name__ == "__main__":
    main(sys.argv[1:])
