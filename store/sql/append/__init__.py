"""Appending messages in SQL: one write transaction, never a scan of the history.

* :mod:`~store.sql.append.writer`: the transaction (dedupe against the stored hashes,
  incremental annotation from the session row, merges of pending groups, open calls,
  the session's totals).
* :mod:`~store.sql.append.rows`: the message and group rows, counted and serialized
  once.
* :mod:`~store.sql.append.inserts`: the ``INSERT`` statements compiled once per
  dialect, and sending a statement's rows.
* :mod:`~store.sql.append.pipeline`: the loop that writes one slice while the next is
  built.
* :mod:`~store.sql.append.counting`: the token counts of a large append, made in a
  worker thread.
"""
