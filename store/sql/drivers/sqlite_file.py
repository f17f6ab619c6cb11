"""A SQLite file read before a store opens it, with the standard library's ``sqlite3``.

Opening a store writes to a SQLite file (WAL mode, the schema); what must be known first
(is it a database, at which chatledger revision) is read here in read-only mode, so that
a file the store refuses is left byte for byte as it was. :data:`LIBRARY_VERSION` is the
version of the SQLite library the drivers link.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from store.errors import StoreError, StoreTimeout

__all__ = ["LIBRARY_VERSION", "read_table"]

LIBRARY_VERSION: tuple[int, int, int] = sqlite3.sqlite_version_info
"""The SQLite library's version (aiosqlite and ``sqlite3`` link the same one)."""


def read_table(path: str, table: str, columns: str, *, timeout: float) -> list[tuple[object, ...]]:
    """Every row of ``columns`` of ``table`` in the SQLite file at ``path``, read without
    writing anything to it (empty when the table does not exist).

    :class:`~store.errors.StoreTimeout` when another connection keeps the file locked past
    ``timeout`` seconds; :class:`~store.errors.StoreError` when it is not a database.
    """
    uri = Path(path).resolve().as_uri() + "?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=timeout)
        try:
            found = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
            ).fetchone()
            if found is None:
                return []
            return list(conn.execute(f"SELECT {columns} FROM {table}").fetchall())
        finally:
            conn.close()
    except sqlite3.OperationalError as error:
        if "locked" in str(error) or "busy" in str(error):
            raise StoreTimeout(
                f"{path} stayed locked by another connection for {timeout:g} s; "
                "retry, or raise the store's timeout"
            ) from None
        raise StoreError(f"{path} is not a SQLite database ({error})") from None
    except sqlite3.DatabaseError as error:
        raise StoreError(f"{path} is not a SQLite database ({error})") from None
