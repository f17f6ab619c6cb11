"""``chatledger purge``, ``redact`` and ``doctor``: dry runs, confirmation, JSON, exit
codes (2 for usage, 1 for failures), through the real entry point."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta

from store import HistoryStore
from store.models import StoredMessage
from store.rules.erasure import REDACTED_TEXT
from tests.cli.helpers import assert_one_line_error, chatledger, run_api


def _history(url: str, session: str) -> list[StoredMessage]:
    async def read(store: HistoryStore) -> list[StoredMessage]:
        return await store.history(session, include_excluded=True)

    return run_api(url, read)


def _sessions(url: str) -> list[str]:
    async def read(store: HistoryStore) -> list[str]:
        return [s.session_id for s in await store.sessions()]

    return run_api(url, read)


def test_purge_dry_run_confirm_and_json(seeded: str) -> None:
    later = (datetime.now(UTC) + timedelta(minutes=1)).isoformat()
    preview = chatledger("purge", "--older-than", later, "--dry-run", "--json", "--url", seeded)
    assert preview.returncode == 0, preview.stderr
    assert preview.json()["sessions"] == ["alpha", "beta"] and preview.json()["dry_run"]
    assert _sessions(seeded) == ["alpha", "beta"]
    refused = chatledger("purge", "--older-than", later, "--url", seeded)
    assert refused.returncode == 2 and "--yes" in refused.stderr
    assert _sessions(seeded) == ["alpha", "beta"]
    nothing = chatledger("purge", "--older-than", "30d", "--url", seeded)
    assert nothing.returncode == 0 and "removed 0 sessions" in nothing.stdout
    done = chatledger("purge", "--older-than", later, "--yes", "--vacuum", "--url", seeded)
    assert done.returncode == 0, done.stderr
    assert "removed 2 sessions" in done.stdout
    assert _sessions(seeded) == []
    other = chatledger("sessions", "--tenant", "other", "--json", "--url", seeded)
    assert [s["session_id"] for s in other.json()] == ["gamma"]


def test_purge_usage_errors(seeded: str) -> None:
    bad = chatledger("purge", "--older-than", "last tuesday", "--url", seeded)
    assert_one_line_error(bad, contains="--older-than")
    assert bad.returncode == 2
    missing = chatledger("purge", "--url", seeded)
    assert missing.returncode == 2 and "--older-than" in missing.stderr


def test_redact_dry_run_confirm_and_json(seeded: str) -> None:
    first = [m.message_id for m in _history(seeded, "alpha") if m.role == "user"][:1]
    preview = chatledger(
        "redact", "alpha", *first, "--reason", "gdpr", "--dry-run", "--url", seeded
    )
    assert preview.returncode == 0, preview.stderr
    assert first[0] in preview.stdout and "question 1" in preview.stdout
    refused = chatledger("redact", "alpha", *first, "--reason", "gdpr", "--url", seeded)
    assert refused.returncode == 2 and "--yes" in refused.stderr
    done = chatledger(
        "redact", "alpha", *first, "--reason", "gdpr", "--yes", "--json", "--url", seeded
    )
    assert done.returncode == 0, done.stderr
    report = done.json()
    assert report["redacted"] == first and report["reason"] == "gdpr"
    assert report["event"]["strategy"] == "redact"
    stored = {m.message_id: m for m in _history(seeded, "alpha")}
    assert stored[first[0]].message.text == REDACTED_TEXT


def test_redact_errors(seeded: str) -> None:
    unknown = chatledger("redact", "alpha", "nope", "--reason", "x", "--yes", "--url", seeded)
    assert_one_line_error(unknown, contains="nope")
    assert unknown.returncode == 1
    no_reason = chatledger("redact", "alpha", "x", "--url", seeded)
    assert no_reason.returncode == 2 and "--reason" in no_reason.stderr
    blank = chatledger("redact", "alpha", "x", "--reason", " ", "--url", seeded)
    assert_one_line_error(blank, contains="--reason")
    assert blank.returncode == 2
    missing = chatledger("redact", "nope", "x", "--reason", "r", "--yes", "--url", seeded)
    assert_one_line_error(missing, contains="'nope' not found")


def test_doctor_reports_then_fixes(seeded: str) -> None:
    healthy = chatledger("doctor", "--url", seeded)
    assert healthy.returncode == 0, healthy.stderr
    assert "nothing to repair" in healthy.stdout
    path = seeded.removeprefix("sqlite:///")
    with sqlite3.connect(path) as db:
        db.execute(
            "UPDATE chatledger_messages SET metadata = '[1]' WHERE session_id = 'beta' AND seq = 2"
        )
        db.execute("UPDATE chatledger_sessions SET stored_tokens = 3 WHERE session_id = 'alpha'")
    broken = chatledger("doctor", "--json", "--url", seeded)
    assert broken.returncode == 1
    assert "findings left (try --fix)" in broken.stderr
    found = broken.json()
    assert found["healthy"] is False and found["sessions"] == 2
    assert {f["check"] for f in found["findings"]} == {"unparsable_row", "totals_mismatch"}
    one = chatledger("doctor", "beta", "--url", seeded)
    assert one.returncode == 1 and "unparsable_row" in one.stdout and "alpha" not in one.stdout
    fixed = chatledger("doctor", "--fix", "--url", seeded)
    assert fixed.returncode == 0, fixed.stderr
    assert "every finding was repaired" in fixed.stdout
    assert chatledger("doctor", "--url", seeded).returncode == 0
    shown = chatledger("show", "beta", "--all", "--url", seeded)
    assert shown.returncode == 0, shown.stderr


def test_redact_says_when_the_erasure_is_incomplete_and_finishes_it_again(seeded: str) -> None:
    """Another process reading the SQLite file keeps the write-ahead log from being
    truncated: the redaction exits 1 with a warning, doctor reports it, and the same
    redaction run again when nothing reads finishes it."""
    first = [m.message_id for m in _history(seeded, "alpha") if m.role == "user"][:1]
    reader = sqlite3.connect(seeded.removeprefix("sqlite:///"), isolation_level=None)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM chatledger_messages").fetchall()
        args = ("redact", "alpha", *first, "--reason", "gdpr", "--yes", "--url", seeded)
        held = chatledger(*args, "--json")
        reader.execute("COMMIT")
        assert held.returncode == 1, held.stderr
        assert held.json()["complete"] is False and held.json()["redacted"] == first
        assert "write-ahead log" in held.stderr
        pending = chatledger("doctor", "alpha", "--json", "--url", seeded)
        assert [f["check"] for f in pending.json()["findings"]] == ["erasure_pending"]
        again = chatledger(*args)
        assert again.returncode == 0, again.stderr
        assert chatledger("doctor", "alpha", "--url", seeded).returncode == 0
    finally:
        reader.close()
