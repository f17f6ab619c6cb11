"""The rules of full-text search every backend obeys identically: pure, no SQL.

* :mod:`~store.search.text`: the normalized text indexed and searched (folding, words,
  CJK pairs) and what of a message is indexed.
* :mod:`~store.search.query`: the query language, parsed into a :class:`Query`, compiled
  to an FTS5 ``MATCH`` expression and to a PostgreSQL ``tsquery``, and matched in Python.
* :mod:`~store.search.snippet`: a bounded excerpt of a message around its matches, with
  the matches' offsets.
* :mod:`~store.search.cursor`: signed, opaque page cursors.
"""
