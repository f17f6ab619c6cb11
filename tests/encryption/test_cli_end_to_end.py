"""The command line on a real database, SQLite and PostgreSQL, no fakes: a key file made
with ``keys new``, a tenant in clear encrypted with ``encrypt``, read with ``show``
(refused in one line without ``--key-file``), its data key rotated, the key file's key
rotated, and every job listed by ``keys events --json``."""

from __future__ import annotations

import asyncio
from pathlib import Path

from store import HistoryStore
from store.encryption.local import LocalKeyProvider
from strategies.messages import Message, TextContent
from tests.cli.helpers import Result, assert_one_line_error, invoke

TENANT = "acme"
WORDS = "qzvclimark"


async def _seed(url: str) -> None:
    async with HistoryStore.open(url, tenant=TENANT) as store:
        await store.append(
            "chat",
            [
                Message(role="user", message_id="u1", contents=[TextContent(text=f"{WORDS} hi")]),
                Message(role="assistant", message_id="a1", contents=[TextContent(text="hello")]),
            ],
        )
        await store.set_title("chat", "a sealed title")


def _ok(done: Result) -> Result:
    assert done.returncode == 0, done.stderr
    return done


def test_keys_new_encrypt_show_rotate_and_events(db_url: str, tmp_path: Path) -> None:
    asyncio.run(_seed(db_url))
    key_file = str(tmp_path / "chatledger.key")
    at = ("--url", db_url)
    kek = _ok(invoke("keys", "new", key_file)).stdout.strip()
    assert kek == LocalKeyProvider.from_file(key_file).key_id

    encrypted = _ok(invoke("encrypt", "--tenant", TENANT, *at, "--key-file", key_file))
    line = encrypted.stdout.strip()
    assert line.startswith(f"tenant {TENANT}: encrypted ") and f"(wrapped under key {kek})" in line

    refused = invoke("show", "chat", "--tenant", TENANT, *at)
    assert_one_line_error(refused, contains=f"tenant '{TENANT}' is encrypted")
    shown = _ok(invoke("show", "chat", "--tenant", TENANT, *at, "--key-file", key_file))
    assert WORDS in shown.stdout and "hello" in shown.stdout

    searched = invoke("search", WORDS, "--tenant", TENANT, *at, "--key-file", key_file)
    assert_one_line_error(searched, contains="encrypt")

    rotated = _ok(invoke("keys", "rotate", "--tenant", TENANT, *at, "--key-file", key_file))
    assert rotated.stdout.startswith(f"tenant {TENANT}: rewrote ")

    new_kek = _ok(invoke("keys", "new", key_file, "--add")).stdout.strip()
    rewrapped = _ok(invoke("keys", "rotate", "--kek", *at, "--key-file", key_file))
    # the old data key, the new one and the hash key
    assert rewrapped.stdout.strip() == f"rewrapped 3 keys under key {new_kek}"

    events = _ok(invoke("keys", "events", "--tenant", TENANT, *at, "--json")).json()
    assert [(e["kind"], e["state"]) for e in events] == [
        ("encrypt", "done"),
        ("rotate_data_key", "done"),
        ("rotate_kek", "done"),
    ]
    assert events[0]["tenant"] == TENANT and events[0]["key_id"] == kek
    assert events[1]["data_key_id"] != events[0]["data_key_id"]
    assert events[1]["rows"] == events[1]["total"] > 0
    assert events[2]["tenant"] is None and events[2]["key_id"] == new_kek

    again = _ok(invoke("show", "chat", "--tenant", TENANT, *at, "--key-file", key_file))
    assert again.stdout == shown.stdout
