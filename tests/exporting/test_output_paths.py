"""Where ``export -o`` and ``report`` write: one line naming the path and the problem
when they cannot, and a default file name that a session id never picks."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

from store import HistoryStore
from strategies.messages import Message
from tests.cli.helpers import assert_one_line_error, chatledger, invoke, run_api

ADK_ID = "weather_app/alice/s1"


def _seed(url: str, *session_ids: str) -> None:
    async def fill(store: HistoryStore) -> None:
        for session_id in session_ids:
            await store.append(session_id, [Message.text_message("user", "hi")])

    run_api(url, fill)


def test_export_into_a_missing_folder_is_one_line_naming_the_path(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/x.db"
    _seed(url, "a")
    target = tmp_path / "missing" / "dir" / "x.jsonl"
    result = chatledger("export", "a", "--format", "jsonl", "-o", str(target), "--url", url)
    assert_one_line_error(result, contains=f"cannot write {str(target)!r}: no folder")
    assert "FileNotFoundError" not in result.stderr and ".x.jsonl." not in result.stderr


def test_export_under_a_file_is_one_line_naming_the_path(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/x.db"
    _seed(url, "a")
    (tmp_path / "plain").write_text("a file, not a folder", encoding="utf-8")
    target = tmp_path / "plain" / "x.jsonl"
    result = chatledger("export", "a", "--format", "jsonl", "-o", str(target), "--url", url)
    assert_one_line_error(result, contains=f"cannot write {str(target)!r}")


def test_export_to_an_unwritable_file_is_one_line_naming_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path}/x.db"
    _seed(url, "a")
    target = tmp_path / "x.jsonl"

    def refused(*args: object, **kwargs: object) -> tuple[int, str]:
        name = str(tmp_path / ".x.jsonl.tmp1234")
        raise PermissionError(13, os.strerror(13), name)

    monkeypatch.setattr(tempfile, "mkstemp", refused)
    result = invoke("export", "a", "--format", "jsonl", "-o", str(target), "--url", url)
    assert_one_line_error(result, contains=f"cannot write {str(target)!r}: Permission denied")
    assert "tmp1234" not in result.stderr and not target.exists()


def test_export_over_a_read_only_file_is_refused_and_keeps_it(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes into a read-only folder")
    url = f"sqlite:///{tmp_path}/x.db"
    _seed(url, "a")
    folder = tmp_path / "locked"
    folder.mkdir()
    target = folder / "x.jsonl"
    target.write_text("kept", encoding="utf-8")
    folder.chmod(0o500)
    try:
        result = chatledger("export", "a", "--format", "jsonl", "-o", str(target), "--url", url)
    finally:
        folder.chmod(0o700)
    assert_one_line_error(result, contains=f"cannot write {str(target)!r}: Permission denied")
    assert target.read_text(encoding="utf-8") == "kept"


@pytest.mark.parametrize("session_id", [ADK_ID, "../x", "/abs/x", "..", "a\\b:c*?"])
def test_report_default_file_name_is_safe_and_in_the_current_folder(
    tmp_path: Path, session_id: str
) -> None:
    url = f"sqlite:///{tmp_path}/x.db"
    _seed(url, session_id)
    here = tmp_path / "here"
    here.mkdir()
    done = chatledger("report", session_id, "--url", url, cwd=here)
    assert done.returncode == 0, done.stderr
    (written,) = list(tmp_path.rglob("*.html"))
    assert written.parent == here and written.name.endswith(".report.html")
    assert written.name in done.stdout
    assert not written.name.startswith(".")
    assert not set(written.name) & set("/\\:*?")


def test_report_default_names_of_two_ids_never_meet(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/x.db"
    _seed(url, "a/b", "a_b", "a%2Fb")
    for session_id in ("a/b", "a_b", "a%2Fb"):
        done = chatledger("report", session_id, "--url", url, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    assert len(list(tmp_path.glob("*.report.html"))) == 3
    assert (tmp_path / "a_b.report.html").is_file()  # a safe id keeps its own name


def test_export_no_record_writes_the_targets_messages_only(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/x.db"
    _seed(url, "a")
    kept = chatledger("export", "a", "--format", "openai-chat", "--url", url)
    assert kept.returncode == 0, kept.stderr
    assert "chatledger" in json.loads(kept.stdout)
    plain = chatledger("export", "a", "--format", "openai-chat", "--no-record", "--url", url)
    assert plain.returncode == 0, plain.stderr
    assert json.loads(plain.stdout) == {"id": "a", "messages": [{"role": "user", "content": "hi"}]}
