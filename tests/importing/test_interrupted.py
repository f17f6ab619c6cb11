"""An import interrupted while it writes a session in parts: ``doctor`` finds the mark
it left, ``--fix`` removes what it stored when it created the session, and the same
import run again completes it (the real Ctrl-C is ``test_interrupt_signal.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from store import HistoryStore
from store.importing import import_sources, write
from store.importing.stored import append_sessions
from store.rules.import_mark import IMPORT_MARK_KEY
from tests.importing.sources import weather_chat, write_chat_jsonl


class _Stop(Exception):
    """The process stopping in the middle of the write pass."""


async def _interrupted_import(
    store: HistoryStore, path: Path, monkeypatch: pytest.MonkeyPatch, *, writes: int
) -> None:
    """Import ``path`` with writes of 7 messages, stopped before write ``writes + 1``."""
    monkeypatch.setattr(write, "BATCH", 7)
    done = [0]

    async def stopping(target: Any, batches: Any) -> None:
        if done[0] == writes:
            raise _Stop
        done[0] += 1
        await append_sessions(target, batches)

    monkeypatch.setattr(write, "append_sessions", stopping)
    with pytest.raises(_Stop):
        await import_sources(store, [path])
    monkeypatch.setattr(write, "append_sessions", append_sessions)


async def test_doctor_fix_removes_what_an_interrupted_import_stored(
    store: HistoryStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "chats.jsonl"
    write_chat_jsonl(path, {"long": weather_chat(5), "short": weather_chat(1)})
    await _interrupted_import(store, path, monkeypatch, writes=1)
    assert (await store.session("long")).stored_messages == 7
    mark = (await store.get_metadata("long"))[IMPORT_MARK_KEY]
    assert mark == {"system": "openai-chat", "sources": [str(path)], "expected": 21, "held": 0}
    (finding,) = (await store.doctor()).findings
    assert (finding.session_id, finding.check, finding.fixable) == ("long", "half_imported", True)
    assert "7 of its 21 messages are stored" in finding.detail
    fixed = await store.doctor(fix=True)
    assert fixed.healthy and fixed.findings[0].fixed
    info = await store.session("long")
    assert (info.stored_messages, info.stored_groups, info.metadata) == (0, 0, {})
    (event,) = await store.audit("long")
    assert (event.strategy, event.params["check"], event.params["removed_messages"]) == (
        "doctor",
        "half_imported",
        7,
    )
    assert (event.messages_before, event.messages_after) == (7, 0)
    report = await import_sources(store, [path])
    assert (report.new, report.already_stored) == (21 + 5, 0)
    assert [len(await store.history(s)) for s in ("long", "short")] == [21, 5]
    assert (await store.doctor()).healthy


async def test_an_import_into_a_held_session_is_completed_by_running_it_again(
    store: HistoryStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "chats.jsonl"
    write_chat_jsonl(path, {"grows": weather_chat(1)})
    await import_sources(store, [path])
    write_chat_jsonl(path, {"grows": weather_chat(5)})  # the log grew
    await _interrupted_import(store, path, monkeypatch, writes=1)
    (finding,) = (await store.doctor(fix=True)).findings
    assert (finding.check, finding.fixable, finding.fixed) == ("half_imported", False, False)
    assert "the session held 5 messages before" in finding.detail
    report = await import_sources(store, [path])
    assert (report.new, report.already_stored) == (14, 7)
    assert [m.message.text for m in await store.history("grows")][-1] == "It is sunny (4)."
    assert IMPORT_MARK_KEY not in await store.get_metadata("grows")
    assert (await store.doctor()).healthy


async def test_a_mark_left_after_the_last_write_is_taken_off(
    store: HistoryStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "chats.jsonl"
    write_chat_jsonl(path, {"long": weather_chat(5)})
    monkeypatch.setattr(write, "BATCH", 7)

    async def stop_before_unmarking(*args: Any, **kwargs: Any) -> None:
        raise _Stop

    unmark = write.Writing._unmark
    monkeypatch.setattr(write.Writing, "_unmark", stop_before_unmarking)
    with pytest.raises(_Stop):
        await import_sources(store, [path])
    monkeypatch.setattr(write.Writing, "_unmark", unmark)
    (finding,) = (await store.doctor()).findings
    assert (finding.check, finding.fixable) == ("half_imported", True)
    assert "stored every message" in finding.detail
    again = await import_sources(store, [path])  # nothing left to write; the mark goes
    assert (again.new, again.already_stored) == (0, 21)
    assert IMPORT_MARK_KEY not in await store.get_metadata("long")
    assert (await store.doctor()).healthy
