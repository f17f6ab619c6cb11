"""``chatledger keys`` and ``chatledger encrypt``, and ``--key-file`` on every command
that opens a database.

The sealing core's functions (``store.encryption.encrypt_tenant`` and the others) and
its ``KeyRing`` are replaced by recording fakes here: these tests pin what the command
line passes them and prints, not what they do to rows (their own tests say that).
"""

from __future__ import annotations

import importlib
import io
import json
import os
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import click
import pytest
from pydantic import BaseModel

from store.cli import cli
from store.encryption.local import LocalKeyProvider, new_key_file
from tests.cli.helpers import assert_one_line_error, invoke

POSIX = pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")


class FakeKeyEvent(BaseModel):
    """The fields of the sealing core's ``KeyEvent``."""

    event_id: str
    tenant: str | None
    kind: Literal["encrypt", "rotate_kek", "rotate_data_key"]
    state: Literal["running", "done"]
    started_at: datetime
    finished_at: datetime | None
    rows: int
    total: int | None
    key_id: str | None
    data_key_id: str | None


class FakeKeyRing:
    """Stands for ``KeyRing(provider)``: keeps the provider the command read."""

    def __init__(self, provider: LocalKeyProvider) -> None:
        self.provider = provider


def _event(
    kind: Literal["encrypt", "rotate_kek", "rotate_data_key"], **fields: Any
) -> FakeKeyEvent:
    started = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)
    values: dict[str, Any] = {
        "event_id": "ke-1",
        "tenant": "acme",
        "kind": kind,
        "state": "done",
        "started_at": started,
        "finished_at": started,
        "rows": 1200,
        "total": 1200,
        "key_id": "lk-1",
        "data_key_id": "dk-1",
    }
    return FakeKeyEvent(**{**values, **fields})


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, dict[str, Any]]]]:
    """The sealing core replaced by fakes that record each call (name, keywords with
    the url) and report progress twice, as a rewrite of two batches would."""
    module = importlib.import_module("store.encryption")
    recorded: list[tuple[str, dict[str, Any]]] = []

    def fake(name: str, kind: Literal["encrypt", "rotate_kek", "rotate_data_key"]) -> Any:
        async def function(url: str | None, **keywords: Any) -> FakeKeyEvent:
            recorded.append((name, {"url": url, **keywords}))
            progress = keywords.get("progress")
            if progress is not None:
                progress(600, 1200)
                progress(1200, 1200)
            return _event(kind, tenant=keywords.get("tenant"))

        return function

    async def key_events(url: str | None, *, tenant: str | None = None) -> list[FakeKeyEvent]:
        recorded.append(("key_events", {"url": url, "tenant": tenant}))
        return [_event("encrypt"), _event("rotate_kek", tenant=None, state="running", rows=3)]

    monkeypatch.setattr(module, "KeyRing", FakeKeyRing, raising=False)
    monkeypatch.setattr(module, "encrypt_tenant", fake("encrypt_tenant", "encrypt"), raising=False)
    monkeypatch.setattr(module, "rotate_kek", fake("rotate_kek", "rotate_kek"), raising=False)
    monkeypatch.setattr(
        module, "rotate_tenant_key", fake("rotate_tenant_key", "rotate_data_key"), raising=False
    )
    monkeypatch.setattr(module, "key_events", key_events, raising=False)
    yield recorded


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "chatledger.key"
    new_key_file(path)
    return path


# keys new


def test_keys_new_writes_a_private_key_file_and_prints_its_id(tmp_path: Path) -> None:
    path = tmp_path / "k.json"
    done = invoke("keys", "new", str(path))
    assert done.returncode == 0, done.stderr
    key_id = done.stdout.strip()
    assert key_id.startswith("lk-")
    assert LocalKeyProvider.from_file(path).key_id == key_id
    if os.name == "posix":
        assert path.stat().st_mode & 0o777 == 0o600


def test_keys_new_json_is_an_object(tmp_path: Path) -> None:
    path = tmp_path / "k.json"
    done = invoke("keys", "new", str(path), "--json")
    assert done.returncode == 0, done.stderr
    shown = done.json()
    assert shown == {"key_id": shown["key_id"], "path": str(path), "added": False}
    assert LocalKeyProvider.from_file(path).key_id == shown["key_id"]


def test_keys_new_twice_refuses_and_keeps_the_first_file(key_file: Path) -> None:
    before = key_file.read_bytes()
    done = invoke("keys", "new", str(key_file))
    assert_one_line_error(done, contains="exists already")
    assert done.returncode == 1
    assert key_file.read_bytes() == before


def test_keys_new_add_keeps_the_old_keys_and_makes_the_new_one_current(key_file: Path) -> None:
    old = LocalKeyProvider.from_file(key_file).key_id
    done = invoke("keys", "new", str(key_file), "--add", "--json")
    assert done.returncode == 0, done.stderr
    new = done.json()["key_id"]
    assert done.json()["added"] is True and new != old
    provider = LocalKeyProvider.from_file(key_file)
    assert provider.key_id == new and set(provider.key_ids) == {old, new}


def test_keys_new_add_refuses_a_missing_file(tmp_path: Path) -> None:
    assert_one_line_error(
        invoke("keys", "new", str(tmp_path / "missing"), "--add"), contains="no key file"
    )
    assert not (tmp_path / "missing").exists()


# --key-file on every command


def _commands(group: click.Group = cli, prefix: str = "") -> Iterator[tuple[str, click.Command]]:
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        if isinstance(command, click.Group):
            yield from _commands(command, f"{prefix}{name} ")
        else:
            yield f"{prefix}{name}", command


def _help(path: str) -> str:
    done = invoke(*path.split(), "--help", env={"COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_every_command_that_takes_url_takes_key_file() -> None:
    with_url = [path for path, _ in _commands() if "--url URL" in _help(path)]
    assert len(with_url) >= 30 and "sessions" in with_url and "db upgrade" in with_url
    for path in with_url:
        shown = _help(path)
        assert "--key-file PATH" in shown and "$CHATLEDGER_KEY_FILE" in shown, path


def test_no_help_metavar_is_text() -> None:
    for path, _ in _commands():
        if path.startswith(("keys", "encrypt")):
            assert " TEXT" not in _help(path), path


OPENED: dict[str, Callable[[str, Path], list[str]]] = {
    "sessions": lambda url, _: ["sessions", "--url", url],
    "show": lambda url, _: ["show", "alpha", "--url", url],
    "export": lambda url, tmp: [
        "export",
        "alpha",
        "--format",
        "jsonl",
        "-o",
        str(tmp / "e.jsonl"),
        "--url",
        url,
    ],
    "purge": lambda url, _: ["purge", "--older-than", "1d", "--dry-run", "--url", url],
    "doctor": lambda url, _: ["doctor", "--url", url],
}


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Each ``HistoryStore.open`` call's keywords; ``encryption`` is taken out before the
    real open, so that the plumbing is tested whatever the store does with it."""
    from store.sql.store import HistoryStore

    seen: list[dict[str, Any]] = []
    real = HistoryStore.open

    def recording(url: Any = None, **keywords: Any) -> Any:
        seen.append(dict(keywords))
        keywords.pop("encryption", None)
        return real(url, **keywords)

    monkeypatch.setattr(HistoryStore, "open", recording)
    return seen


@pytest.mark.parametrize("command", sorted(OPENED))
def test_key_file_reaches_every_store_a_command_opens(
    command: str,
    seeded: str,
    key_file: Path,
    tmp_path: Path,
    calls: list[Any],
    opened: list[dict[str, Any]],
) -> None:
    done = invoke(*OPENED[command](seeded, tmp_path), "--key-file", str(key_file))
    assert done.returncode == 0, done.stderr
    assert opened, command
    for keywords in opened:
        ring = keywords["encryption"]
        assert isinstance(ring, FakeKeyRing)
        assert ring.provider.key_id == LocalKeyProvider.from_file(key_file).key_id


@pytest.mark.parametrize("command", sorted(OPENED))
def test_without_a_key_file_stores_open_as_before(
    command: str, seeded: str, tmp_path: Path, opened: list[dict[str, Any]]
) -> None:
    done = invoke(*OPENED[command](seeded, tmp_path))
    assert done.returncode == 0, done.stderr
    assert opened and all("encryption" not in keywords for keywords in opened)


def test_the_environment_gives_the_key_file(
    seeded: str, key_file: Path, calls: list[Any], opened: list[dict[str, Any]]
) -> None:
    done = invoke("sessions", "--url", seeded, env={"CHATLEDGER_KEY_FILE": str(key_file)})
    assert done.returncode == 0, done.stderr
    assert opened and all(isinstance(k["encryption"], FakeKeyRing) for k in opened)


def test_an_empty_key_file_variable_is_no_key_file(
    seeded: str, opened: list[dict[str, Any]]
) -> None:
    done = invoke("sessions", "--url", seeded, env={"CHATLEDGER_KEY_FILE": ""})
    assert done.returncode == 0, done.stderr
    assert opened and all("encryption" not in keywords for keywords in opened)


@POSIX
def test_a_group_readable_key_file_is_refused_before_the_database(
    key_file: Path, tmp_path: Path, calls: list[Any]
) -> None:
    key_file.chmod(0o640)
    done = invoke("sessions", "--url", str(tmp_path / "missing.db"), "--key-file", str(key_file))
    assert_one_line_error(done, contains="invalid --key-file")
    assert done.returncode == 2
    assert "ssh" in done.stderr and "chmod 600" in done.stderr
    assert not (tmp_path / "missing.db").exists()


def test_a_missing_key_file_is_a_usage_error(tmp_path: Path, seeded: str) -> None:
    done = invoke("sessions", "--url", seeded, "--key-file", str(tmp_path / "nope"))
    assert_one_line_error(done, contains="cannot read key file")
    assert done.returncode == 2


def test_a_malformed_key_file_is_a_usage_error(tmp_path: Path, seeded: str) -> None:
    path = tmp_path / "k"
    path.write_text('{"format": "chatledger-key-file", "version": 1}')
    path.chmod(0o600)
    done = invoke("stats", "--url", seeded, "--key-file", str(path))
    assert_one_line_error(done, contains='"keys"')
    assert done.returncode == 2


# encrypt


def test_encrypt_needs_a_key_file(seeded: str, calls: list[Any]) -> None:
    done = invoke("encrypt", "--tenant", "acme", "--url", seeded)
    assert_one_line_error(done, contains="--key-file PATH")
    assert done.returncode == 2 and calls == []


def test_encrypt_calls_encrypt_tenant_and_prints_what_it_did(
    seeded: str, key_file: Path, calls: list[tuple[str, dict[str, Any]]]
) -> None:
    done = invoke(
        "encrypt",
        "--tenant",
        "acme",
        "--batch",
        "200",
        "--url",
        seeded,
        "--key-file",
        str(key_file),
    )
    assert done.returncode == 0, done.stderr
    [(name, keywords)] = calls
    assert name == "encrypt_tenant"
    assert keywords["url"] == seeded and keywords["tenant"] == "acme"
    assert keywords["batch_size"] == 200 and callable(keywords["progress"])
    assert isinstance(keywords["encryption"], FakeKeyRing)
    assert done.stdout.strip() == (
        "tenant acme: encrypted 1,200 rows under data key dk-1 (wrapped under key lk-1); event ke-1"
    )
    assert done.stderr == ""  # no progress drawn off a terminal


def test_encrypt_json_is_the_key_event(seeded: str, key_file: Path, calls: list[Any]) -> None:
    done = invoke("encrypt", "--url", seeded, "--key-file", str(key_file), "--json")
    assert done.returncode == 0, done.stderr
    shown = done.json()
    assert shown == json.loads(_event("encrypt", tenant="default").model_dump_json())
    assert calls[0][1]["batch_size"] == 500  # the default batch


def test_an_interrupted_encrypt_says_how_to_continue(
    seeded: str, key_file: Path, monkeypatch: pytest.MonkeyPatch, calls: list[Any]
) -> None:
    async def interrupted(url: str | None, **keywords: Any) -> None:
        keywords["progress"](500, 1200)
        raise KeyboardInterrupt

    monkeypatch.setattr(importlib.import_module("store.encryption"), "encrypt_tenant", interrupted)
    done = invoke("encrypt", "--url", seeded, "--key-file", str(key_file))
    assert_one_line_error(done, contains="interrupted after 500 rows: run the same command again")
    assert done.returncode == 130


# keys rotate


@pytest.mark.parametrize("args", [(), ("--kek", "--tenant", "acme")])
def test_keys_rotate_takes_exactly_one_of_kek_and_tenant(
    args: tuple[str, ...], seeded: str, key_file: Path, calls: list[Any]
) -> None:
    done = invoke("keys", "rotate", *args, "--url", seeded, "--key-file", str(key_file))
    assert_one_line_error(done, contains="exactly one of --kek and --tenant")
    assert done.returncode == 2 and calls == []


def test_keys_rotate_needs_a_key_file(seeded: str, calls: list[Any]) -> None:
    done = invoke("keys", "rotate", "--kek", "--url", seeded)
    assert_one_line_error(done, contains="$CHATLEDGER_KEY_FILE")
    assert done.returncode == 2 and calls == []


def test_keys_rotate_kek_calls_rotate_kek(
    seeded: str, key_file: Path, calls: list[tuple[str, dict[str, Any]]]
) -> None:
    done = invoke("keys", "rotate", "--kek", "--url", seeded, "--key-file", str(key_file))
    assert done.returncode == 0, done.stderr
    [(name, keywords)] = calls
    assert name == "rotate_kek" and keywords["url"] == seeded
    assert isinstance(keywords["encryption"], FakeKeyRing) and "tenant" not in keywords
    assert done.stdout.strip() == "rewrapped 1,200 keys under key lk-1"


def test_keys_rotate_tenant_calls_rotate_tenant_key(
    seeded: str, key_file: Path, calls: list[tuple[str, dict[str, Any]]]
) -> None:
    done = invoke(
        "keys",
        "rotate",
        "--tenant",
        "acme",
        "--batch",
        "50",
        "--url",
        seeded,
        "--key-file",
        str(key_file),
        "--json",
    )
    assert done.returncode == 0, done.stderr
    [(name, keywords)] = calls
    assert name == "rotate_tenant_key"
    assert keywords["tenant"] == "acme" and keywords["batch_size"] == 50
    assert done.json()["kind"] == "rotate_data_key" and done.json()["tenant"] == "acme"


# keys events


def test_keys_events_lists_them_without_a_key(
    seeded: str, calls: list[tuple[str, dict[str, Any]]]
) -> None:
    done = invoke("keys", "events", "--url", seeded, env={"COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    assert calls == [("key_events", {"url": seeded, "tenant": None})]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("Key events")
    assert any("encrypt" in line and "1,200/1,200" in line and "dk-1" in line for line in lines)
    assert any("rotate_kek" in line and "running" in line and "3/1,200" in line for line in lines)


def test_keys_events_json_and_tenant(seeded: str, calls: list[tuple[str, dict[str, Any]]]) -> None:
    done = invoke("keys", "events", "--tenant", "acme", "--url", seeded, "--json")
    assert done.returncode == 0, done.stderr
    assert calls == [("key_events", {"url": seeded, "tenant": "acme"})]
    assert [event["kind"] for event in done.json()] == ["encrypt", "rotate_kek"]
    assert done.json()[1]["tenant"] is None


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_drawn_on_a_terminal_and_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    from store.cli._encryption import _progress

    screen = _Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    with _progress("encrypting acme") as progress:
        progress(600, 1200)
        progress(1200, 1200)
    assert progress.done == 1200
    assert "encrypting acme" in screen.getvalue()


def test_progress_off_a_terminal_draws_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    from store.cli._encryption import _progress

    screen = io.StringIO()
    monkeypatch.setattr(sys, "stderr", screen)
    with _progress("encrypting acme") as progress:
        progress(600, 1200)
    assert progress.done == 600 and screen.getvalue() == ""
