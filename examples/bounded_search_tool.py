"""A search tool over a few thousand tickets whose results never flood the context.

    python examples/bounded_search_tool.py [--url URL | --memory] [--session ID]

The tool shrinks its result where it still knows what the records mean: it keeps the
fields asked for (``select_fields``), shortens long texts with a visible marker
(``cap_text``), caps the matches it reads (``cap_records``) and returns one page at a
time with a signed cursor (``paginate``). The token budget is the final guard:
``@bounded`` on the tool, and ``bounded_tools`` on the agent, which also shares one
allowance among the parallel calls of each model response. A result over budget comes
back as a ``ResultTooLarge`` notice, and the model asks again with fewer fields.

An offline scripted client plays the model (``examples/scripted_search_client.py``); the
messages land in the store (``./chatledger.db`` by default), so afterwards
``chatledger show SESSION`` lists every tool result as it was stored.

Needs the extra: ``pip install 'chatledger[agent-framework]'``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import random
import shlex
import sys
import uuid
from pathlib import Path
from typing import Any

from agent_framework import Agent

from store.integrations.agent_framework import ChatledgerHistoryProvider, bounded_tools
from strategies import (
    InvalidCursor,
    bounded,
    cap_records,
    cap_text,
    paginate,
    select_fields,
)
from strategies.messages import FunctionResultContent

RECORDS = 3_000
SEED = 7
PAGE_SIZE = 20
MAX_MATCHES = 200  # matches read per query, before paging
BODY_CHARS = 400
TOOL_TOKENS = 1_500  # one result, at most
TURN_TOKENS = 3_000  # all results of one model response, together
FIELDS = ["id", "service", "severity", "title", "opened_at"]
SERVICES = ["checkout", "search", "billing", "gateway", "payments", "auth"]
WORDS = "timeout retry latency spike error queue disk cache deploy rollback".split()
INSTRUCTIONS = "You triage tickets. Search narrowly, then answer in one line."
PLAN = {
    "Which checkout and payments tickets are open?": [
        {"arguments": {"query": "checkout"}, "next_page": True},
        {"arguments": {"query": "payments", "fields": ["id", "title", "body", "opened_at"]}},
    ],
    "Anything about gateway, search, auth or billing?": [
        {"arguments": {"query": service}} for service in ("gateway", "search", "auth", "billing")
    ],
}
"""What the scripted model asks for each request, all calls of a request at once."""


def make_tickets(count: int = RECORDS, seed: int = SEED) -> list[dict[str, Any]]:
    """``count`` deterministic tickets with long bodies (the part that costs tokens)."""
    pick = random.Random(seed)
    start = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    tickets = []
    for number in range(count):
        service = pick.choice(SERVICES)
        words = " ".join(pick.choice(WORDS) for _ in range(pick.randint(60, 140)))
        tickets.append(
            {
                "id": f"T-{number:05d}",
                "service": service,
                "severity": pick.choice(["low", "medium", "high"]),
                "title": f"{service} {pick.choice(WORDS)} {pick.choice(WORDS)}",
                "body": words,
                "owner": f"team-{pick.randint(1, 9)}",
                "opened_at": start + dt.timedelta(minutes=17 * number),
            }
        )
    return tickets


TICKETS = make_tickets()


def _matches(query: str) -> list[dict[str, Any]]:
    terms = query.lower().split()
    hits = (t for t in TICKETS if all(term in f"{t['service']} {t['title']}" for term in terms))
    return cap_records(hits, MAX_MATCHES)


@bounded(max_tokens=TOOL_TOKENS)
def search_tickets(
    query: str, fields: list[str] | None = None, cursor: str | None = None
) -> dict[str, Any]:
    """Search tickets by service and title words; one page of 20 at a time.

    ``fields`` picks the fields returned (default: id, service, severity, title,
    opened_at; ``body`` and ``owner`` on request). Pass ``cursor`` (the previous page's
    ``next_cursor``) for the next page.
    """
    rows = select_fields(_matches(query), fields or FIELDS)
    for row in rows:
        if "body" in row:
            row["body"] = cap_text(row["body"], BODY_CHARS)
    try:
        return paginate(rows, page_size=PAGE_SIZE, cursor=cursor).model_dump()
    except InvalidCursor as error:
        return {"outcome": "InvalidCursor", "items": [], "message": f"{error}; search again"}


def _describe(result: str, tokens: int) -> str:
    data = json.loads(result)
    if data.get("outcome") == "ResultTooLarge":
        return f"ResultTooLarge, {tokens} tokens: {data['message']}"
    more = "more follow" if data.get("has_more") else "last page"
    return f"page of {len(data['items'])} tickets, {tokens} tokens ({more})"


async def main(url: str | None, session_id: str, memory: bool) -> None:
    """Ask each request of :data:`PLAN`, then print what the store kept of each result."""
    from scripted_search_client import ScriptedSearchClient

    store = None
    if memory:
        from store.memory import InMemoryHistoryStore

        store = InMemoryHistoryStore()
    async with ChatledgerHistoryProvider(store, url=url) as provider:
        agent = Agent(
            ScriptedSearchClient(PLAN),
            instructions=INSTRUCTIONS,
            tools=[search_tickets],
            context_providers=[provider],
            middleware=bounded_tools(TOOL_TOKENS, turn_tokens=TURN_TOKENS),
        )
        session = agent.create_session(session_id=session_id)
        for request in PLAN:
            response = await agent.run(request, session=session)
            print(f"> {request}\n  {response.text}")
        backend = await provider.store()
        stored = await backend.history(session_id)
        print(f"\n{len(TICKETS):,} tickets; each tool result as stored ({backend.tokenizer.name}):")
        for item in stored:
            for content in item.message.contents:
                if isinstance(content, FunctionResultContent):
                    text = str(content.result)
                    tokens = backend.tokenizer.count_tokens(text)
                    print(f"  {content.call_id}: {_describe(text, tokens)}")
    if not memory:
        where = f" --url {shlex.quote(url)}" if url else ""
        print(f"\nsession {session_id}: chatledger show {shlex.quote(session_id)}{where}")


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=None, help="database URL (default ./chatledger.db)")
    parser.add_argument("--session", default=f"search-{uuid.uuid4().hex[:12]}")
    parser.add_argument("--memory", action="store_true", help="in-memory store (nothing kept)")
    return parser.parse_args()


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    args = _arguments()
    asyncio.run(main(args.url, args.session, args.memory))
