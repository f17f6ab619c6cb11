"""Refusals of ``chatledger import`` say what to do, in one line, with the option that
does it: the encoding a file looks like, the flag that keeps an unknown role, the whole
position of a JSON error, and ``--session-prefix`` when one session id is given two
conversations."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.helpers import assert_one_line_error, chatledger
from tests.importing.sources import weather_chat, write_chat_jsonl

WINDOWS_TEXT = "caf\u00e9 \u201cquoted\u201d \u2013 50 \u20ac"
"""Text that Windows-1252 encodes and UTF-8 does not read."""


def _texts(url: str, session_id: str) -> list[str]:
    shown = chatledger("show", session_id, "--url", url, "--json")
    assert shown.returncode == 0, shown.stderr
    return [c["text"] for row in shown.json() for c in row["message"]["contents"]]


def test_a_windows_1252_file_is_refused_with_the_encoding_to_pass(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/store.db"
    source = tmp_path / "cp1252.jsonl"
    lines = [
        json.dumps({"id": "ok", "messages": [{"role": "user", "content": "plain"}]}),
        json.dumps(
            {"id": "w", "messages": [{"role": "user", "content": WINDOWS_TEXT}]}, ensure_ascii=False
        ),
    ]
    source.write_bytes("\n".join(lines).encode("cp1252") + b"\n")
    refused = chatledger("import", "--create", str(source), "--url", url)
    assert refused.returncode == 1
    assert_one_line_error(
        refused, contains=f"{source}: line 2: not UTF-8 text (byte 0xe9 at column"
    )
    assert refused.stderr.rstrip().endswith("it looks like cp1252: pass --encoding cp1252")
    read = chatledger("import", "--create", str(source), "--url", url, "--encoding", "cp1252")
    assert read.returncode == 0, read.stderr
    assert _texts(url, "w") == [WINDOWS_TEXT]
    wrong = chatledger("import", "--create", str(source), "--url", url, "--encoding", "klingon")
    assert wrong.returncode == 2
    assert_one_line_error(wrong, contains="invalid --encoding 'klingon'")


def test_an_unknown_role_is_refused_with_the_flag_that_keeps_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/store.db"
    source = tmp_path / "roles.jsonl"
    write_chat_jsonl(source, {"tale": [{"role": "narrator", "content": "once upon a time"}]})
    refused = chatledger("import", "--create", str(source), "--url", url)
    assert refused.returncode == 1
    assert_one_line_error(refused, contains="unknown role 'narrator'")
    assert "pass --allow-custom-roles to keep it" in refused.stderr
    assert "allow_custom_roles=True" not in refused.stderr
    kept = chatledger("import", "--create", str(source), "--url", url, "--allow-custom-roles")
    assert kept.returncode == 0, kept.stderr
    shown = chatledger("show", "tale", "--url", url, "--json")
    assert [row["message"]["role"] for row in shown.json()] == ["narrator"]


def test_a_truncated_line_names_its_line_and_column_in_full(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/store.db"
    source = tmp_path / "cut.jsonl"
    whole = json.dumps({"id": "a", "messages": [{"role": "user", "content": "x" * 300}]})
    source.write_text(f"{whole}\n{whole[:250]}\n", encoding="utf-8")
    refused = chatledger("import", "--create", str(source), "--url", url)
    assert refused.returncode == 1
    assert_one_line_error(
        refused,
        contains=f"{source}: line 2: not JSON: Invalid control character at column 251; "
        "the text ends before its JSON does (cut off?)",
    )
    document = tmp_path / "cut.json"
    document.write_text('[{"role": "user", "content": "hi"},\n {"role": "assistant", "con', "utf-8")
    broken = chatledger("import", "--create", str(document), "--url", url)
    assert_one_line_error(broken, contains=f"{document}: line 2: not JSON: ")
    assert "at column" in broken.stderr and "(cut off?)" in broken.stderr


def test_one_session_id_given_other_content_by_two_sources_hints_the_prefix(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/store.db"
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_chat_jsonl(first, {"conv": weather_chat(1)})
    other = weather_chat(1)
    other[1]["content"] = "another question"
    write_chat_jsonl(second, {"conv": other})
    refused = chatledger("import", "--create", str(first), str(second), "--url", url)
    assert refused.returncode == 1
    assert_one_line_error(refused, contains=f"{second}: line 1 message 2: session 'conv'")
    assert f"{first}: line 1 message 2" in refused.stderr
    assert "import one of them under another --session-prefix" in refused.stderr
    assert chatledger("import", "--create", str(first), "--url", url).returncode == 0
    later = chatledger("import", "--create", str(second), "--url", url)
    assert later.returncode == 1
    assert_one_line_error(later, contains=f"{second}: line 1 message 2: changed since")
    assert "--session-prefix" in later.stderr
    kept = chatledger("import", "--create", str(second), "--url", url, "--session-prefix", "b/")
    assert kept.returncode == 0, kept.stderr
