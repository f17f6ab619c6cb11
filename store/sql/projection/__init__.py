"""The projection in SQL: the active view a strategy plans on and the model is sent.

The read path of a model call: nothing here writes, and nothing imports
:mod:`store.sql.append` (the annotation state both read is :mod:`store.sql.annotation`).

* :mod:`~store.sql.projection.views`: the active groups and their messages, by group id.
* :mod:`~store.sql.projection.opening`: a view opened with the session row and what
  the cache lacks, in one statement.
* :mod:`~store.sql.projection.pending`: a run's in-flight messages added to a view.
* :mod:`~store.sql.projection.cache`: each session's active view kept between calls,
  checked against the session row.
"""
