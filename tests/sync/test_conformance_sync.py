"""The conformance suite (``tests/store/test_conformance.py``), run on
:class:`~store.SyncHistoryStore` through an async face: once called from a thread with
a running loop (the test's), once from threads without one."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator

import pytest

from store import SyncHistoryStore
from strategies.tokenizers import CharacterEstimatorTokenizer
from tests.store import test_conformance as suite
from tests.sync.faces import AsyncFace

for _name, _test in vars(suite).items():
    if _name.startswith("test_") and "store" in inspect.signature(_test).parameters:
        globals()[_name] = _test


@pytest.fixture(params=["with-loop", "without-loop"])
async def store(db_url: str, request: pytest.FixtureRequest) -> AsyncIterator[AsyncFace]:
    """The synchronous store on ``db_url``, behind an async face."""
    sync = SyncHistoryStore.open(db_url, tokenizer=CharacterEstimatorTokenizer())
    face = AsyncFace(sync, db_url, threaded=request.param == "without-loop")
    try:
        yield face
    finally:
        await face.dispose()
        sync.close()
