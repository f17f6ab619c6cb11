"""Imports fill the usage ledger (docs/importing.md, "Usage"): the fixtures of Claude
Code, Codex, Pydantic AI and Open WebUI, imported into the in-memory store and SQLite,
record one call per model response, tied to its message, with the source's lanes
converted; the same import again records none; a grown log adds its new calls; forks
do not take their parent's calls; an import whose usage was not recorded (interrupted
after its messages, or made before the ledger) gains it when run again; junk usage is
skipped with a warning and never fails the import."""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from store import HistoryStore
from store.contract import HistoryBackend
from store.importing import import_sources
from store.importing import write as writing
from store.memory import InMemoryHistoryStore
from strategies.tokenizers import CharacterEstimatorTokenizer

FIXTURES = Path(__file__).parent / "fixtures"
CLAUDE = FIXTURES / "claude_code" / "project"
CLAUDE_SESSION = "5f0c3a1e-8d2b-4c6f-9a7e-1b2c3d4e5f60"
CLAUDE_FILE = CLAUDE / f"{CLAUDE_SESSION}.jsonl"
CODEX = FIXTURES / "codex" / "sessions"
CODEX_SESSION = "0199e2b4-7c1a-7d30-9f5e-3a1b2c4d5e6f"
PYDANTIC = FIXTURES / "pydantic_ai"
WEBUI_EXPORT = FIXTURES / "open_webui" / "chat-export.json"
WEBUI_DB = FIXTURES / "open_webui" / "webui.db"
WEBUI_CHAT = "3f2b8c1e-6a4d-4e2f-9b1a-7c5d0e8f1a21"

Lanes = tuple[str | None, str | None, int | None, int | None, int | None, int | None, int | None]


@pytest.fixture(params=["memory", "sqlite"])
async def ledger_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    """The in-memory store, or a store on a fresh SQLite file."""
    if request.param == "memory":
        async with InMemoryHistoryStore(tokenizer=CharacterEstimatorTokenizer()) as memory:
            yield memory
        return
    url = f"sqlite:///{tmp_path}/ledger.db"
    async with HistoryStore.open(url, tokenizer=CharacterEstimatorTokenizer()) as store:
        yield store


async def _calls(store: HistoryBackend, session_id: str) -> list[Lanes]:
    found: list[Lanes] = []
    for call in await store.usage_calls(session_id):
        u = call.usage
        assert call.call_id == f"import:{call.message_id}"
        assert u.exact
        found.append(
            (
                call.message_id,
                u.model,
                u.input_tokens,
                u.output_tokens,
                u.cache_read_tokens,
                u.cache_write_tokens,
                u.reasoning_tokens,
            )
        )
    return found


async def _assert_tied(store: HistoryBackend, session_id: str) -> None:
    """Every call's message is a stored assistant message of the session, with the
    call's time."""
    history = await store.history(session_id, include_excluded=True)
    rows = {r.message.message_id: r.message for r in history}
    for call in await store.usage_calls(session_id):
        message = rows[str(call.message_id)]
        assert message.role == "assistant"
        assert call.usage.at == message.created_at


CLAUDE_MODEL = "claude-sonnet-4-5-20250929"
CLAUDE_CALLS: list[Lanes] = [
    # one response in four entries: the last entry's usage, input 12 + 2048 + 0
    ("a-0002", CLAUDE_MODEL, 2060, 161, 0, 2048, None),
    ("a-0008", CLAUDE_MODEL, 2078, 25, 2048, None, None),
    ("a-0015", CLAUDE_MODEL, 900, 48, None, None, None),
    ("a-0018", CLAUDE_MODEL, 960, 17, None, None, None),
]
SUBAGENT = f"{CLAUDE_SESSION}/subagents/agent-a1b2c3d"


async def test_claude_code(ledger_store: HistoryBackend) -> None:
    report = await import_sources(ledger_store, [CLAUDE])
    assert report.usage_calls == 6
    assert await _calls(ledger_store, CLAUDE_SESSION) == CLAUDE_CALLS
    assert await _calls(ledger_store, SUBAGENT) == [
        ("sa-0002", CLAUDE_MODEL, 300, 20, None, None, None),
        ("sa-0004", CLAUDE_MODEL, 340, 4, None, None, None),
    ]
    await _assert_tied(ledger_store, CLAUDE_SESSION)
    again = await import_sources(ledger_store, [CLAUDE])
    assert (again.new, again.usage_calls) == (0, 0)
    assert len(await ledger_store.usage_calls(CLAUDE_SESSION)) == 4


CODEX_CALLS: list[Lanes] = [
    (f"{CODEX_SESSION}#8", "gpt-5-codex", 5210, 88, 0, None, 64),
    (f"{CODEX_SESSION}#11", "gpt-5-codex", 5420, 140, 5120, None, 32),
    (f"{CODEX_SESSION}#14", "gpt-5-codex", 5700, 20, 5376, None, 0),
    (f"{CODEX_SESSION}#21", "gpt-5-codex", 1900, 30, 0, None, 0),
]


async def test_codex(ledger_store: HistoryBackend) -> None:
    report = await import_sources(ledger_store, [CODEX])
    assert report.usage_calls == 4
    assert await _calls(ledger_store, CODEX_SESSION) == CODEX_CALLS
    rows = {
        r.message.message_id: r.message
        for r in await ledger_store.history(CODEX_SESSION, include_excluded=True)
    }
    for call in await ledger_store.usage_calls(CODEX_SESSION):
        assert rows[str(call.message_id)].role == "assistant"
    again = await import_sources(ledger_store, [CODEX])
    assert (again.new, again.usage_calls) == (0, 0)
    assert await _calls(ledger_store, CODEX_SESSION) == CODEX_CALLS


async def test_pydantic_ai(ledger_store: HistoryBackend) -> None:
    report = await import_sources(ledger_store, [PYDANTIC])
    assert report.usage_calls == 5
    found: dict[str, list[Lanes]] = {}
    for session_id in report.session_ids:
        found[session_id] = await _calls(ledger_store, session_id)
        await _assert_tied(ledger_store, session_id)
    lanes = sorted(
        (lane[1:] for calls in found.values() for lane in calls), key=lambda lane: lane[1] or 0
    )
    assert lanes == [
        ("function:_chat_model:", 54, 5, 0, 0, 0),
        ("function:_chat_model:", 58, 7, 0, 0, 0),
        ("function:_weather_model:", 62, 16, 0, 0, 0),
        ("function:_weather_model:", 70, 21, 0, 0, 0),
        ("function:_weather_model:", 71, 32, 0, 0, 0),
    ]
    again = await import_sources(ledger_store, [PYDANTIC])
    assert (again.new, again.usage_calls) == (0, 0)


@pytest.mark.parametrize("source", [WEBUI_EXPORT, WEBUI_DB], ids=["export", "db"])
async def test_open_webui_and_its_forks(ledger_store: HistoryBackend, source: Path) -> None:
    report = await import_sources(ledger_store, [source])
    assert report.usage_calls == 2
    by_session = {s: await _calls(ledger_store, s) for s in report.session_ids}
    assert by_session[WEBUI_CHAT] == [
        ("00000015-5d3c-4b2a-9e1f-000000000015", "gpt-4o", 1203, 41, None, None, None)
    ]
    assert by_session[f"{WEBUI_CHAT}~00000014-5d3c-4b2a-9e1f-000000000014"] == [
        ("00000014-5d3c-4b2a-9e1f-000000000014", "gpt-4o", 812, 96, None, None, None)
    ]
    # the fork at 00000015 shares that response with its parent: the call stays the parent's
    assert by_session[f"{WEBUI_CHAT}~00000018-5d3c-4b2a-9e1f-000000000018"] == []
    again = await import_sources(ledger_store, [source])
    assert (again.new, again.usage_calls) == (0, 0)
    assert {s: await _calls(ledger_store, s) for s in report.session_ids} == by_session


async def test_a_grown_log_adds_only_its_new_calls(
    ledger_store: HistoryBackend, tmp_path: Path
) -> None:
    lines = CLAUDE_FILE.read_text(encoding="utf-8").splitlines(keepends=True)
    grown = tmp_path / f"{CLAUDE_SESSION}.jsonl"
    cut = next(n for n, line in enumerate(lines) if '"uuid":"a-0011"' in line)
    grown.write_text("".join(lines[:cut]), encoding="utf-8")
    first = await import_sources(ledger_store, [grown])
    assert first.usage_calls == 2
    grown.write_text("".join(lines), encoding="utf-8")
    second = await import_sources(ledger_store, [grown])
    assert second.new > 0
    assert second.usage_calls == 2
    assert await _calls(ledger_store, CLAUDE_SESSION) == CLAUDE_CALLS


async def test_an_import_without_its_usage_gains_it_when_run_again(
    ledger_store: HistoryBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a run interrupted after writing its messages and before their usage, or an
    import made before the ledger existed, leaves it."""

    async def nothing(self: Any, parts: Any) -> None:
        return None

    with monkeypatch.context() as patched:
        patched.setattr(writing.Writing, "_record_many", nothing)
        first = await import_sources(ledger_store, [CLAUDE, CODEX, WEBUI_EXPORT])
    assert first.usage_calls == 0
    assert await ledger_store.usage_calls(CLAUDE_SESSION) == []
    second = await import_sources(ledger_store, [CLAUDE, CODEX, WEBUI_EXPORT])
    assert second.new == 0
    assert second.usage_calls == 6 + 4 + 2
    assert await _calls(ledger_store, CLAUDE_SESSION) == CLAUDE_CALLS
    assert await _calls(ledger_store, CODEX_SESSION) == CODEX_CALLS
    fork = f"{WEBUI_CHAT}~00000018-5d3c-4b2a-9e1f-000000000018"
    assert await ledger_store.usage_calls(fork) == []
    third = await import_sources(ledger_store, [CLAUDE, CODEX, WEBUI_EXPORT])
    assert third.usage_calls == 0


async def test_junk_usage_is_skipped_with_a_warning(
    ledger_store: HistoryBackend, tmp_path: Path
) -> None:
    source = tmp_path / "project"
    shutil.copytree(CLAUDE, source)
    path = source / CLAUDE_FILE.name
    entries = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for entry in entries:
        if entry.get("uuid") == "a-0015":
            entry["message"]["usage"]["output_tokens"] = "48"
        if entry.get("uuid") == "a-0018":
            entry["message"]["usage"]["input_tokens"] = -960
    path.write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")
    report = await import_sources(ledger_store, [source])
    assert report.new > 0
    assert report.usage_calls == 4
    assert [c[0] for c in await _calls(ledger_store, CLAUDE_SESSION)] == ["a-0002", "a-0008"]
    assert report.warnings[-1] == (
        f"{source}: 2 model call usages not recorded (a count that is not a non-negative integer)"
    )


async def test_a_dry_run_records_nothing(ledger_store: HistoryBackend) -> None:
    report = await import_sources(ledger_store, [CLAUDE], dry_run=True)
    assert report.usage_calls == 0
    assert await ledger_store.usage_calls(CLAUDE_SESSION) == []


async def test_the_ledger_totals_an_imported_session(ledger_store: HistoryBackend) -> None:
    await import_sources(ledger_store, [CODEX])
    report = await ledger_store.usage(CODEX_SESSION)
    (row,) = report.rows
    assert (row.key, row.calls, row.input_tokens, row.output_tokens) == (
        "gpt-5-codex", 4, 5210 + 5420 + 5700 + 1900, 88 + 140 + 20 + 30,
    )  # fmt: skip
    assert (row.cache_read_tokens, row.cache_write_tokens, row.reasoning_tokens) == (
        10496, None, 96,
    )  # fmt: skip


def test_the_command_says_how_many_calls_it_recorded(tmp_path: Path) -> None:
    from tests.cli.helpers import chatledger

    url = f"sqlite:///{tmp_path}/cli.db"
    first = chatledger("import", "--create", str(CLAUDE), "--url", url)
    assert first.returncode == 0, first.stderr
    assert "usage of 6 model calls recorded" in first.stdout.splitlines()
    again = chatledger("import", str(CLAUDE), "--url", url)
    assert again.returncode == 0, again.stderr
    assert not any(line.startswith("usage of") for line in again.stdout.splitlines())
