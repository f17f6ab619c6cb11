"""``chatledger import`` and ``chatledger export`` through the real entry point."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tests.cli.helpers import assert_one_line_error, chatledger
from tests.importing.sources import (
    responses_items,
    weather_chat,
    write_chat_jsonl,
    write_openai_agents,
)


def _source(tmp_path: Path) -> Path:
    path = tmp_path / "chats.jsonl"
    write_chat_jsonl(path, {"a": weather_chat(2), "b": weather_chat(1)})
    return path


def test_import_reports_then_says_already_stored(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/cli.db"
    source = _source(tmp_path)
    first = chatledger("import", "--create", str(source), "--url", url)
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    assert lines[0].startswith("2 sessions, 14 messages (3 tool calls, 3 results")
    assert lines[1] == "14 stored, 0 already stored"
    assert all(len(line) <= 80 for line in lines)
    again = chatledger("import", "--create", str(source), "--url", url, "--json")
    assert again.returncode == 0, again.stderr
    report = again.json()
    assert (report["new"], report["already_stored"], report["session_ids"]) == (0, 14, ["a", "b"])
    shown = chatledger("sessions", "--url", url, "--json")
    assert sorted(s["session_id"] for s in shown.json()) == ["a", "b"]


def test_dry_run_and_prefix(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/cli.db"
    result = chatledger(
        "import",
        "--create",
        str(_source(tmp_path)),
        "--url",
        url,
        "--dry-run",
        "--session-prefix",
        "p/",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1] == "would store 14, 0 already stored"
    listed = chatledger("sessions", "--url", url, "--json")
    assert listed.returncode == 0 and listed.json() == []


def test_bad_input_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/cli.db"
    source = tmp_path / "broken.jsonl"
    source.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n{"messages": [', "utf-8")
    result = chatledger("import", "--create", str(source), "--url", url)
    assert result.returncode == 1
    assert_one_line_error(result, contains=f"{source}: line 2: not JSON")
    listed = chatledger("sessions", "--url", url, "--json")
    assert listed.json() == []
    skipped = chatledger("import", "--create", str(source), "--url", url, "--skip-invalid")
    assert skipped.returncode == 0, skipped.stderr
    assert skipped.stdout.splitlines()[2:] == [
        "skipped 1 conversation",
        f"skipped conversation: {source}: line 2: not JSON: Expecting value at column 15; the text "
        "ends before its JSON does (cut off?)",
    ]


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/cli.db"
    unknown = chatledger(
        "import", "--create", str(_source(tmp_path)), "--url", url, "--format", "yaml"
    )
    assert unknown.returncode == 2
    assert_one_line_error(unknown, contains="invalid --format")
    missing = chatledger("import", "--create", "--url", url)
    assert missing.returncode == 2
    export = chatledger("export", "a", "--url", url, "--format", "yaml")
    assert export.returncode == 2
    strategy = chatledger("export", "a", "--url", url, "--format", "jsonl", "--strategy", "x")
    assert strategy.returncode == 2
    assert_one_line_error(strategy, contains="--strategy needs --context")


def test_export_to_stdout_and_to_a_file_then_import_again(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/cli.db"
    assert chatledger("import", "--create", str(_source(tmp_path)), "--url", url).returncode == 0
    out = chatledger("export", "a", "b", "--url", url, "--format", "jsonl")
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert [line["session_id"] for line in lines] == ["a"] * 9 + ["b"] * 5
    target = tmp_path / "out.jsonl"
    to_file = chatledger("export", "a", "b", "--url", url, "--format", "jsonl", "-o", str(target))
    assert to_file.returncode == 0 and to_file.stdout == ""
    assert target.read_text("utf-8") == out.stdout
    again = chatledger("import", "--create", str(target), "--url", url)
    assert again.stdout.splitlines()[1] == "0 stored, 14 already stored"
    chat = chatledger("export", "a", "--url", url, "--format", "openai-chat")
    (conversation,) = [json.loads(line) for line in chat.stdout.splitlines()]
    assert conversation["id"] == "a" and conversation["messages"] == weather_chat(2)


def test_export_of_an_unknown_session_fails_and_leaves_no_file(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/cli.db"
    assert chatledger("import", "--create", str(_source(tmp_path)), "--url", url).returncode == 0
    target = tmp_path / "out.jsonl"
    result = chatledger("export", "a", "nope", "--url", url, "--format", "jsonl", "-o", str(target))
    assert result.returncode == 1
    assert_one_line_error(result, contains="nope")
    assert not target.exists() and list(tmp_path.glob(".out.jsonl.*")) == []


def test_a_database_source_may_be_given_by_its_sqlite_url(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/cli.db"
    source = tmp_path / "agents.db"
    asyncio.run(write_openai_agents(source, {"s1": responses_items(1), "s2": responses_items(2)}))
    result = chatledger("import", "--create", f"sqlite:///{source}", "--url", url, "--json")
    assert result.returncode == 0, result.stderr
    assert result.json()["session_ids"] == ["s1", "s2"]
    again = chatledger("import", "--create", str(source), "--url", url, "--json")  # the same source
    assert again.json()["new"] == 0
    other = chatledger("import", "--create", "mysql://me:secret@127.0.0.1/agents", "--url", url)
    assert other.returncode == 1
    assert_one_line_error(other, contains="PostgreSQL URLs (postgresql://USER@HOST/DB) are read")
    assert "secret" not in other.stderr
