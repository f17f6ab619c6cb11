"""The rules of full-text search every backend obeys identically: pure, no SQL.

* :mod:`~store.search.text`: the normalized text indexed and searched (folding, words,
  CJK pairs) and what of a message is indexed.
* :mod:`~store.search.query`: the query language, parsed into a :class:`Query`, compiled
  to an FTS5 ``MATCH`` expression and to a PostgreSQL ``tsquery``, and matched in Python.
* :mod:`~store.search.snippet`: a bounded excerpt of a message around its matches, with
  the matches' offsets.
* :mod:`~store.search.cursor`: signed, opaque page cursors.
"""

from store.search.cursor import decode_cursor, encode_cursor
from store.search.query import (
    Phrase,
    Query,
    Term,
    match_spans,
    matches,
    parse_query,
    to_fts5,
    to_tsquery,
)
from store.search.snippet import Snippet, make_snippet
from store.search.text import indexable_text, message_text, normalize, tokens

__all__ = [
    "Phrase",
    "Query",
    "Snippet",
    "Term",
    "decode_cursor",
    "encode_cursor",
    "indexable_text",
    "make_snippet",
    "match_spans",
    "matches",
    "message_text",
    "normalize",
    "parse_query",
    "to_fts5",
    "to_tsquery",
    "tokens",
]
