"""Driver errors translated at the SQL backend's boundary.

Every public coroutine of :class:`~store.sql.store.HistoryStore` runs inside
:func:`translate_errors`, which maps what SQLAlchemy and the drivers report onto the tree
of :mod:`store.errors`; :func:`is_retryable` tells the write-retry loop which failures
are transient conflicts.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

from sqlalchemy import exc as sa_exc

from store.errors import ChatledgerError, StoreError, StoreTimeout, strategy_errors

__all__ = ["is_retryable", "translate_errors", "translated"]

P = ParamSpec("P")
T = TypeVar("T")

_RETRYABLE_SQLSTATES = frozenset({"40001", "40P01", "55P03"})
_SQLITE_BUSY_MARKERS = ("database is locked", "database is busy", "database table is locked")


def _sqlstate(error: BaseException) -> str | None:
    orig: Any = getattr(error, "orig", None)
    for candidate in (orig, getattr(orig, "__cause__", None)):
        code = getattr(candidate, "sqlstate", None) or getattr(candidate, "pgcode", None)
        if isinstance(code, str):
            return code
    return None


def is_retryable(error: BaseException) -> bool:
    """Whether ``error`` is a transient write conflict (SQLite busy, PG serialization)."""
    if not isinstance(error, sa_exc.DBAPIError):
        return False
    if _sqlstate(error) in _RETRYABLE_SQLSTATES:
        return True
    text = str(error.orig).lower()
    return any(marker in text for marker in _SQLITE_BUSY_MARKERS)


def _described(error: sa_exc.SQLAlchemyError) -> str:
    """What the driver said, without SQLAlchemy's wrapping (its class names, its links)."""
    orig = getattr(error, "orig", None)
    text = str(orig) if orig is not None else str(error)
    return text.split("\n")[0].strip() or type(error).__name__


def _missing_database(error: sa_exc.SQLAlchemyError) -> StoreError | None:
    if _sqlstate(error) != "3D000":  # invalid_catalog_name: the database does not exist
        return None
    return StoreError(
        f"{_described(error)}: create it (createdb), or give the URL of an existing database"
    )


@contextmanager
def translate_errors() -> Iterator[None]:
    """Re-raise SQLAlchemy and driver errors as :class:`~store.errors.ChatledgerError`
    subclasses (and a strategy's ``TokenizerMismatch`` as ``InvalidInput``)."""
    try:
        with strategy_errors():
            yield
    except ChatledgerError:
        raise
    except sa_exc.TimeoutError as error:  # the process's pool had no free connection
        raise StoreTimeout(
            "no free database connection in this process within the pool's timeout: more "
            "operations ran at once than its pool holds (docs/running_at_scale.md, "
            f"'Connections'; {_described(error)})"
        ) from error
    except sa_exc.SQLAlchemyError as error:
        if is_retryable(error):
            raise StoreTimeout(
                f"the database stayed locked by another connection past the store's timeout "
                f"({_described(error)})"
            ) from error
        missing = _missing_database(error)
        if missing is not None:
            raise missing from error
        raise StoreError(f"database error: {_described(error)}") from error
    except OSError as error:
        raise StoreError(f"database unreachable: {error}") from error


def translated(func: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, Coroutine[Any, Any, T]]:
    """Decorate a coroutine function so that it raises only ``ChatledgerError``."""

    @functools.wraps(func)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        with translate_errors():
            return await func(*args, **kwargs)

    return wrapper
