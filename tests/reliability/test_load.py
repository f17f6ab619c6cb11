"""The load test of the provider's two phases (:mod:`tests.reliability.load`), on SQLite
and PostgreSQL: no errors, and afterwards every message is there once and in order.

The suite runs the short plan and asserts no timing; ``CHATLEDGER_LOAD=long`` runs the
long one and prints its figures (turns per second, p50 and p99 of both phases).
"""

from __future__ import annotations

import os

import pytest

from tests.reliability.load import LONG, SHORT, check_loopback, run_load, verify

LOAD_ENV = "CHATLEDGER_LOAD"


@pytest.mark.parametrize("variant", ["short", pytest.param("long", marks=pytest.mark.slow)])
async def test_two_phases_under_load(db_url: str, variant: str) -> None:
    if variant == "long" and os.environ.get(LOAD_ENV) != "long":
        pytest.skip(f"the long load test runs with {LOAD_ENV}=long")
    plan = SHORT if variant == "short" else LONG
    result = await run_load(db_url, plan)
    assert result.errors == []
    assert result.turns == sum(len(ids) for ids in result.written.values()) // 4
    assert result.turns > 0
    if variant == "short":  # its count bound is small enough to be reached, however slow
        assert result.turns == plan.sessions * plan.turns
    assert await verify(db_url, result) == []
    figures = result.summary()
    assert figures["errors"] == 0
    print(f"\nload {variant} on {db_url.split(':')[0]}: {figures}")


def test_only_loopback_databases() -> None:
    check_loopback("sqlite:///x.db")
    check_loopback("postgresql://postgres@127.0.0.1:5432/test")
    with pytest.raises(ValueError, match="loopback"):
        check_loopback("postgresql://postgres@db.example.com/test")
