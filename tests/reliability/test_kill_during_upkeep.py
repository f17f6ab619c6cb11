"""SIGKILL in the middle of ``import``, ``purge``, ``redact``, ``doctor --fix``,
``recount`` and ``db upgrade`` with data, on SQLite and PostgreSQL.

Each command runs in a child process that kills itself (:mod:`tests.reliability.killing`)
once it has sent its last write (its audit event, say) and before the commit reaches the
database, so that a command writing in several transactions would leave the first ones
behind; or (``recount``) in the middle of its writes: a machine that loses power, an OOM kill.
Afterwards the database opens, what the command changed is there whole or not at all
(an import stored in parts is marked, and ``doctor`` names it), and the same command
run again finishes the work.
"""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from store import HistoryStore, MigrationRequired
from store.contract import PAGE_SIZE
from store.importing import write
from store.models import DoctorReport, StoredMessage
from store.sql.migrations import current_revisions, downgrade
from store.sql.migrations.revisions import head_revisions, shipped_revisions
from strategies.tokenizers import CharacterEstimatorTokenizer
from tests.cli.helpers import Result, invoke
from tests.groups.conversations import assistant, call, result, tool, user
from tests.importing.sources import weather_chat, write_chat_jsonl
from tests.reliability.killing import run_killed, run_killed_at_each_commit

IMPORT_BATCH = 12
"""Messages a write of an import: the source below takes several."""

TOKENIZER = CharacterEstimatorTokenizer()


def _secret(prefix: str) -> str:
    return f"card 4929-{prefix}-2222-3333"


def _api(url: str, action: Any, **options: Any) -> Any:
    async def main() -> Any:
        async with HistoryStore.open(url, tokenizer=TOKENIZER, **options) as store:
            return await action(store)

    return asyncio.run(main())


def _ok(*args: str) -> Result:
    """Run the command again, to its end (in this process: it was killed in another)."""
    done = invoke(*args)
    assert done.returncode == 0, done.stderr
    return done


def _chat(prefix: str) -> list[Any]:
    return [
        user(f"{prefix}u1", f"please keep my {_secret(prefix)}"),
        assistant(f"{prefix}a1", call(f"{prefix}c1", "store_card")),
        tool(f"{prefix}t1", result(f"{prefix}c1", f"stored {_secret(prefix)}")),
        assistant(f"{prefix}a2", "Done."),
        user(f"{prefix}u2", "thanks"),
    ]


async def _seed(store: HistoryStore) -> None:
    for session in ("s", "t", "v"):
        await store.append(session, _chat(session))


async def _everything(store: HistoryStore) -> dict[str, list[StoredMessage]]:
    return {
        s.session_id: await store.history(s.session_id, include_excluded=True)
        for s in await store.sessions()
    }


async def _doctor(store: HistoryStore) -> DoctorReport:
    return await store.doctor()


def _sqlite_files_holding(url: str, needle: str) -> list[str]:
    path = Path(url.removeprefix("sqlite:///"))
    return sorted(
        p.name for p in path.parent.glob(f"{path.name}*") if needle.encode() in p.read_bytes()
    )


def test_a_killed_redaction_is_undone_and_finished_by_running_it_again(db_url: str) -> None:
    _api(db_url, _seed)
    before = _api(db_url, _everything)
    command = ("redact", "s", "su1", "st1", "--reason", "card number", "--yes", "--url", db_url)

    sqlite = db_url.startswith("sqlite")

    def undone_or_pending(commit: int) -> None:
        if commit == 1:  # nothing of it is stored
            assert _api(db_url, _everything) == before
            assert _api(db_url, lambda s: s.audit("s")) == []
            assert _api(db_url, _doctor).healthy
            return
        # SQLite's second commit records that the write-ahead log was truncated: killed
        # there, the redaction is stored and visibly incomplete (doctor says so)
        assert sqlite and commit == 2
        (event,) = _api(db_url, lambda s: s.audit("s"))
        assert event.params["file_erased"] is False
        checks = {f.check for f in _api(db_url, _doctor).findings}
        assert checks == {"erasure_pending"}

    assert run_killed_at_each_commit(*command, check=undone_or_pending) == (2 if sqlite else 1)
    texts = [m.message.model_dump_json() for m in _api(db_url, lambda s: s.history("s"))]
    assert texts and not any(_secret("s") in t for t in texts)
    assert [e.strategy for e in _api(db_url, lambda s: s.audit("s"))] == ["redact"]
    assert _api(db_url, _doctor).healthy
    others = _api(db_url, _everything)
    assert (others["t"], others["v"]) == (before["t"], before["v"])
    if sqlite:  # nor in the file or its write-ahead log
        assert _sqlite_files_holding(db_url, _secret("s")) == []
        assert _sqlite_files_holding(db_url, _secret("t")) != []  # the search is right


def test_a_killed_purge_removes_nothing_and_finishes_when_run_again(db_url: str) -> None:
    _api(db_url, _seed)
    before = _api(db_url, _everything)
    later = (datetime.now(UTC) + timedelta(minutes=5)).isoformat()
    command = ("purge", "--older-than", later, "--yes", "--url", db_url)

    def undone(_commit: int) -> None:
        assert _api(db_url, _everything) == before
        assert _api(db_url, _doctor).healthy

    assert run_killed_at_each_commit(*command, check=undone) == 1
    assert _api(db_url, _everything) == {}


async def _break_totals(store: HistoryStore) -> None:
    async with store.engine.begin() as conn:
        await conn.execute(
            text(
                "UPDATE chatledger_sessions SET stored_tokens = stored_tokens + 7 "
                "WHERE session_id = 's'"
            )
        )


def _findings(report: DoctorReport) -> list[tuple[str | None, str, bool]]:
    return sorted((f.session_id, f.check, f.fixed) for f in report.findings)


def test_a_killed_doctor_fix_repairs_nothing_and_finishes_when_run_again(db_url: str) -> None:
    _api(db_url, _seed)
    _api(db_url, _break_totals)
    found = _api(db_url, _doctor)
    assert _findings(found) == [("s", "totals_mismatch", False)]
    command = ("doctor", "--fix", "--url", db_url)

    def undone(_commit: int) -> None:
        assert _findings(_api(db_url, _doctor)) == _findings(found)  # still broken
        assert _api(db_url, lambda s: s.audit("s")) == []  # and no repair recorded

    assert run_killed_at_each_commit(*command, check=undone) == 1
    assert _api(db_url, _doctor).healthy
    assert [e.strategy for e in _api(db_url, lambda s: s.audit("s"))] == ["doctor"]


def _counts(url: str, tokenizer: Any) -> tuple[str, int, list[int]]:
    async def read(store: HistoryStore) -> tuple[str, int, list[int]]:
        info = await store.session("s")
        counts = [m.token_count for m in await store.history("s", include_excluded=True)]
        return info.tokenizer, info.stored_tokens, counts

    return _api(url, read) if tokenizer is TOKENIZER else _api_with(url, read, tokenizer)


def _api_with(url: str, action: Any, tokenizer: str) -> Any:
    async def main() -> Any:
        async with HistoryStore.open(url, tokenizer=tokenizer) as store:  # type: ignore[arg-type]
            return await action(store)

    return asyncio.run(main())


async def _seed_long(store: HistoryStore) -> None:
    """Session ``s`` longer than a page of the recount's walk (``PAGE_SIZE``)."""
    await _seed(store)
    filler = [user(f"f{n}", f"filler message {n}") for n in range(PAGE_SIZE)]
    await store.append("s", filler)


def test_a_killed_recount_keeps_the_old_counts_and_finishes_when_run_again(db_url: str) -> None:
    _api(db_url, _seed_long)
    old = _counts(db_url, TOKENIZER)
    assert old[0] == TOKENIZER.name and old[1] == sum(old[2]) and len(old[2]) > PAGE_SIZE
    command = ("recount", "s", "--tokenizer", "o200k_base", "--url", db_url)
    # killed as it writes the second page: the first page's new counts are sent
    run_killed(r"^UPDATE chatledger_messages", 2, "statement", *command)
    assert _counts(db_url, TOKENIZER) == old
    assert _api(db_url, _doctor).healthy
    _ok(*command)
    new = _counts(db_url, "o200k_base")
    assert new[0] == "o200k_base" and new[1] == sum(new[2]) and new[2] != old[2]


def test_a_killed_import_leaves_whole_or_marked_sessions_and_finishes(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(write, "BATCH", IMPORT_BATCH)
    conversations: dict[str | None, list[dict[str, Any]]] = {
        f"early-{n}": weather_chat(2) for n in range(4)
    }
    conversations["huge"] = weather_chat(10)  # more than one write of the import
    conversations.update({f"late-{n}": weather_chat(2) for n in range(4)})
    sizes = {str(k): len(v) for k, v in conversations.items()}
    source = tmp_path / "chats.jsonl"
    write_chat_jsonl(source, conversations)
    command = ("import", "--create", str(source), "--url", db_url)
    # armed by the mark put on "huge" before its first part; killed as its second commits
    mark = r"^UPDATE chatledger_sessions SET .*metadata"
    run_killed(mark, 1, "commit:3", *command, batch=IMPORT_BATCH)
    stored = {k: len(v) for k, v in _api(db_url, _everything).items()}
    assert stored, "the first write of the import was committed before the kill"
    partial = {s for s, n in stored.items() if n != sizes[s]}
    assert partial == {"huge"} and 0 < stored["huge"] < sizes["huge"]
    doctor = _api(db_url, _doctor)
    assert sorted(f.session_id for f in doctor.findings if f.check == "half_imported") == sorted(
        partial
    )
    assert {f.check for f in doctor.findings} <= {"half_imported"}
    again = _ok(*command, "--json").json()
    assert again["new"] == sum(sizes.values()) - sum(stored.values())
    assert {k: len(v) for k, v in _api(db_url, _everything).items()} == sizes
    assert _api(db_url, _doctor).healthy


def _oldest_revision() -> str:
    return shipped_revisions()[0].revision


def test_a_killed_upgrade_with_data_keeps_the_old_schema_and_finishes(db_url: str) -> None:
    _api(db_url, _seed)
    before = {
        sid: [(m.message_id, m.message.text) for m in messages]
        for sid, messages in _api(db_url, _everything).items()
    }
    asyncio.run(downgrade(db_url, revision=_oldest_revision()))
    command = ("db", "upgrade", "--url", db_url)

    async def revisions() -> tuple[str, ...]:
        from store.sql.drivers.engine import create_engine

        engine = create_engine(db_url)
        try:
            return await current_revisions(engine)
        finally:
            await engine.dispose()

    def undone(_commit: int) -> None:  # no revision of the upgrade is applied
        assert asyncio.run(revisions()) == (_oldest_revision(),)
        with pytest.raises(MigrationRequired):
            _api(db_url, _everything, create=False)

    assert run_killed_at_each_commit(*command, check=undone) == 1
    assert asyncio.run(revisions()) == head_revisions()
    after = {
        sid: [(m.message_id, m.message.text) for m in messages]
        for sid, messages in _api(db_url, _everything).items()
    }
    assert after == before
    assert _api(db_url, _doctor).healthy


def test_the_kill_point_is_reached_or_the_test_fails(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/k.db"
    _api(url, _seed)
    with pytest.raises(AssertionError, match=re.escape("was not killed")):
        run_killed(r"^NO SUCH STATEMENT", 1, "commit", "sessions", "--url", url)
    with pytest.raises(AssertionError, match=re.escape("failed after 0 kills")):
        run_killed_at_each_commit("show", "nope", "--url", url, check=lambda _: None)
