"""Processes appending, compacting, importing and redacting on one database at once, on
SQLite and PostgreSQL (:mod:`tests.reliability.mixed`, a few seconds).

Afterwards: no process met an error; every acknowledged message is stored once, in the
order its writer appended it; every redacted message is a tombstone and its text is
nowhere in the history, the audit or a summary; every imported session is whole; the
compactions are audited; ``doctor`` finds nothing.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from store import HistoryStore
from store.rules.erasure import REDACTED_TEXT
from strategies.tokenizers import CharacterEstimatorTokenizer
from tests.conftest import POOLED_BACKENDS
from tests.reliability.mixed import SECRETS, SHARED, secret, secret_messages


@pytest.fixture(params=POOLED_BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """SQLite, PostgreSQL, and PostgreSQL through PgBouncer in transaction mode."""
    return str(request.param)


ROOT = Path(__file__).resolve().parents[2]
ROLES = ("appender", "compactor", "importer", "redactor")
SECONDS = 2.0


async def _seed(url: str) -> None:
    async with HistoryStore.open(url, tokenizer=CharacterEstimatorTokenizer()) as store:
        for session in SHARED:
            await store.append(session, secret_messages(session))


def _run_all(url: str, work: Path) -> dict[str, dict[str, Any]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATLEDGER_")}
    children = {
        role: subprocess.Popen(
            [sys.executable, "-m", "tests.reliability.mixed", role, url, str(SECONDS), str(work)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for role in ROLES
    }
    done = {}
    for role, child in children.items():
        out, err = child.communicate(timeout=300)
        assert child.returncode == 0, f"{role}: {err.strip()[-800:]}"
        done[role] = json.loads(out)
    return done


async def _check(url: str, done: dict[str, dict[str, Any]]) -> None:
    async with HistoryStore.open(url, tokenizer=CharacterEstimatorTokenizer()) as store:
        redacted = done["redactor"]["redacted"]
        for session in SHARED:
            history = await store.history(session, include_excluded=True)
            ids = [m.message_id for m in history if m.kind != "summary"]
            assert len(ids) == len(set(ids)), f"{session}: a message stored twice"
            for role in ("appender", "compactor"):
                mine = done[role]["stored"].get(session, [])
                assert [i for i in ids if i in set(mine)] == mine, f"{session}: {role}'s appends"
            assert len(redacted[session]) == SECRETS
            by_id = {m.message_id: m for m in history}
            for message_id in redacted[session]:
                assert by_id[message_id].message.text == REDACTED_TEXT
            everything = "".join(m.model_dump_json() for m in history)
            everything += "".join(e.model_dump_json() for e in await store.audit(session))
            assert not [n for n in range(SECRETS) if secret(session, n) in everything]
            strategies = {e.strategy for e in await store.audit(session)}
            assert "redact" in strategies
        for session, size in done["importer"]["imported"].items():
            assert len(await store.history(session, include_excluded=True)) == size, session
        report = await store.doctor()
        assert report.healthy, report.findings


def test_appends_compactions_imports_and_redactions_at_once(db_url: str, tmp_path: Path) -> None:
    asyncio.run(_seed(db_url))
    done = _run_all(db_url, tmp_path)
    assert [e for role in ROLES for e in done[role]["errors"]] == []
    assert all(done[role]["stored"] for role in ("appender", "compactor"))
    assert done["importer"]["imported"]
    asyncio.run(_check(db_url, done))
