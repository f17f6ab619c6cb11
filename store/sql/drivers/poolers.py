"""PostgreSQL directly or behind a connection pooler (PgBouncer, RDS Proxy, Supabase's).

chatledger gives each PostgreSQL connection two settings: ``lock_timeout`` (how long a
call waits for a lock) and, with a ``schema``, the ``search_path``. Straight to the
server they are startup parameters of the connection, and the statements a connection
runs again are named prepared statements that it keeps: no statement per call for
either. A pooler breaks both. PgBouncer refuses any startup parameter it does not know
(``unsupported startup parameter: lock_timeout``); in transaction mode it hands each
transaction whichever server connection is free, so a setting made on one session and
a statement prepared on one are not there for the next transaction.

Which way a URL connects is its :class:`Pooling`:

=============== ==================================== ===================================
mode            the settings                         statements
=============== ==================================== ===================================
``direct``      startup parameters                   named, prepared once a connection
``session``     one ``set_config`` at connect        named, prepared once a connection
``transaction`` ``set_config(..., true)`` in the     unnamed, parsed and run in one
                ``BEGIN`` of every transaction       exchange (asyncpg sends no ``Sync``
                (reads too begin one)                between them, so a pooler keeps
                                                     the server connection for both)
=============== ==================================== ===================================

The URL option ``pooler=session`` or ``pooler=transaction`` chooses; without it the
connection is direct until the server refuses the startup parameters the way PgBouncer
does, and from then on (for that engine) in transaction mode, which is safe behind any
pooler. No round trip is added to a direct connection, nor to a transaction in either
pooler mode (the settings ride on the ``BEGIN``'s own query); behind a transaction pooler
each statement is parsed again (two round trips instead of one) and a read is a
transaction (a ``BEGIN`` and a ``ROLLBACK``).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping
from typing import Any, Final

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy.dialects.postgresql.asyncpg import (
    AsyncAdapt_asyncpg_connection,
    AsyncAdapt_asyncpg_dbapi,
)
from sqlalchemy.engine import URL, Dialect
from sqlalchemy.util.concurrency import await_

from store.errors import InvalidInput

__all__ = [
    "POOLER_OPTION",
    "PoolerAwareDBAPI",
    "Pooling",
    "pooling_of",
    "schema_of",
    "split_pooler_option",
]

_log = logging.getLogger("chatledger.store")

POOLER_OPTION: Final = "pooler"
"""The URL query option that says a PostgreSQL URL reaches the server through a pooler."""


class Pooling(enum.Enum):
    """How a PostgreSQL URL reaches the server (see the module)."""

    DIRECT = "direct"
    SESSION = "session"
    TRANSACTION = "transaction"


_CHOICES: Final = (Pooling.SESSION, Pooling.TRANSACTION)
"""The values the URL option takes (direct is what a URL without it starts as)."""
_REFUSED: Final = "unsupported startup parameter"
"""What PgBouncer answers a startup parameter it does not pass on with."""
_ADAPTER: Final[Any] = AsyncAdapt_asyncpg_connection
"""SQLAlchemy's asyncpg adapter connection (untyped)."""


def split_pooler_option(url: URL) -> tuple[URL, Pooling | None]:
    """``url`` without the ``pooler`` option, and the mode it names (None without it).

    Raises :class:`~store.errors.InvalidInput` for a value other than ``session`` and
    ``transaction``, or a repeated option.
    """
    if POOLER_OPTION not in url.query:
        return url, None
    value = url.query[POOLER_OPTION]
    expected = " or ".join(f"{POOLER_OPTION}={mode.value}" for mode in _CHOICES)
    chosen = {mode.value: mode for mode in _CHOICES}.get(value) if isinstance(value, str) else None
    if chosen is None:
        raise InvalidInput(f"invalid URL option {POOLER_OPTION}={value!r}: expected {expected}")
    return url.difference_update_query([POOLER_OPTION]), chosen


def _refused(error: Exception) -> bool:
    """Whether ``error`` is a pooler's refusal of the startup parameters."""
    return isinstance(error, asyncpg.ProtocolViolationError) and _REFUSED in str(error)


def _literal(value: str) -> str:
    """``value`` as a SQL string literal (standard conforming strings)."""
    return "'" + value.replace("'", "''") + "'"


def _set_configs(settings: Mapping[str, str], *, local: bool) -> str:
    """One ``SELECT`` that makes ``settings``, for the transaction when ``local``.

    ``set_config`` reads each value as a startup parameter's (a ``search_path`` of
    several schemas included)."""
    flag = "true" if local else "false"
    calls = (f"set_config({_literal(k)}, {_literal(v)}, {flag})" for k, v in settings.items())
    return "SELECT " + ", ".join(calls)


def _begin(isolation: str | None, readonly: bool, deferrable: bool) -> str:
    """The ``BEGIN`` asyncpg would send for these transaction characteristics."""
    query = "BEGIN"
    if isolation and isolation != "autocommit":
        query += " ISOLATION LEVEL " + isolation.replace("_", " ").upper()
    if readonly:
        query += " READ ONLY"
    if deferrable:
        query += " DEFERRABLE"
    return query


class _SettingTransaction:
    """A top-level transaction begun by one simple query that also makes the
    transaction's settings; its ``COMMIT`` and ``ROLLBACK`` are plain ones."""

    __slots__ = ("_begin", "_connection")

    def __init__(self, connection: Any, begin: str) -> None:
        self._connection = connection
        self._begin = begin

    async def start(self) -> None:
        try:
            await self._connection.execute(self._begin)
        except Exception:
            # the BEGIN went through and a setting failed: leave no transaction behind
            if not self._connection.is_closed() and self._connection.is_in_transaction():
                await self._connection.execute("ROLLBACK")
            raise

    async def commit(self) -> None:
        await self._connection.execute("COMMIT")

    async def rollback(self) -> None:
        await self._connection.execute("ROLLBACK")


class TransactionPooledConnection(AsyncAdapt_asyncpg_connection):
    """SQLAlchemy's asyncpg adapter for a connection behind a transaction pooler: no
    prepared statement outlives its exchange (no cache, no names), and each transaction
    makes the connection's settings in its ``BEGIN``."""

    __slots__ = ("_settings",)

    def __init__(self, dbapi: Any, connection: Any, *, settings: str) -> None:
        super().__init__(dbapi, connection, prepared_statement_cache_size=0)  # type: ignore[no-untyped-call]
        self._settings = settings

    async def _start_transaction(self) -> None:
        if self.isolation_level == "autocommit":
            return
        begin = _begin(self.isolation_level, self.readonly, self.deferrable)
        transaction = _SettingTransaction(self._connection, f"{begin}; {self._settings}")
        try:
            await transaction.start()
        except Exception as error:
            self._handle_exception(error)
        else:
            self._transaction = transaction


class PoolerAwareDBAPI(AsyncAdapt_asyncpg_dbapi):
    """SQLAlchemy's asyncpg DBAPI module for one engine, connecting the way its
    :class:`Pooling` asks, and learning it from the server's refusal when the URL did
    not say (see the module)."""

    def __init__(self, settings: Mapping[str, str], pooling: Pooling | None) -> None:
        super().__init__(asyncpg)  # type: ignore[no-untyped-call]
        self.settings = dict(settings)
        """The settings every connection has (``lock_timeout``, ``search_path``)."""
        self.pooling = pooling
        """How this engine's connections reach the server; None until the first
        connection of a URL without the option tells."""

    def connect(self, *arg: Any, **kw: Any) -> Any:
        return await_(self._connect(arg, kw))

    async def _connect(self, arg: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        cache_size = kw.pop("prepared_statement_cache_size", 100)
        pooling = self.pooling
        if pooling is None or pooling is Pooling.DIRECT:
            try:
                connection = await asyncpg.connect(*arg, server_settings=self.settings, **kw)
            except Exception as error:
                if not _refused(error):
                    _ADAPTER._handle_exception_no_connection(self, error)
                _log.info(
                    "the server refused chatledger's startup parameters (%s): a pooler; "
                    "connecting as to a transaction pooler (the URL option %s=session "
                    "keeps prepared statements behind a session pooler)",
                    error,
                    POOLER_OPTION,
                )
                self.pooling = pooling = Pooling.TRANSACTION
            else:
                self.pooling = Pooling.DIRECT
                return _ADAPTER(self, connection, prepared_statement_cache_size=cache_size)
        if pooling is Pooling.SESSION:
            connection = await self._open(arg, kw)
            try:
                await connection.execute(_set_configs(self.settings, local=False))
            except Exception as error:
                connection.terminate()
                _ADAPTER._handle_exception_no_connection(self, error)
            return _ADAPTER(self, connection, prepared_statement_cache_size=cache_size)
        connection = await self._open(arg, {**kw, "statement_cache_size": 0})
        return TransactionPooledConnection(
            self, connection, settings=_set_configs(self.settings, local=True)
        )

    async def _open(self, arg: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        try:
            return await asyncpg.connect(*arg, **kw)
        except Exception as error:
            _ADAPTER._handle_exception_no_connection(self, error)


def schema_of(dialect: Dialect) -> str | None:
    """The ``search_path`` that ``dialect``'s engine gives its connections (the
    ``schema`` it was made for); None for the server's own."""
    dbapi = getattr(dialect, "dbapi", None)
    return dbapi.settings.get("search_path") if isinstance(dbapi, PoolerAwareDBAPI) else None


def pooling_of(dialect: Dialect) -> Pooling | None:
    """How ``dialect``'s engine reaches PostgreSQL: None when it has not connected yet
    and its URL did not say; direct for an engine made elsewhere (its connections are
    as its maker set them up)."""
    dbapi = getattr(dialect, "dbapi", None)
    return dbapi.pooling if isinstance(dbapi, PoolerAwareDBAPI) else Pooling.DIRECT
