"""What the commands say, as a new user would run it: a suggested command carries the
``--url`` it was given; ``import`` creates a schema only when asked (or at the default
file); ``restore`` says how many groups it pinned, and ``--no-pin`` pins none."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from store.models import CompactionEvent
from tests.cli.helpers import api, chatledger, invoke, ok

WINDOW = "sliding-window:keep_last_turns=1"


def _foreign(tmp_path: Path) -> Path:
    """Another application's SQLite file."""
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as connection:
        connection.execute("create table orders (id integer)")
    return path


def _chats(tmp_path: Path) -> Path:
    source = tmp_path / "chats.jsonl"
    source.write_text(json.dumps({"id": "c1", "messages": [{"role": "user", "content": "hi"}]}))
    return source


def test_the_upgrade_hint_carries_the_url_it_was_given(tmp_path: Path) -> None:
    path = _foreign(tmp_path)
    done = invoke("sessions", "--url", str(path))
    assert done.returncode == 1
    assert f"`chatledger db upgrade --url {path}`" in done.stderr
    without = invoke("sessions", env={"CHATLEDGER_URL": str(path)})
    assert "`chatledger db upgrade`" in without.stderr  # the variable reaches it as well


def test_the_hint_hides_a_password() -> None:
    from store.cli import _with_url

    said = _with_url(
        "no chatledger schema in X: run `chatledger db upgrade` to create it",
        ["sessions", "--url", "postgresql://app:s3cret@db/chat"],
    )
    assert "s3cret" not in said
    assert "`chatledger db upgrade --url 'postgresql://app:***@db/chat'`" in said


def test_import_into_a_database_without_the_schema_needs_create(tmp_path: Path) -> None:
    path = _foreign(tmp_path)
    source = _chats(tmp_path)
    refused = invoke("import", str(source), "--format", "openai-chat", "--url", str(path))
    assert refused.returncode == 1
    assert "no chatledger schema" in refused.stderr and "--create" in refused.stderr
    with sqlite3.connect(path) as connection:
        tables = {r[0] for r in connection.execute("select name from sqlite_master")}
    assert tables == {"orders"}  # nothing was written
    created = ok("import", str(source), "--format", "openai-chat", "--create", "--url", str(path))
    assert "1 stored, 0 already stored" in created.stdout
    again = ok("import", str(source), "--format", "openai-chat", "--url", str(path))
    assert "0 stored, 1 already stored" in again.stdout


def test_import_at_the_default_file_creates_it(tmp_path: Path) -> None:
    source = _chats(tmp_path)
    done = chatledger("import", str(source), "--format", "openai-chat", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "chatledger.db").exists()


def _compacted(url: str) -> CompactionEvent:
    done = ok("compact", "alpha", "--strategy", WINDOW, "--url", url, "--json")
    return CompactionEvent.model_validate(done.json())


def _pinned(url: str) -> set[str]:
    return {g.group_id for g in api(url, "view", "alpha").groups if g.pinned}


def test_restore_event_says_how_many_groups_it_pinned(seeded: str) -> None:
    event = _compacted(seeded)
    done = ok("restore", "alpha", "--event", event.id[:10], "--url", seeded)
    count = len(event.excluded)
    assert f"{count} groups pinned" in done.stdout
    assert _pinned(seeded) == set(event.excluded)


def test_restore_no_pin_leaves_the_groups_unpinned(seeded: str) -> None:
    event = _compacted(seeded)
    done = ok("restore", "alpha", "--event", event.id, "--no-pin", "--url", seeded)
    assert "left unpinned" in done.stdout
    assert _pinned(seeded) == set()
