"""The sealed chatledger system: its data set is built sealed, by the store itself, and
its workloads run on it with the key file made beside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.child import ChildSpec, run_spec
from benchmarks.generator import ConversationGenerator
from benchmarks.peers.chatledger import KEY_FILE

SIZE = 200


def _stored_bytes(database: Path) -> bytes:
    """The database's file and whatever SQLite keeps beside it (journal, WAL)."""
    return b"".join(p.read_bytes() for p in database.parent.glob(database.name + "*"))


def _short_text() -> str:
    """A text of the data set short enough to be stored as it is (long ones are
    compressed) when stored in clear."""
    texts = [str(d.get("content") or "") for d in ConversationGenerator(7).chat_dicts(SIZE)]
    return next(text for text in texts if 40 <= len(text) <= 120)


@pytest.mark.parametrize(
    ("system", "in_clear"), [("chatledger", True), ("chatledger_sealed", False)]
)
async def test_the_data_set_is_stored_sealed(tmp_path: Path, system: str, in_clear: bool) -> None:
    database = tmp_path / "tpl.sqlite"
    built = await run_spec(ChildSpec("build", system, "sqlite", str(database), SIZE))
    assert built["status"] == "ok", built
    assert (tmp_path / KEY_FILE).exists() is not in_clear
    assert (_short_text().encode() in _stored_bytes(database)) is in_clear


async def test_every_workload_runs_on_the_sealed_data_set(tmp_path: Path) -> None:
    database = str(tmp_path / "tpl.sqlite")
    built = await run_spec(ChildSpec("build", "chatledger_sealed", "sqlite", database, SIZE))
    assert built["status"] == "ok", built
    for workload in ("per_turn", "projection", "full_read"):
        spec = ChildSpec(
            workload, "chatledger_sealed", "sqlite", database, SIZE, turns=2, repeats=2
        )
        answer = await run_spec(spec)
        assert answer["status"] == "ok", answer
    assert answer["metrics"]["messages"] >= SIZE


async def test_a_sealed_data_set_needs_its_key(tmp_path: Path) -> None:
    database = str(tmp_path / "tpl.sqlite")
    await run_spec(ChildSpec("build", "chatledger_sealed", "sqlite", database, SIZE))
    answer = await run_spec(ChildSpec("full_read", "chatledger", "sqlite", database, SIZE))
    assert answer["status"] == "error"
    assert "KeyRequired" in answer["reason"]
