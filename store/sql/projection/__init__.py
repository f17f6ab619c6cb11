"""The projection in SQL: the active view a strategy plans on and the model is sent.

* :mod:`~store.sql.projection.views`: the active groups and their messages, by group id.
* :mod:`~store.sql.projection.pending`: a run's in-flight messages added to a view.
* :mod:`~store.sql.projection.cache`: each session's active view kept between calls,
  checked against the session row.
"""
