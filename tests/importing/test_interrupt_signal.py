"""A real Ctrl-C (SIGINT) to ``chatledger import`` in the middle of its write pass: it
says what was stored, every session is whole, absent, or marked (``doctor`` finds the
one written in parts), and the same command run again finishes the import."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

from tests.cli.helpers import SCRIPT, chatledger
from tests.importing.sources import weather_chat, write_chat_jsonl

MARK_KEY = "chatledger_import"
"""The session metadata key of an import written in parts."""

INTERRUPTED = re.compile(
    r"^chatledger: error: interrupted: (?P<sessions>[\d,]+) sessions? "
    r"\((?P<messages>[\d,]+) new messages?\) were stored whole, a session being written in "
    r"parts is marked for doctor; run the same command again to finish the import$"
)


def _big_source(path: Path) -> dict[str, int]:
    """Small sessions around one larger than a write (6,001 messages)."""
    conversations = {f"early-{n:03}": weather_chat(20) for n in range(30)}
    conversations["huge"] = weather_chat(1500)
    conversations.update({f"late-{n:03}": weather_chat(20) for n in range(150)})
    write_chat_jsonl(path, dict(conversations.items()))
    return {key: len(messages) for key, messages in conversations.items()}


def _rows(db: Path) -> dict[str, int]:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as connection:
            found = connection.execute(
                "SELECT session_id, count(*) FROM chatledger_messages GROUP BY session_id"
            )
            return dict(found.fetchall())
    except sqlite3.Error:
        return {}


def _marked(db: Path) -> set[str]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as connection:
        rows = connection.execute("SELECT session_id, metadata FROM chatledger_sessions")
        return {s for s, metadata in rows if MARK_KEY in json.loads(metadata or "{}")}


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupt(command: list[str], db: Path, after: int) -> subprocess.CompletedProcess[str]:
    """Run ``command`` and send it SIGINT once ``after`` messages are stored."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATLEDGER_")}
    child = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        # Ctrl-C's default, whatever this test inherited: a shell's background job (a CI
        # run started with `&`) ignores SIGINT, and so would the import
        preexec_fn=_default_sigint,
    )
    deadline = time.monotonic() + 300
    while sum(_rows(db).values()) < after:
        assert child.poll() is None, "the import ended before it could be interrupted"
        assert time.monotonic() < deadline, "the import stored nothing in time"
        time.sleep(0.05)
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=300)
    return subprocess.CompletedProcess(command, child.returncode, out, err)


def test_ctrl_c_says_what_was_stored_and_the_same_command_finishes(tmp_path: Path) -> None:
    db, source = tmp_path / "store.db", tmp_path / "big.jsonl"
    sizes = _big_source(source)
    command = [str(SCRIPT), "import", "--create", str(source), "--url", f"sqlite:///{db}"]
    stopped = _interrupt(command, db, after=2500)
    assert stopped.returncode == 130, stopped.stderr
    last = stopped.stderr.strip().splitlines()[-1]
    said = INTERRUPTED.match(last)
    assert said is not None, last
    assert "Traceback" not in stopped.stderr
    rows = _rows(db)
    whole = {s for s, n in rows.items() if n == sizes[s]}
    partial = set(rows) - whole
    assert partial <= _marked(db) <= {"huge"}  # a small session is whole or absent
    assert 0 < int(said["sessions"].replace(",", "")) <= len(whole)
    reported = int(said["messages"].replace(",", ""))
    assert 0 < reported <= sum(sizes[s] for s in whole)
    doctor = chatledger("doctor", "--url", f"sqlite:///{db}", "--json")
    findings = [f for f in doctor.json()["findings"] if f["check"] == "half_imported"]
    assert [f["session_id"] for f in findings] == sorted(partial)
    assert doctor.returncode == (1 if partial else 0)
    again = subprocess.run([*command, "--json"], capture_output=True, text=True, check=False)
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert report["new"] == sum(sizes.values()) - sum(rows.values())
    assert report["already_stored"] == sum(rows.values())
    assert _rows(db) == sizes
    assert _marked(db) == set()
    assert chatledger("doctor", "--url", f"sqlite:///{db}").returncode == 0
