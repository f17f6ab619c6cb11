"""The ``claude-code`` format: a Claude Code project folder (``fixtures/claude_code/``,
built from the transcript shapes Claude Code writes: see docs/importing.md) imported
exactly: the chain the SDK finds, one response's entries merged, parallel results put
back, a compaction as a summary over what it replaced, sidechain sessions, records kept
verbatim and never projected; a second import stores nothing; damage is refused in one
line naming the line, and nothing is written."""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from store import HistoryStore
from store.errors import InvalidSource
from store.formats.anthropic import ANTHROPIC_EXTRA_KEY
from store.importing import detect_format, import_sources
from store.importing.readers import claude_code
from store.importing.readers.claude_code import CLAUDE_CODE_KEY, MERGED_KEY
from strategies.messages import (
    FunctionCallContent,
    FunctionResultContent,
    OtherContent,
    ReasoningContent,
)
from tests.cli.helpers import assert_one_line_error, chatledger

PROJECT = Path(__file__).parent / "fixtures" / "claude_code" / "project"
SESSION = "5f0c3a1e-8d2b-4c6f-9a7e-1b2c3d4e5f60"
FILE = PROJECT / f"{SESSION}.jsonl"
SUBAGENT = f"{SESSION}/subagents/agent-a1b2c3d"
ROOT = Path(__file__).resolve().parents[2]


def _entries(path: Path = FILE) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _at(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)


def _write(path: Path, entries: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    return path


async def test_the_session_imports_on_its_chain_with_one_message_a_response(
    store: HistoryStore,
) -> None:
    assert detect_format(FILE) == "claude-code"
    report = await import_sources(store, [FILE])
    assert report.session_ids == [SESSION]
    assert (report.tool_calls, report.tool_results) == (3, 3)
    assert report.warnings == [
        f"{FILE}: 2 entries on no conversation chain (a rewound or edited branch) not imported",
        f"{FILE}: 1 entry of unknown types skipped (frobnicate)",
    ]
    rows = await store.history(SESSION, include_excluded=True)
    stored = sorted(rows, key=lambda r: (r.anchor, r.slot))
    assert [(r.message.message_id, r.message.role, r.excluded) for r in stored] == [
        ("queue-operation-" + stored[0].message.message_id.split("-")[-1], "system", True),
        ("u-0001", "user", True),
        ("u-0013", "user", False),  # the summary, where what it replaced began
        ("a-0002", "assistant", True),
        ("u-0006", "tool", True),
        ("u-0007", "tool", True),
        (stored[6].message.message_id, "system", True),  # file-history-snapshot
        ("a-0008", "assistant", True),
        ("s-0009", "system", True),
        ("s-0012", "system", True),  # the compact boundary
        ("u-0014", "user", False),
        ("a-0015", "assistant", False),
        ("p-0016", "system", True),
        ("u-0017", "tool", False),
        ("a-0018", "assistant", False),
        (stored[15].message.message_id, "system", True),  # ai-title
        (stored[16].message.message_id, "system", True),  # custom-title
    ]
    by_id = {r.message.message_id: r for r in rows}
    assert by_id["u-0013"].kind == "summary"
    assert {by_id[i].excluded_reason for i in ("u-0001", "a-0002", "a-0008")} == {"summarized"}
    assert by_id["s-0009"].excluded_reason == "claude-code system"
    assert by_id["p-0016"].excluded_reason == "claude-code progress"
    kept = stored[6].message.contents[0]
    assert isinstance(kept, OtherContent)
    assert kept.kind == "file-history-snapshot"
    assert kept.payload == _entries()[8]
    context = await store.context(SESSION)
    assert [m.message_id for m in context] == ["u-0013", "u-0014", "a-0015", "u-0017", "a-0018"]
    assert context[0].text.startswith("This session is being continued")
    assert {r.source_system for r in rows} == {"claude-code"}


async def test_one_response_is_one_message_with_its_parallel_calls_and_results(
    store: HistoryStore,
) -> None:
    await import_sources(store, [FILE])
    stored = await store.history(SESSION, include_excluded=True)
    rows = {r.message.message_id: r.message for r in stored}
    assert rows["u-0001"].text == "Why does test_divide fail? Check both the test and the code."
    assert rows["u-0001"].created_at == _at("2025-11-03T09:00:01.000Z")
    response = rows["a-0002"]
    thinking, text, *calls = response.contents
    assert isinstance(thinking, ReasoningContent)
    assert (thinking.text, thinking.payload) == (
        "I should read the test and the module at once.",
        {"signature": "sig-A1"},
    )
    assert text.type == "text" and response.text == "Let me read both files."
    named = [(c.call_id, c.name, c.arguments) for c in calls if isinstance(c, FunctionCallContent)]
    assert named == [
        ("toolu_01R", "Read", {"file_path": "/home/ada/calc/test_calc.py"}),
        ("toolu_02R", "Read", {"file_path": "/home/ada/calc/calcs.py"}),
    ]
    assert response.created_at == _at("2025-11-03T09:00:03.000Z")
    extra = response.metadata[ANTHROPIC_EXTRA_KEY]
    assert isinstance(extra, dict)
    assert extra["id"] == "msg_01A"
    assert extra["usage"] == _entries()[5]["message"]["usage"]  # the response's last, final usage
    merged = response.metadata[MERGED_KEY]
    assert isinstance(merged, list)
    assert [m["uuid"] for m in merged] == ["a-0003", "a-0004", "a-0005"]  # type: ignore[index]
    own = response.metadata[CLAUDE_CODE_KEY]
    assert isinstance(own, dict)
    assert (own["uuid"], own["requestId"], own["cwd"]) == ("a-0002", "req_01", "/home/ada/calc")
    results = [rows[i].contents[0] for i in ("u-0006", "u-0007", "u-0017")]
    assert all(isinstance(r, FunctionResultContent) for r in results)
    assert [(r.call_id, r.is_error) for r in results] == [  # type: ignore[union-attr]
        ("toolu_01R", False),
        ("toolu_02R", True),
        ("toolu_03T", False),
    ]
    assert results[1].result == "<tool_use_error>File does not exist.</tool_use_error>"  # type: ignore[union-attr]
    assert rows["u-0007"].created_at == _at("2025-11-03T09:00:04.500Z")
    tool_result = rows["u-0006"].metadata[CLAUDE_CODE_KEY]
    assert isinstance(tool_result, dict)
    assert tool_result["toolUseResult"] == _entries()[6]["toolUseResult"]


async def test_a_project_folder_gives_the_subagent_its_own_session_and_imports_once(
    store: HistoryStore, tmp_path: Path
) -> None:
    source = tmp_path / "project"
    shutil.copytree(PROJECT, source)
    assert detect_format(source) == "claude-code"
    report = await import_sources(store, [source])
    assert sorted(report.session_ids) == sorted([SESSION, SUBAGENT])
    sub = await store.history(SUBAGENT)
    assert [(r.message.message_id, r.message.role) for r in sub] == [
        ("sa-0001", "user"),
        ("sa-0002", "assistant"),
        ("sa-0003", "tool"),
        ("sa-0004", "assistant"),
    ]
    call = sub[1].message.contents[0]
    assert isinstance(call, FunctionCallContent)
    assert (call.call_id, call.name, call.arguments) == (
        "toolu_04B",
        "Bash",
        {"command": "pytest -q", "description": "Run the tests"},
    )
    assert sub[3].message.text == "1 passed"
    again = await import_sources(store, [source])
    assert (again.new, again.already_stored) == (0, report.messages)


def test_the_title_is_the_last_custom_title_else_ai_title_else_summary(tmp_path: Path) -> None:
    (found,) = [c for c in claude_code.read(FILE, str(FILE)) if c.source_session == SESSION]
    assert found.title == "calc: divide(1, 0)"
    entries = [e for e in _entries() if e["type"] != "custom-title"]
    entries.append({"type": "summary", "summary": "Old summary", "leafUuid": "a-0018"})
    path = _write(tmp_path / f"{SESSION}.jsonl", entries)
    (found,) = list(claude_code.read(path, str(path)))
    assert found.title == "Fix divide by zero"
    path = _write(path, [e for e in entries if e["type"] != "ai-title"])
    (found,) = list(claude_code.read(path, str(path)))
    assert found.title == "Old summary"


def test_sidechain_entries_inside_a_session_file_are_a_session_of_their_own(
    tmp_path: Path,
) -> None:
    side = [dict(e, isSidechain=True, agentId="x9", sessionId=SESSION) for e in _entries(
        PROJECT / SESSION / "subagents" / "agent-a1b2c3d.jsonl"
    )]  # fmt: skip
    path = _write(tmp_path / "old.jsonl", _entries()[:11] + side)
    found = {c.source_session: c for c in claude_code.read(path, str(path))}
    assert sorted(found) == [SESSION, f"{SESSION}/agent-x9"]
    assert [m.message.message_id for m in found[f"{SESSION}/agent-x9"].messages] == [
        "sa-0001",
        "sa-0002",
        "sa-0003",
        "sa-0004",
    ]


async def test_a_second_compaction_summarizes_the_first_summary_too(
    store: HistoryStore, tmp_path: Path
) -> None:
    entries = _entries()
    last = entries[19]  # a-0018
    entries[20:] = [
        {
            "type": "system", "subtype": "compact_boundary", "uuid": "s-0020", "parentUuid": None,
            "logicalParentUuid": last["uuid"], "sessionId": SESSION, "isSidechain": False,
            "timestamp": "2025-11-03T10:00:00.000Z", "compactMetadata": {"trigger": "auto"},
        },
        {
            "type": "user", "uuid": "u-0021", "parentUuid": "s-0020", "sessionId": SESSION,
            "isSidechain": False, "isCompactSummary": True,
            "timestamp": "2025-11-03T10:00:00.100Z",
            "message": {"role": "user", "content": "Summary: divide fixed, tests pass."},
        },
        {
            "type": "user", "uuid": "u-0022", "parentUuid": "u-0021", "sessionId": SESSION,
            "isSidechain": False, "timestamp": "2025-11-03T10:00:05.000Z",
            "message": {"role": "user", "content": "Thanks"},
        },
    ]  # fmt: skip
    path = _write(tmp_path / f"{SESSION}.jsonl", entries)
    await import_sources(store, [path])
    context = await store.context(SESSION)
    assert [(m.message_id, m.text) for m in context] == [
        ("u-0021", "Summary: divide fixed, tests pass."),
        ("u-0022", "Thanks"),
    ]
    again = await import_sources(store, [path])
    assert again.new == 0


def _truncated(entries: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(e) + "\n" for e in entries[:5]) + json.dumps(entries[5])[:40]


def _unknown_role(entries: list[dict[str, Any]]) -> str:
    entries[9]["message"]["role"] = "narrator"
    return "".join(json.dumps(e) + "\n" for e in entries)


def _no_uuid(entries: list[dict[str, Any]]) -> str:
    del entries[3]["uuid"]
    return "".join(json.dumps(e) + "\n" for e in entries)


def _not_an_object(entries: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(e) + "\n" for e in entries[:2]) + "[1, 2]\n"


@pytest.mark.parametrize(
    ("damage", "place", "reason"),
    [
        (_truncated, "line 6", "cut off"),
        (_unknown_role, "line 10", "narrator"),
        (_no_uuid, "line 4", "without a uuid"),
        (_not_an_object, "line 3", "not a JSON object"),
    ],
)
async def test_a_damaged_transcript_is_refused_naming_its_line_and_nothing_is_written(
    store: HistoryStore, tmp_path: Path, damage: Any, place: str, reason: str
) -> None:
    path = tmp_path / f"{SESSION}.jsonl"
    path.write_text(damage(_entries()))
    with pytest.raises(InvalidSource) as raised:
        await import_sources(store, [path], format="claude-code")
    message = str(raised.value)
    assert str(path) in message and place in message and reason in message
    assert "\n" not in message
    assert await store.sessions() == []


async def test_a_result_without_its_call_is_refused_with_strict(
    store: HistoryStore, tmp_path: Path
) -> None:
    entries = _entries()
    entries[4]["message"]["content"][0]["id"] = "toolu_gone"  # toolu_01R is never called
    path = _write(tmp_path / f"{SESSION}.jsonl", entries)
    with pytest.raises(InvalidSource) as raised:
        await import_sources(store, [path], strict=True)
    assert "line 7" in str(raised.value) and "toolu_01R" in str(raised.value)
    assert await store.sessions() == []
    report = await import_sources(store, [path])
    assert any("toolu_01R" in w and "orphan" in w for w in report.warnings)


def test_cli_imports_a_project_then_says_already_stored(db_url: str, tmp_path: Path) -> None:
    source = tmp_path / "project"
    shutil.copytree(PROJECT, source)
    args = ("import", "--create", str(source), "--format", "claude-code", "--url", db_url)
    first = chatledger(*args, env={"PYTHONPATH": str(ROOT)})
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines()[1] == "21 stored, 0 already stored"
    second = chatledger(*args, env={"PYTHONPATH": str(ROOT)})
    assert second.stdout.splitlines()[1] == "0 stored, 21 already stored"
    (source / f"{SESSION}.jsonl").write_text('{"type": "user", "uuid": "u-1", "mess')
    refused = chatledger(*args, env={"PYTHONPATH": str(ROOT)})
    assert_one_line_error(refused, contains="line 1")


async def test_what_a_partial_compaction_preserves_stays_in_the_context(
    store: HistoryStore, tmp_path: Path
) -> None:
    entries = _entries()
    boundary = entries[13]
    assert boundary["subtype"] == "compact_boundary"
    boundary["compactMetadata"]["preservedMessages"] = {"anchorUuid": "u-0013", "uuids": ["a-0008"]}
    path = _write(tmp_path / f"{SESSION}.jsonl", entries)
    await import_sources(store, [path])
    context = await store.context(SESSION)
    assert [m.message_id for m in context] == [
        "u-0013",
        "a-0008",
        "u-0014",
        "a-0015",
        "u-0017",
        "a-0018",
    ]
