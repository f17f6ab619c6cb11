"""The conformance suite (``tests/conformance/``), run on
:class:`~store.SyncHistoryStore` through an async face: once called from a thread with
a running loop (the test's), once from threads without one."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import AsyncIterator

import pytest

import tests.conformance
from store import SyncHistoryStore
from strategies.tokenizers import CharacterEstimatorTokenizer
from tests.sync.faces import AsyncFace

ASYNC_ONLY = {"test_context_equals_view_projection", "test_truncation_applies_what_the_view_would"}
"""Tests of what only the async face gives: its ``view`` is a :class:`~strategies.view.View`
(the synchronous store's is a ``SyncView`` whose ``project`` runs on the store's loop)."""

LOOP_BOUND = ("Gated(", "Interfering(")
"""Strategies that hold a plan on an :class:`asyncio.Event` of the test's loop, or call the
store from inside its own ``compact``: the synchronous store plans on its private loop and
refuses to be called from inside one of its calls, so those tests are the async face's."""

for _module in pkgutil.iter_modules(tests.conformance.__path__):
    if not _module.name.startswith("test_"):
        continue
    _suite = importlib.import_module(f"tests.conformance.{_module.name}")
    for _name, _test in vars(_suite).items():
        if _name in ASYNC_ONLY or not _name.startswith("test_"):
            continue
        if any(hold in inspect.getsource(_test) for hold in LOOP_BOUND):
            continue
        if list(inspect.signature(_test).parameters) == ["store"]:
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
