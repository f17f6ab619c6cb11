"""The ``codex`` format: a Codex CLI sessions folder (``fixtures/codex/``, built from the
rollout shapes of Codex's ``codex-rs/protocol``: see docs/importing.md) imported
exactly: Responses items as messages with their calls, results, ids and times, usage
from ``token_count`` on the model call it reports, a ``compacted`` line as a summary
over what it replaced, the other lines kept verbatim and never projected; a second
import stores nothing; damage is refused in one line naming the line, and nothing is
written."""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from store import HistoryStore
from store.errors import InvalidSource
from store.importing import detect_format, import_sources
from store.importing.readers import codex
from store.importing.readers.codex import REPLACEMENT_KEY, USAGE_KEY
from strategies.messages import FunctionCallContent, FunctionResultContent, OtherContent
from tests.cli.helpers import assert_one_line_error, chatledger

SESSIONS = Path(__file__).parent / "fixtures" / "codex" / "sessions"
SESSION = "0199e2b4-7c1a-7d30-9f5e-3a1b2c4d5e6f"
FILE = SESSIONS / "2025" / "10" / "14" / f"rollout-2025-10-14T08-30-00-{SESSION}.jsonl"
ROOT = Path(__file__).resolve().parents[2]


def _lines(path: Path = FILE) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _id(line: int) -> str:
    return f"{SESSION}#{line}"


async def test_the_rollout_imports_its_items_in_order_with_calls_times_and_usage(
    store: HistoryStore,
) -> None:
    assert detect_format(FILE) == "codex"
    report = await import_sources(store, [FILE])
    assert report.session_ids == [SESSION]
    assert (report.messages, report.tool_calls, report.tool_results) == (23, 2, 2)
    assert report.warnings == [f"{FILE}: 1 line of unknown types skipped (world_state)"]
    rows = {r.message.message_id: r for r in await store.history(SESSION, include_excluded=True)}
    spoken = [
        (n, rows[_id(n)].message.role)
        for n in range(1, 24)
        if rows[_id(n)].message.metadata.get("source_format") != "codex"
    ]
    assert spoken == [
        (2, "system"), (3, "user"), (5, "user"), (7, "assistant"), (8, "assistant"),
        (9, "tool"), (11, "assistant"), (12, "tool"), (14, "assistant"), (20, "user"),
        (21, "assistant"),
    ]  # fmt: skip
    developer = rows[_id(2)].message
    assert developer.metadata["original_role"] == "developer"
    assert rows[_id(5)].message.text == "Add a --verbose flag to cli.py"
    assert rows[_id(5)].message.created_at == datetime.fromisoformat("2025-10-14T08:30:05.002Z")
    call = rows[_id(8)].message.contents[0]
    assert isinstance(call, FunctionCallContent)
    assert (call.call_id, call.name, call.arguments) == (
        "call_Vq1",
        "shell",
        '{"command":["bash","-lc","cat cli.py"],"workdir":"/home/ada/tool"}',
    )
    result = rows[_id(9)].message.contents[0]
    assert isinstance(result, FunctionResultContent)
    assert (result.call_id, result.is_error) == ("call_Vq1", False)
    assert result.result == _lines()[8]["payload"]["output"]
    patch, patched = rows[_id(11)].message.contents[0], rows[_id(12)].message.contents[0]
    assert isinstance(patch, OtherContent) and isinstance(patched, OtherContent)
    assert (patch.kind, patch.call_id, patch.pairing) == ("custom_tool_call", "call_Pt2", "call")
    assert (patched.call_id, patched.pairing) == ("call_Pt2", "result")
    assert rows[_id(21)].message.text == "Added test_cli.py with a test of --verbose."
    lines = _lines()
    assert rows[_id(8)].message.metadata[USAGE_KEY] == lines[9]["payload"]["info"]
    assert rows[_id(11)].message.metadata[USAGE_KEY] == lines[12]["payload"]["info"]
    assert rows[_id(14)].message.metadata[USAGE_KEY] == lines[14]["payload"]["info"]
    assert rows[_id(21)].message.metadata[USAGE_KEY] == lines[21]["payload"]["info"]
    assert USAGE_KEY not in rows[_id(7)].message.metadata  # reasoning before the call
    assert {r.source_system for r in rows.values()} == {"codex"}


async def test_a_compaction_is_a_summary_and_the_context_is_what_follows_it(
    store: HistoryStore,
) -> None:
    await import_sources(store, [FILE])
    rows = {r.message.message_id: r for r in await store.history(SESSION, include_excluded=True)}
    summary = rows[_id(17)]
    assert summary.kind == "summary" and summary.message.role == "user"
    assert summary.message.text == _lines()[16]["payload"]["message"]
    assert (
        summary.message.metadata[REPLACEMENT_KEY] == _lines()[16]["payload"]["replacement_history"]
    )
    assert summary.anchor == rows[_id(2)].anchor  # where what it replaced began
    for line in (2, 3, 5, 7, 8, 9, 11, 12, 14):
        assert (rows[_id(line)].excluded, rows[_id(line)].excluded_reason) == (True, "summarized")
    kept = rows[_id(1)]
    assert (kept.excluded, kept.excluded_reason) == (True, "codex session_meta")
    meta = kept.message.contents[0]
    assert isinstance(meta, OtherContent) and meta.payload == _lines()[0]
    context = await store.context(SESSION)
    assert [m.message_id for m in context] == [_id(17), _id(20), _id(21)]


async def test_a_sessions_folder_imports_once(store: HistoryStore, tmp_path: Path) -> None:
    source = tmp_path / "sessions"
    shutil.copytree(SESSIONS, source)
    assert detect_format(source) == "codex"
    report = await import_sources(store, [source])
    assert report.session_ids == [SESSION]
    again = await import_sources(store, [source])
    assert (again.new, again.already_stored) == (0, 23)


def test_the_title_is_the_last_thread_name_and_without_meta_the_file_names_the_session(
    tmp_path: Path,
) -> None:
    (found,) = list(codex.read(FILE, str(FILE)))
    assert (found.source_session, found.title) == (SESSION, "Add --verbose to cli.py")
    path = tmp_path / "rollout-x.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in _lines()[1:9]))
    (found,) = list(codex.read(path, str(path)))
    assert (found.source_session, found.title) == ("rollout-x", None)
    assert found.messages[0].message.message_id == "rollout-x#1"
    assert found.notes == [
        "line 1: the source gives no session id; the session is named after its file: rollout-x"
    ]
    (own,) = list(codex.read(FILE, str(FILE)))
    assert not any("named after its file" in note for note in own.notes)


def _damaged(lines: list[dict[str, Any]], number: int, text: str) -> str:
    rows = [json.dumps(line) for line in lines]
    rows[number - 1] = text
    return "".join(row + "\n" for row in rows)


@pytest.mark.parametrize(
    ("damage", "place", "reason"),
    [
        (lambda lines: _damaged(lines, 8, json.dumps(lines[7])[:30]), "line 8", "cut off"),
        (lambda lines: _damaged(lines, 5, '{"timestamp": "x", "type": "response_item"}'),
         "line 5", "no payload"),
        (lambda lines: _damaged(lines, 3, json.dumps(
            {**lines[2], "payload": {**lines[2]["payload"], "role": "narrator"}})),
         "line 3", "narrator"),
        (lambda lines: _damaged(lines, 4, "[1]"), "line 4", "not a rollout line"),
    ],
)  # fmt: skip
async def test_a_damaged_rollout_is_refused_naming_its_line_and_nothing_is_written(
    store: HistoryStore, tmp_path: Path, damage: Any, place: str, reason: str
) -> None:
    path = tmp_path / FILE.name
    path.write_text(damage(_lines()))
    with pytest.raises(InvalidSource) as raised:
        await import_sources(store, [path], format="codex")
    message = str(raised.value)
    assert str(path) in message and place in message and reason in message
    assert "\n" not in message
    assert await store.sessions() == []


async def test_an_output_without_its_call_is_refused_with_strict(
    store: HistoryStore, tmp_path: Path
) -> None:
    lines = _lines()
    del lines[7]  # the function_call of call_Vq1
    path = tmp_path / FILE.name
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with pytest.raises(InvalidSource) as raised:
        await import_sources(store, [path], strict=True)
    assert "line 8" in str(raised.value) and "call_Vq1" in str(raised.value)
    assert await store.sessions() == []


def test_cli_imports_the_sessions_folder_then_says_already_stored(
    db_url: str, tmp_path: Path
) -> None:
    source = tmp_path / "sessions"
    shutil.copytree(SESSIONS, source)
    args = ("import", "--create", str(source), "--format", "codex", "--url", db_url)
    first = chatledger(*args, env={"PYTHONPATH": str(ROOT)})
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines()[1] == "23 stored, 0 already stored"
    second = chatledger(*args, env={"PYTHONPATH": str(ROOT)})
    assert second.stdout.splitlines()[1] == "0 stored, 23 already stored"
    copied = source / FILE.relative_to(SESSIONS)
    copied.write_text('{"timestamp": "2025-10-14T08:30:00Z", "type": "session_meta", "pay')
    refused = chatledger(*args, env={"PYTHONPATH": str(ROOT)})
    assert_one_line_error(refused, contains="line 1")
