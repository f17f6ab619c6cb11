"""What the SQL layer refuses when it is opened, and how it names driver errors."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects import mysql

from store import HistoryStore
from store.errors import InvalidInput, StoreError, StoreTimeout
from store.sql.dialect import capabilities
from store.sql.drivers.engine import create_engine, normalize_url, sqlite_file
from store.sql.errors import is_retryable, translate_errors


def test_a_url_that_is_not_text_is_refused() -> None:
    with pytest.raises(InvalidInput, match="expected a database URL, got int"):
        normalize_url(5432)  # type: ignore[arg-type]


def test_the_postgres_scheme_is_read_as_postgresql() -> None:
    url = normalize_url("postgres://user@db.example/chat")
    assert url.drivername == "postgresql+asyncpg"
    assert url.host == "db.example"
    assert url.database == "chat"


@pytest.mark.parametrize("timeout", [0, -1.5, True, "5"])
def test_create_engine_refuses_a_timeout_that_is_not_positive(timeout: object) -> None:
    with pytest.raises(InvalidInput, match="timeout must be a positive number of seconds"):
        create_engine("sqlite:///x.db", timeout=timeout)  # type: ignore[arg-type]


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:", "sqlite:///file:x?mode=memory"])
def test_an_in_memory_sqlite_url_names_no_file(url: str) -> None:
    assert sqlite_file(url) is None


def test_a_sqlite_file_url_names_its_file(tmp_path: Path) -> None:
    path = str(tmp_path / "chat.db")
    assert sqlite_file(f"sqlite:///{path}") == path


def test_an_unsupported_dialect_has_no_capabilities() -> None:
    with pytest.raises(StoreError, match="unsupported database 'mysql': chatledger supports"):
        capabilities(mysql.dialect())


def test_an_error_that_is_not_a_driver_error_is_not_retried() -> None:
    assert not is_retryable(ValueError("database is locked"))


def test_a_locked_database_becomes_a_store_timeout() -> None:
    locked = sa_exc.OperationalError("INSERT", {}, sqlite3.OperationalError("database is locked"))
    with pytest.raises(StoreTimeout, match=r"stayed locked .*\(database is locked\)"):
        with translate_errors():
            raise locked


def test_a_pool_without_a_free_connection_becomes_a_store_timeout_naming_the_cause() -> None:
    exhausted = sa_exc.TimeoutError(
        "QueuePool limit of size 5 overflow 10 reached, connection timed out, timeout 30.00"
    )
    with pytest.raises(StoreTimeout) as refused:
        with translate_errors():
            raise exhausted
    said = str(refused.value)
    assert said.startswith("no free database connection in this process")
    assert "QueuePool limit of size 5 overflow 10" in said and "\n" not in said


async def test_history_store_refuses_what_is_not_an_engine() -> None:
    with pytest.raises(InvalidInput, match="takes an SQLAlchemy AsyncEngine, got str"):
        HistoryStore("sqlite:///x.db")  # type: ignore[arg-type]


async def test_history_store_refuses_a_bad_timeout_and_limits(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'x.db'}")
    try:
        with pytest.raises(InvalidInput, match="timeout must be a positive number"):
            HistoryStore(engine, timeout=0)
        with pytest.raises(InvalidInput, match="limits must be a Limits, got dict"):
            HistoryStore(engine, limits={"max_id_length": 10})  # type: ignore[arg-type]
    finally:
        await engine.dispose()


async def test_doctor_refuses_a_fix_that_is_not_a_bool(store: HistoryStore) -> None:
    with pytest.raises(InvalidInput, match="fix must be a bool, got str"):
        await store.doctor(fix="yes")  # type: ignore[arg-type]
