"""The Claude Agent SDK adapter: :class:`ChatledgerSessionStore` passes the SDK's own
``SessionStore`` conformance helper on every backend; a recorded Claude Code transcript
(``fixtures/claude_agent_sdk/``: prompts, a response written as several entries, tool
calls and results, a subagent, records, a compaction) appended in batches loads back
identical; an entry appended twice is stored once; the messages are chatledger's (history,
context, usage, the CLI's ``show`` and ``export``), the records never projected; a
redacted message of an entry leaves nothing of itself stored, nor in ``load``."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("claude_agent_sdk")

from claude_agent_sdk.testing import run_session_store_conformance

from store import HistoryStore
from store.contract import HistoryBackend
from store.errors import InvalidInput
from store.integrations.claude_agent_sdk import (
    MESSAGE_KEY,
    PART_KEY,
    SOURCE,
    ChatledgerSessionStore,
    entries_of,
    entry_messages,
)
from store.memory import InMemoryHistoryStore, MemoryDatabase
from store.rules.erasure import REDACTED_TEXT
from strategies.messages import OtherContent
from strategies.tokenizers import Tokenizer
from tests.cli.helpers import chatledger
from tests.conftest import PgServer

FIXTURES = Path(__file__).parent / "fixtures" / "claude_agent_sdk"
ROOT = Path(__file__).resolve().parents[2]
PROJECT = "-home-ada-shop"
SUBPATH = "subagents/agent-a1b2c3d"
BACKENDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]

Factory = Callable[[], Awaitable[ChatledgerSessionStore]]


def _read(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (FIXTURES / name).read_text().splitlines()]


MAIN = _read("session.jsonl")
SUB = _read("subagent.jsonl")
SESSION = next(e["sessionId"] for e in MAIN if "sessionId" in e)
KEY: Any = {"project_key": PROJECT, "session_id": SESSION}
NAME = f"{PROJECT}/{SESSION}"


def _batches(entries: list[dict[str, Any]], sizes: list[int]) -> list[list[dict[str, Any]]]:
    """``entries`` cut in batches of ``sizes`` in turn (as the SDK flushes them)."""
    out: list[list[dict[str, Any]]] = []
    at = 0
    while at < len(entries):
        size = sizes[len(out) % len(sizes)]
        out.append(entries[at : at + size])
        at += size
    return out


def _spoken(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in entries if e["type"] in ("user", "assistant")]


@pytest.fixture(params=BACKENDS)
async def make_store(
    request: pytest.FixtureRequest, tmp_path: Path, tokenizer: Tokenizer
) -> AsyncIterator[Factory]:
    """Fresh adapters on one backend: each on a tenant of its own of one database."""
    made = 0
    async with AsyncExitStack() as stack:
        database = MemoryDatabase()
        url = f"sqlite:///{tmp_path / 'claude.db'}"
        if request.param == "postgres":
            server: PgServer = request.getfixturevalue("pg_server")
            name = server.clone()
            stack.callback(server.drop_later, name)
            url = server.url_for(name)

        async def make() -> ChatledgerSessionStore:
            nonlocal made
            made += 1
            tenant = f"t{made}"
            store: HistoryBackend
            if request.param == "memory":
                store = InMemoryHistoryStore(database, tenant=tenant, tokenizer=tokenizer)
            else:
                opened = HistoryStore.open(url, tenant=tenant, tokenizer=tokenizer)
                store = await stack.enter_async_context(opened)
            return ChatledgerSessionStore(store)

        yield make


async def test_the_sdk_conformance_helper_passes(make_store: Factory) -> None:
    probe = await make_store()
    for method in ("list_sessions", "list_session_summaries", "delete", "list_subkeys"):
        assert callable(getattr(probe, method))  # none is skipped as absent
    await run_session_store_conformance(make_store)


@pytest.mark.parametrize("sizes", [[1], [4], [3, 1, 5], [len(MAIN)]])
async def test_a_recorded_transcript_appended_in_batches_loads_back_identical(
    make_store: Factory, sizes: list[int]
) -> None:
    adapter = await make_store()
    for batch in _batches(MAIN, sizes):
        await adapter.append(KEY, batch)
    sub_key = {**KEY, "subpath": SUBPATH}
    for batch in _batches(SUB, sizes):
        await adapter.append(sub_key, batch)
    assert await adapter.load(KEY) == MAIN
    assert await adapter.load(sub_key) == SUB
    assert await adapter.load({**KEY, "session_id": "never"}) is None


async def test_an_entry_appended_twice_is_stored_once(make_store: Factory) -> None:
    adapter = await make_store()
    store = await adapter.store()
    with_uuid = [e for e in MAIN if "uuid" in e]
    await adapter.append(KEY, MAIN)
    stored = len(await store.history(NAME, include_excluded=True))
    await adapter.append(KEY, with_uuid)  # a retried flush: every entry again
    await adapter.append(KEY, [with_uuid[2], with_uuid[2]])  # twice in one batch
    assert len(await store.history(NAME, include_excluded=True)) == stored
    assert await adapter.load(KEY) == MAIN


async def test_a_uuid_stored_with_other_content_keeps_the_first_and_the_rest_lands(
    make_store: Factory,
) -> None:
    adapter = await make_store()
    first, second = _spoken(MAIN)[:2]
    await adapter.append(KEY, [first])
    changed = {**first, "message": {"role": "user", "content": "something else"}}
    await adapter.append(KEY, [changed, second])
    assert await adapter.load(KEY) == [first, second]


async def test_entries_without_a_uuid_are_kept_as_appended(make_store: Factory) -> None:
    adapter = await make_store()
    marker = {"type": "permission-mode", "permissionMode": "plan", "sessionId": SESSION}
    await adapter.append(KEY, [marker])
    await adapter.append(KEY, [marker, marker])
    assert await adapter.load(KEY) == [marker] * 3


async def test_the_messages_are_chatledgers_and_the_records_are_never_projected(
    make_store: Factory,
) -> None:
    adapter = await make_store()
    for batch in _batches(MAIN, [5]):
        await adapter.append(KEY, batch)
    store = await adapter.store()
    spoken = [e["uuid"] for e in _spoken(MAIN)]
    active = await store.history(NAME)
    assert [r.message.message_id for r in active] == spoken
    assert all(r.message.role != "system" for r in active)
    context = await store.context(NAME)
    assert [m.message_id for m in context] == spoken
    every = await store.history(NAME, include_excluded=True)
    records = [r for r in every if r.excluded]
    assert len(records) == len(MAIN) - len(spoken)
    assert {r.message.role for r in records} == {"system"}
    for row in records:
        [content] = row.message.contents
        assert isinstance(content, OtherContent) and content.payload in MAIN
        assert row.excluded_reason == f"claude-code {content.kind}"
        stamp = content.payload.get("timestamp")
        assert row.message.created_at == (datetime.fromisoformat(stamp) if stamp else None)
    assert {r.source_system for r in every} == {SOURCE}
    calls = {e["message"]["id"] for e in MAIN if e["type"] == "assistant"}
    used = {c.call_id for c in await store.usage_calls(NAME)}
    assert used == {f"claude:{c}" for c in calls}


async def test_a_response_split_across_batches_records_its_last_usage_once(
    make_store: Factory,
) -> None:
    adapter = await make_store()
    response = next(e["message"]["id"] for e in MAIN if e["type"] == "assistant")
    entries = [e for e in MAIN if e["type"] == "assistant" and e["message"]["id"] == response]
    assert len(entries) > 1 and entries[-1]["message"]["stop_reason"] is not None
    cut = MAIN.index(entries[-1])
    await adapter.append(KEY, MAIN[:cut])
    await adapter.append(KEY, MAIN[cut:])
    await adapter.append(KEY, MAIN[cut:])  # again: no second record
    store = await adapter.store()
    [call] = [c for c in await store.usage_calls(NAME) if c.call_id == f"claude:{response}"]
    reported = entries[-1]["message"]["usage"]
    assert call.usage.output_tokens == reported["output_tokens"]
    assert call.message_id == entries[0]["uuid"]


async def test_a_response_cut_short_is_recorded_at_the_next_entry_or_at_close(
    make_store: Factory,
) -> None:
    adapter = await make_store()
    store = await adapter.store()
    prompt, response = [e for e in MAIN if e["type"] in ("user", "assistant")][:2]
    cut = {**response, "message": {**response["message"], "stop_reason": None}}
    await adapter.append(KEY, [prompt, cut])
    assert await store.usage_calls(NAME) == []  # its last entry may still come
    await adapter.append(KEY, [{**prompt, "uuid": "u-next"}])
    [call] = await store.usage_calls(NAME)
    assert call.message_id == cut["uuid"]
    assert call.usage.output_tokens == cut["message"]["usage"]["output_tokens"]
    other = {**KEY, "session_id": "cut-at-close"}
    await adapter.append(other, [prompt, cut])
    await adapter.aclose()
    assert len(await store.usage_calls(f"{PROJECT}/cut-at-close")) == 1


async def test_a_redacted_entry_leaves_load(make_store: Factory) -> None:
    adapter = await make_store()
    await adapter.append(KEY, MAIN)
    said = next(e for e in MAIN if e["type"] == "assistant" and e["message"]["stop_reason"])
    await (await adapter.store()).redact(NAME, [said["uuid"]], reason="personal data")
    assert await adapter.load(KEY) == [e for e in MAIN if e is not said]


async def test_subagents_are_sessions_of_their_own(make_store: Factory) -> None:
    adapter = await make_store()
    await adapter.append(KEY, MAIN)
    await adapter.append({**KEY, "subpath": SUBPATH}, SUB)
    other = {"project_key": "-home-ada-other", "session_id": SESSION}
    await adapter.append(other, MAIN[:2])
    store = await adapter.store()
    assert {s.session_id for s in await store.sessions()} == {
        NAME,
        f"{NAME}/{SUBPATH}",
        f"-home-ada-other/{SESSION}",
    }
    assert [s["session_id"] for s in await adapter.list_sessions(PROJECT)] == [SESSION]
    assert await adapter.list_subkeys(KEY) == [SUBPATH]
    [summary] = await adapter.list_session_summaries(PROJECT)
    assert summary["data"]["custom_title"] == "cent off in checkout"
    await adapter.delete(KEY)
    assert await adapter.load(KEY) is None
    assert await adapter.load({**KEY, "subpath": SUBPATH}) is None
    assert await adapter.load(other) == MAIN[:2]


@pytest.mark.parametrize(
    ("key", "says"),
    [
        ({"project_key": "a/b", "session_id": "s"}, "project_key must not hold '/'"),
        ({"project_key": "p", "session_id": ""}, "session_id must be a non-empty string"),
        ({"project_key": "p", "session_id": "s", "subpath": ""}, "subpath must be a non-empty"),
    ],
)
async def test_a_bad_key_is_refused_in_one_line(make_store: Factory, key: Any, says: str) -> None:
    adapter = await make_store()
    with pytest.raises(InvalidInput, match=says) as raised:
        await adapter.append(key, MAIN[:1])
    assert "\n" not in str(raised.value)


def test_an_entry_keeps_its_message_and_fields_as_they_came() -> None:
    entry = next(
        e for e in MAIN if e["type"] == "user" and isinstance(e["message"]["content"], list)
    )
    [first] = entry_messages(entry)
    assert first.message_id == entry["uuid"] and first.role == "tool"
    assert first.metadata[PART_KEY] == entry["message"]["content"]
    assert first.metadata[MESSAGE_KEY] == {"role": "user"}
    assert entries_of([first]) == [entry]
    broken = {"type": "user", "uuid": "u-x", "message": {"role": "nobody", "content": 3}}
    [kept] = entry_messages(broken)
    assert kept.role == "system" and kept.message_id == "u-x"


# A turn whose tool results come back in one user entry with a note after them: the
# entry is three messages (u-r, u-r.1, u-r.2), each holding one secret; the first result
# is repeated, as Claude Code does, in the entry's ``toolUseResult``.
SECRETS = ["SECRET-ALPHA-7731", "SECRET-TOKEN-123", "SECRET-NOTE-5520"]
_AT = {"sessionId": SESSION, "isSidechain": False, "cwd": "/home/ada/shop", "version": "2.1.12"}
TURN: list[dict[str, Any]] = [
    {
        **_AT,
        "type": "user",
        "uuid": "u-q",
        "parentUuid": None,
        "timestamp": "2025-11-04T15:00:00.000Z",
        "message": {"role": "user", "content": "Read both config files."},
    },
    {
        **_AT,
        "type": "assistant",
        "uuid": "a-c",
        "parentUuid": "u-q",
        "timestamp": "2025-11-04T15:00:01.000Z",
        "message": {
            "id": "msg_two",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": [
                {"type": "tool_use", "id": "toolu_A", "name": "Read", "input": {"path": "a"}},
                {"type": "tool_use", "id": "toolu_B", "name": "Read", "input": {"path": "b"}},
            ],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 12, "output_tokens": 9},
        },
    },
    {
        **_AT,
        "type": "user",
        "uuid": "u-r",
        "parentUuid": "a-c",
        "timestamp": "2025-11-04T15:00:02.000Z",
        "message": {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_A", "content": SECRETS[0]},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_B",
                    "content": [{"type": "text", "text": SECRETS[1]}],
                    "is_error": False,
                },
                {"type": "text", "text": f"note: {SECRETS[2]}"},
            ],
        },
        "toolUseResult": {"stdout": SECRETS[0], "stderr": ""},
        "sourceToolAssistantUUID": "a-c",
    },
    {
        **_AT,
        "type": "assistant",
        "uuid": "a-d",
        "parentUuid": "u-r",
        "timestamp": "2025-11-04T15:00:03.000Z",
        "message": {
            "id": "msg_end",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": [{"type": "text", "text": "Both read."}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 30, "output_tokens": 3},
        },
    },
]
SPLIT = TURN[2]
PARTS = ["u-r", "u-r.1", "u-r.2"]


def _placeholder(block: dict[str, Any]) -> dict[str, Any]:
    """What a redacted block reads back as: a result keeps its ``tool_use_id``."""
    if block["type"] == "tool_result":
        return {"type": "tool_result", "tool_use_id": block["tool_use_id"], "content": "[redacted]"}
    return {"type": "text", "text": REDACTED_TEXT}


def _stored_text(tmp_path: Path) -> str:
    """Every table of the test's SQLite database, dumped (empty on other backends)."""
    path = tmp_path / "claude.db"
    if not path.exists():
        return ""
    with sqlite3.connect(path) as connection:
        return "\n".join(connection.iterdump())


def _stored_bytes(tmp_path: Path) -> bytes:
    """The SQLite database's files, its write-ahead log too."""
    return b"".join(p.read_bytes() for p in sorted(tmp_path.glob("claude.db*")))


@pytest.mark.parametrize("place", range(len(PARTS)))
async def test_a_redacted_part_of_an_entry_is_erased_and_reads_back_as_a_placeholder(
    make_store: Factory, tmp_path: Path, place: int
) -> None:
    adapter = await make_store()
    store = await adapter.store()
    await adapter.append(KEY, TURN)
    stored = await store.history(NAME, include_excluded=True)
    assert [r.message.message_id for r in stored if r.message.message_id.startswith("u-r")] == PARTS
    secret = SECRETS[place]
    assert secret in _stored_text(tmp_path) or not (tmp_path / "claude.db").exists()
    await store.redact(NAME, [PARTS[place]], reason="personal data")

    loaded = await adapter.load(KEY)
    assert loaded is not None
    assert secret not in json.dumps(loaded)
    blocks = list(SPLIT["message"]["content"])
    blocks[place] = _placeholder(blocks[place])
    own = {k: v for k, v in SPLIT.items() if k != "message"}
    if place == 0:  # the result toolUseResult repeats is gone with it
        del own["toolUseResult"]
    expected = {**own, "message": {**SPLIT["message"], "content": blocks}}
    assert loaded == [*TURN[:2], expected, *TURN[3:]]
    for other in set(SECRETS) - {secret}:
        assert other in json.dumps(loaded)

    every = await store.history(NAME, include_excluded=True)
    assert secret not in json.dumps([r.message.model_dump(mode="json") for r in every])
    assert secret not in _stored_text(tmp_path)
    assert secret.encode() not in _stored_bytes(tmp_path)


async def test_an_entry_whose_every_message_is_redacted_leaves_load(make_store: Factory) -> None:
    adapter = await make_store()
    store = await adapter.store()
    await adapter.append(KEY, TURN)
    await store.redact(NAME, PARTS[1:], reason="personal data")
    [entry] = [e for e in await adapter.load(KEY) or [] if e.get("uuid") == "u-r"]
    assert entry["message"]["content"][0] == SPLIT["message"]["content"][0]
    await store.redact(NAME, PARTS[:1], reason="personal data")
    assert await adapter.load(KEY) == [e for e in TURN if e is not SPLIT]
    every = await store.history(NAME, include_excluded=True)
    dumped = json.dumps([r.message.model_dump(mode="json") for r in every])
    assert not any(secret in dumped for secret in SECRETS)


def test_the_adapter_imports_nothing_of_the_sdk(tmp_path: Path) -> None:
    script = """
import asyncio, sys
from store.memory import InMemoryHistoryStore, MemoryDatabase
from store.integrations.claude_agent_sdk import ChatledgerSessionStore

async def main():
    adapter = ChatledgerSessionStore(InMemoryHistoryStore(MemoryDatabase()))
    key = {"project_key": "p", "session_id": "s"}
    entry = {"type": "user", "uuid": "u", "message": {"role": "user", "content": "hi"}}
    await adapter.append(key, [entry])
    assert await adapter.load(key) == [entry]
    await adapter.delete(key)

asyncio.run(main())
print(sorted(m for m in sys.modules if m.startswith("claude_agent_sdk")))
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


async def _mirror(url: str) -> None:
    async with HistoryStore.open(url) as store:
        adapter = ChatledgerSessionStore(store)
        for batch in _batches(MAIN, [4]):
            await adapter.append(KEY, batch)


def test_show_and_export_work_on_a_mirrored_session(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    asyncio.run(_mirror(url))
    shown = chatledger("show", "--url", url, "--", NAME, module=True)
    assert shown.returncode == 0, shown.stderr
    for entry in _spoken(MAIN):
        assert f" {entry['uuid']} " in shown.stdout
    assert "queue-operation" not in shown.stdout
    exported = chatledger("export", "--format", "jsonl", "--url", url, "--", NAME, module=True)
    assert exported.returncode == 0, exported.stderr
    lines = [json.loads(line) for line in exported.stdout.splitlines()]
    ids = [line["message"]["message_id"] for line in lines if "message" in line]
    assert [i for i in ids if i in {e["uuid"] for e in _spoken(MAIN)}] == [
        e["uuid"] for e in _spoken(MAIN)
    ]
    assert len(ids) == len(MAIN)


def test_the_example_feeds_a_recorded_transcript_through_the_store(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'example.db'}"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "claude_agent_sdk_store.py"),
            "--url",
            url,
            "--transcript",
            str(FIXTURES / "session.jsonl"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["loaded_back_identical"] is True
    assert report["entries"] == len(MAIN)
    assert report["context_messages"] == len(_spoken(MAIN))
    assert report["model_calls"] == len(
        {e["message"]["id"] for e in _spoken(MAIN) if "id" in e["message"]}
    )


async def test_adapters_on_one_url_share_the_store_they_open(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'owned.db'}"
    first, second = ChatledgerSessionStore(url=url), ChatledgerSessionStore(url=url)
    try:
        await first.append(KEY, MAIN[:3])
        assert await second.load(KEY) == MAIN[:3]
        assert await first.store() is await second.store()
    finally:
        await first.aclose()
        await second.aclose()
    with pytest.raises(InvalidInput, match="a store or a url"):
        ChatledgerSessionStore(InMemoryHistoryStore(MemoryDatabase()), url=url)
