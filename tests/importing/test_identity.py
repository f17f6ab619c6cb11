"""A session's identity on import is (source system, the source's own session id): two
systems' sessions never merge, in one import or across imports; ids of what a source
leaves without one do not depend on where the file lies; and a store filled under the
earlier id scheme is recognised."""

from __future__ import annotations

import asyncio
import hashlib
import shutil
from pathlib import Path

from store import HistoryStore
from store.formats import from_openai_chat
from store.models import Provenance
from tests.cli.helpers import assert_one_line_error, chatledger
from tests.importing.sources import (
    langchain_messages,
    responses_items,
    weather_chat,
    write_chat_jsonl,
    write_langchain,
    write_openai_agents,
)

TICKET = "support_ticket_A-1001"


def _two_systems(tmp_path: Path) -> tuple[str, str]:
    agents, chains = tmp_path / "agents.db", tmp_path / "langchain.db"
    asyncio.run(write_openai_agents(agents, {TICKET: responses_items(2)}))
    write_langchain(chains, {TICKET: langchain_messages(1), "lc-2": langchain_messages(1)})
    return str(agents), str(chains)


def _sessions(url: str) -> dict[str, int]:
    listed = chatledger("sessions", "--url", url, "--json")
    assert listed.returncode == 0, listed.stderr
    return {s["session_id"]: s["stored_messages"] for s in listed.json()}


def _systems(url: str, session_id: str) -> set[str]:
    shown = chatledger("show", session_id, "--url", url, "--json")
    assert shown.returncode == 0, shown.stderr
    return {row["source_system"] for row in shown.json()}


def test_two_systems_sessions_of_one_id_are_never_merged(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/store.db"
    agents, chains = _two_systems(tmp_path)
    refused = chatledger("import", "--create", agents, chains, "--url", url)
    assert refused.returncode == 1
    assert_one_line_error(refused, contains=f"{chains}: session {TICKET}")
    message = refused.stderr
    assert agents in message and "--session-prefix" in message and "--prefix-by-source" in message
    assert _sessions(url) == {}
    skipped = chatledger(
        "import", "--create", agents, chains, "--url", url, "--skip-invalid", "--json"
    )
    assert skipped.returncode == 0, skipped.stderr
    assert [(s["source"], s["session_id"]) for s in skipped.json()["skipped"]] == [(chains, TICKET)]
    assert _sessions(url) == {TICKET: len(responses_items(2)), "lc-2": 5}
    assert _systems(url, TICKET) == {"openai-agents"}


def test_prefix_by_source_keeps_both(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/store.db"
    agents, chains = _two_systems(tmp_path)
    result = chatledger(
        "import", "--create", agents, chains, "--url", url, "--prefix-by-source", "--json"
    )
    assert result.returncode == 0, result.stderr
    assert result.json()["session_ids"] == [
        f"openai-agents/{TICKET}",
        "langchain/lc-2",
        f"langchain/{TICKET}",
    ]
    assert _systems(url, f"openai-agents/{TICKET}") == {"openai-agents"}
    assert _systems(url, f"langchain/{TICKET}") == {"langchain"}
    prefixed = chatledger(
        "import",
        "--create",
        chains,
        "--url",
        url,
        "--prefix-by-source",
        "--session-prefix",
        "old/",
        "--json",
    )
    assert prefixed.json()["session_ids"] == ["old/langchain/lc-2", f"old/langchain/{TICKET}"]


def test_a_stored_session_is_not_merged_into_by_another_system(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/store.db"
    agents, chains = _two_systems(tmp_path)
    assert chatledger("import", "--create", agents, "--url", url).returncode == 0
    later = chatledger("import", "--create", chains, "--url", url)
    assert later.returncode == 1
    assert_one_line_error(later, contains=f"session {TICKET!r} is stored already")
    message = later.stderr
    assert "imported from openai-agents" in message and "--session-prefix" in message
    assert _sessions(url) == {TICKET: len(responses_items(2))}
    assert _systems(url, TICKET) == {"openai-agents"}


def test_a_copied_or_moved_file_is_recognised(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/store.db"
    source = tmp_path / "chats.jsonl"
    write_chat_jsonl(source, {None: weather_chat(4), "named": weather_chat(3)})
    first = chatledger("import", "--create", str(source), "--url", url, "--json")
    assert first.returncode == 0, first.stderr
    total = first.json()["new"]
    copied = tmp_path / "elsewhere" / "copy.jsonl"
    copied.parent.mkdir()
    shutil.copy(source, copied)
    again = chatledger("import", "--create", str(copied), "--url", url, "--json")
    assert again.returncode == 0, again.stderr
    assert (again.json()["new"], again.json()["already_stored"]) == (0, total)
    moved = tmp_path / "moved.jsonl"
    source.rename(moved)
    text = chatledger("import", "--create", str(moved), "--url", url)
    assert text.stdout.splitlines()[1] == f"0 stored, {total} already stored"
    assert len(_sessions(url)) == 2


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()


async def _store_as_earlier_releases_did(url: str, absolute: str) -> str:
    """What an earlier release stored for a Chat Completions line without an id: the
    session named by the file's absolute path, the messages by their lines."""
    session_id = "imp-" + _digest("openai-chat", absolute, "line 1")[:24]
    messages = from_openai_chat(weather_chat(2))
    named = [
        m.model_copy(
            update={
                "message_id": "imp-"
                + _digest("openai-chat", session_id, f"line 1 message {n}")[:32]
            }
        )
        for n, m in enumerate(messages, start=1)
    ]
    async with HistoryStore.open(url) as store:
        await store.append(session_id, named, provenance=Provenance(system="openai-chat"))
    return session_id


def test_a_store_filled_under_the_earlier_id_scheme_does_not_double(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/store.db"
    source = tmp_path / "chats.jsonl"
    write_chat_jsonl(source, {None: weather_chat(2)})
    session_id = asyncio.run(_store_as_earlier_releases_did(url, str(source.resolve())))
    again = chatledger("import", "--create", str(source), "--url", url, "--json")
    assert again.returncode == 0, again.stderr
    report = again.json()
    assert (report["new"], report["already_stored"]) == (0, len(weather_chat(2)))
    assert report["session_ids"] == [session_id]
    assert _sessions(url) == {session_id: len(weather_chat(2))}
