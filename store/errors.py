"""The exceptions the store raises, and the translation of driver errors into them.

Callers never see a ``sqlalchemy.exc`` or driver exception: every public coroutine of
the store runs inside :func:`translate_errors`, which maps what the database reports onto
this tree::

    ChatledgerError
    ├── SessionNotFound        the session does not exist (for this tenant)
    ├── ConcurrentWriteError   a write kept conflicting with other writers; retries exhausted
    ├── CorruptRowError        a stored row failed to validate (names tenant, session, seq)
    ├── MigrationRequired      the database schema is behind: run ``chatledger db upgrade``
    ├── InvalidInput           the caller's input is invalid (ids, tokenizer mismatch, ...)
    │                          (a strategy's TokenizerMismatch is translated to it)
    └── StoreError             any other database failure (connection refused, ...)
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

from sqlalchemy import exc as sa_exc

from strategies.base import TokenizerMismatch

__all__ = [
    "ChatledgerError",
    "ConcurrentWriteError",
    "CorruptRowError",
    "InvalidInput",
    "MigrationRequired",
    "SessionNotFound",
    "StoreError",
    "check_session_id",
    "is_retryable",
    "translate_errors",
    "translated",
]

P = ParamSpec("P")
T = TypeVar("T")


class ChatledgerError(Exception):
    """Root of every error chatledger raises."""


class SessionNotFound(ChatledgerError, LookupError):
    """The session does not exist for the store's tenant."""

    def __init__(self, session_id: str, *, tenant: str) -> None:
        super().__init__(f"session {session_id!r} not found (tenant {tenant!r})")
        self.session_id = session_id
        self.tenant = tenant


class ConcurrentWriteError(ChatledgerError):
    """A write conflicted with other writers more often than the retry budget allows."""


class CorruptRowError(ChatledgerError):
    """A stored row failed to validate; it is reported, never skipped."""

    def __init__(self, message: str, *, tenant: str, session_id: str, seq: int | None) -> None:
        where = f"tenant {tenant!r}, session {session_id!r}"
        if seq is not None:
            where += f", seq {seq}"
        super().__init__(f"corrupt row ({where}): {message}")
        self.tenant = tenant
        self.session_id = session_id
        self.seq = seq


class MigrationRequired(ChatledgerError):
    """The database schema is not at the version this library needs."""


class InvalidInput(ChatledgerError, ValueError):
    """The caller's input cannot be stored as given."""


class StoreError(ChatledgerError):
    """A database failure that no more specific error describes."""


def check_session_id(session_id: object) -> None:
    """Raise :class:`InvalidInput` unless ``session_id`` is a non-empty string without NUL."""
    if not isinstance(session_id, str) or not session_id or "\x00" in session_id:
        raise InvalidInput("session_id must be a non-empty string without NUL characters")


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


@contextmanager
def translate_errors() -> Iterator[None]:
    """Re-raise SQLAlchemy and driver errors as :class:`ChatledgerError` subclasses.

    A strategy's :class:`~strategies.base.TokenizerMismatch` (its tokenizer is not the
    one the store counted with) becomes :class:`InvalidInput`.
    """
    try:
        yield
    except ChatledgerError:
        raise
    except TokenizerMismatch as error:
        raise InvalidInput(str(error)) from error
    except sa_exc.SQLAlchemyError as error:
        if is_retryable(error):
            raise ConcurrentWriteError(f"write conflict: {error}") from error
        raise StoreError(f"database error: {error}") from error
    except OSError as error:
        raise StoreError(f"database unreachable: {error}") from error


def translated(func: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, Coroutine[Any, Any, T]]:
    """Decorate a coroutine function so that it raises only :class:`ChatledgerError`."""

    @functools.wraps(func)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        with translate_errors():
            return await func(*args, **kwargs)

    return wrapper
