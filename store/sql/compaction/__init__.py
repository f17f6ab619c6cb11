"""Compaction on write in SQL: plan on a snapshot, apply with the shared rules, audit.

* :mod:`~store.sql.compaction.compactor`: snapshot, plan and the optimistic apply.
* :mod:`~store.sql.compaction.mirror`: the few records a change set or restore can
  touch, loaded under the write lock.
* :mod:`~store.sql.compaction.write_back`: what the rules changed in the mirror, written
  back with the session's totals; its event recorded through :mod:`store.sql.audit`,
  which owns every event row.
* :mod:`~store.sql.compaction.restore`: restores and pins.
* :mod:`~store.sql.compaction.imports`: the import of already-compacted history.
"""
