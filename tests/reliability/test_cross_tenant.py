"""Another tenant's sessions cannot be reached through the command line or an adapter,
on SQLite and PostgreSQL.

Tenant ``victim`` holds a compacted session ``s`` with a secret in it; tenant
``mallory`` knows every id of it (session, messages, groups, the audit event) and tries
each command and each adapter with them. Every attempt fails as for an unknown id, or
acts on mallory's own rows only; none prints the secret; afterwards the victim's session
is what it was, row for row.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from store import HistoryStore
from store.integrations.agent_framework import ChatledgerHistoryProvider
from store.integrations.langchain import ChatledgerChatMessageHistory
from store.integrations.openai_agents import ChatledgerSession
from strategies.messages import Message
from strategies.tokenizers import CharacterEstimatorTokenizer
from tests.cli.helpers import Result, conversation, invoke
from tests.importing.sources import weather_chat, write_chat_jsonl

TOKENIZER = CharacterEstimatorTokenizer()
VICTIM, MALLORY = "victim", "mallory"
SECRET = "victim-secret-7d1e"
WINDOW = "sliding-window:keep_last_turns=1"


def _api(url: str, tenant: str, action: Any) -> Any:
    async def main() -> Any:
        async with HistoryStore.open(url, tenant=tenant, tokenizer=TOKENIZER) as store:
            return await action(store)

    return asyncio.run(main())


async def _seed_victim(store: HistoryStore) -> None:
    await store.append("s", [*conversation(3), Message.text_message("user", f"keep {SECRET}")])
    await store.compact("s", WINDOW)
    await store.set_metadata("s", {"owner": SECRET})


async def _snapshot(store: HistoryStore) -> tuple[Any, ...]:
    return (
        await store.history("s", include_excluded=True),
        await store.audit("s"),
        await store.get_metadata("s"),
        await store.session("s"),
        await store.excluded("s"),
    )


@pytest.fixture
def url(db_url: str) -> str:
    _api(db_url, VICTIM, _seed_victim)
    _api(db_url, MALLORY, lambda s: s.append("own", conversation(1)))
    return db_url


def _ids(url: str) -> dict[str, str]:
    async def read(store: HistoryStore) -> dict[str, str]:
        history = await store.history("s", include_excluded=True)
        (event,) = await store.audit("s")
        excluded = next(m for m in history if m.excluded)
        return {"message": history[-1].message_id, "group": excluded.group_id, "event": event.id}

    return dict(_api(url, VICTIM, read))


def _as_mallory(url: str, *args: str) -> Result:
    done = invoke(*args, "--url", url, "--tenant", MALLORY)
    assert SECRET not in done.stdout + done.stderr, (args, done)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def _refused(url: str, *args: str) -> None:
    done = _as_mallory(url, *args)
    assert done.returncode != 0, (args, done)
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_no_command_reaches_another_tenants_session(url: str, tmp_path: Path) -> None:
    before = _api(url, VICTIM, _snapshot)
    ids = _ids(url)
    msg, group, event = ids["message"], ids["group"], ids["event"]
    later = (datetime.now(UTC) + timedelta(minutes=5)).isoformat()
    for args in (
        ("show", "s"),
        ("show", "s", "--all", "--json"),
        ("show", "s", "--context"),
        ("audit", "s"),
        ("excluded", "s"),
        ("why", "s", msg),
        ("why", "own", msg),
        ("stats", "s"),
        ("sessions", "--after", "s"),
        ("compact", "s", "--strategy", WINDOW),
        ("restore", "s", "--event", event),
        ("restore", "own", "--event", event),
        ("restore", "s", "--group", group),
        ("restore", "own", "--group", group),
        ("pin", "s", group),
        ("pin", "own", group),
        ("unpin", "s", group),
        ("delete", "s", "--yes"),
        ("recount", "s", "--tokenizer", "o200k_base"),
        ("redact", "s", msg, "--reason", "x", "--yes"),
        ("redact", "own", msg, "--reason", "x", "--yes"),
        ("doctor", "s"),
        ("export", "s", "--format", "jsonl", "-o", str(tmp_path / "out.jsonl")),
        ("report", "s", "-o", str(tmp_path / "page.html")),
    ):
        _refused(url, *args)
    assert not (tmp_path / "out.jsonl").exists() and not (tmp_path / "page.html").exists()
    # what lists, counts or sweeps across sessions keeps to mallory's own
    listed = _as_mallory(url, "sessions", "--json")
    assert [s["session_id"] for s in listed.json()] == ["own"]
    assert _as_mallory(url, "stats", "--json").json()["sessions"] == 1
    assert all(e["session_id"] == "own" for e in _as_mallory(url, "audit", "--json").json())
    assert _as_mallory(url, "doctor", "--fix").returncode == 0
    source = tmp_path / "chats.jsonl"
    write_chat_jsonl(source, {"s": weather_chat(1)})  # the victim's id, in mallory's import
    assert _as_mallory(url, "import", "--create", str(source)).returncode == 0
    purged = _as_mallory(url, "purge", "--older-than", later, "--yes", "--json")
    assert sorted(purged.json()["sessions"]) == ["own", "s"]  # mallory's own two
    assert _api(url, VICTIM, _snapshot) == before


def test_no_adapter_reaches_another_tenants_session(url: str) -> None:
    before = _api(url, VICTIM, _snapshot)
    history = ChatledgerChatMessageHistory("s", url=url, tenant=MALLORY)
    try:
        assert history.messages == []
        history.clear()
        history.add_messages([HumanMessage("mallory's own words")])
        assert [m.content for m in history.messages] == ["mallory's own words"]
        history.clear()
    finally:
        history.close()

    async def agents_sdk() -> None:
        session = ChatledgerSession("s", url=url, tenant=MALLORY, tokenizer=TOKENIZER)
        try:
            assert await session.get_items() == []
            assert await session.get_items(limit=10) == []
            assert await session.pop_item() is None
            await session.clear_session()
        finally:
            await session.aclose()

    async def agent_framework() -> None:
        async with ChatledgerHistoryProvider(url=url, tenant=MALLORY, tokenizer=TOKENIZER) as p:
            assert await p.get_messages("s") == []
            store = await p.store()
            assert [s.session_id for s in await store.sessions()] == ["own"]

    asyncio.run(agents_sdk())
    asyncio.run(agent_framework())
    assert _api(url, VICTIM, _snapshot) == before
