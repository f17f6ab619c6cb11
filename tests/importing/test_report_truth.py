"""The import report is the truth: real libraries' logs imported together through the
command line, the report compared with the rows stored; every session left out has a
line, and a run that stored nothing because everything was skipped fails."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from tests.cli.helpers import assert_one_line_error, chatledger
from tests.importing.sources import (
    langchain_messages,
    responses_items,
    weather_chat,
    write_chat_jsonl,
    write_langchain,
    write_openai_agents,
    write_openai_agents_sqlalchemy,
)

TICKET = "support_ticket_A-1001"


def _other_ticket() -> list[dict[str, Any]]:
    """Another conversation under the ticket's id: the same system prompt, then another
    question."""
    items = responses_items(2)
    items[1] = {"role": "user", "content": "where is my parcel?"}
    return items


def _mixed_sources(tmp_path: Path) -> list[Path]:
    agents, alchemy = tmp_path / "agents.db", tmp_path / "alchemy.db"
    asyncio.run(
        write_openai_agents(agents, {TICKET: responses_items(2), "t-2": responses_items(1)})
    )
    asyncio.run(
        write_openai_agents_sqlalchemy(
            alchemy, {TICKET: _other_ticket(), "t-3": responses_items(3)}
        )
    )
    chains = tmp_path / "langchain.db"
    write_langchain(chains, {"lc-1": langchain_messages(2)})
    chats = tmp_path / "chats.jsonl"
    narrator = [{"role": "narrator", "content": "once upon a time"}]
    write_chat_jsonl(chats, {"chat-1": weather_chat(1), "chat-2": narrator})
    return [agents, alchemy, chains, chats]


def _stored(url: str) -> dict[str, int]:
    listed = chatledger("sessions", "--url", url, "--json")
    assert listed.returncode == 0, listed.stderr
    return {s["session_id"]: s["stored_messages"] for s in listed.json()}


def test_mixed_sources_report_exactly_what_was_stored(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/store.db"
    sources = [str(p) for p in _mixed_sources(tmp_path)]
    result = chatledger("import", "--create", *sources, "--url", url, "--skip-invalid", "--json")
    assert result.returncode == 0, result.stderr
    report = result.json()
    stored = _stored(url)
    assert sorted(report["session_ids"]) == sorted(stored)
    assert report["sessions"] == len(stored)
    assert report["new"] == report["messages"] == sum(stored.values())
    assert report["already_stored"] == 0
    left_out = {(s["source"], s["session_id"]) for s in report["skipped"]}
    assert left_out == {(sources[1], TICKET), (sources[3], "chat-2")}
    assert all(s["reason"].startswith(s["source"]) for s in report["skipped"])
    assert stored[TICKET] == len(responses_items(2))  # the first source's conversation only
    again = chatledger("import", "--create", *sources, "--url", url, "--skip-invalid", "--json")
    assert again.returncode == 0, again.stderr
    repeat = again.json()
    assert (repeat["new"], repeat["already_stored"]) == (0, report["messages"])
    assert _stored(url) == stored


def test_the_text_report_says_stored_and_lists_every_skipped_session(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/store.db"
    sources = [str(p) for p in _mixed_sources(tmp_path)]
    result = chatledger("import", "--create", *sources, "--url", url, "--skip-invalid")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    total = sum(_stored(url).values())
    assert lines[0].startswith(f"5 sessions, {total} messages (")
    assert lines[1] == f"{total} stored, 0 already stored"
    assert lines[2] == "skipped 2 sessions"
    assert lines[3].startswith(f"skipped session {TICKET!r}: {sources[1]}: ")
    assert "--session-prefix" in lines[3]
    assert lines[4].startswith(f"skipped session 'chat-2': {sources[3]}: line 2 message 1: ")
    again = chatledger("import", "--create", *sources, "--url", url, "--skip-invalid")
    assert again.stdout.splitlines()[1] == f"0 stored, {total} already stored"
    assert not again.stdout.startswith("imported")


def test_a_run_that_stored_nothing_because_everything_was_skipped_fails(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/store.db"
    bad = tmp_path / "bad.jsonl"
    write_chat_jsonl(bad, {"a": [{"role": "narrator", "content": "x"}], "b": [{"role": "x"}]})
    result = chatledger("import", "--create", str(bad), "--url", url, "--skip-invalid")
    assert result.returncode == 1
    assert result.stdout.splitlines()[:2] == [
        "0 sessions, 0 messages (0 tool calls, 0 results, 0 tokens)",
        "0 stored, 0 already stored",
    ]
    (error,) = result.stderr.splitlines()
    assert error.startswith("chatledger: error: nothing imported: every session was skipped")
    as_json = chatledger("import", "--create", str(bad), "--url", url, "--skip-invalid", "--json")
    assert as_json.returncode == 1
    assert json.loads(as_json.stdout)["sessions"] == 0
    assert _stored(url) == {}


def test_without_skip_invalid_a_skipped_session_fails_the_run_and_writes_nothing(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/store.db"
    sources = [str(p) for p in _mixed_sources(tmp_path)]
    result = chatledger("import", "--create", *sources, "--url", url)
    assert result.returncode == 1
    assert_one_line_error(result, contains=f"{sources[3]}: line 2 message 1: unknown role")
    assert _stored(url) == {}
    sources.pop()  # without the file of the unknown role
    conflict = chatledger("import", "--create", *sources, "--url", url)
    assert conflict.returncode == 1
    assert_one_line_error(conflict, contains=f"{sources[1]}: row ")
    assert "--session-prefix" in conflict.stderr
    assert _stored(url) == {}
