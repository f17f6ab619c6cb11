"""The drivers: the engine, the one-hop SQLite and asyncpg paths, statements compiled once.

The only place under :mod:`store.sql` that imports a database driver (aiosqlite, asyncpg,
``sqlite3``).
"""
