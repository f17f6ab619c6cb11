"""The rules every backend obeys identically: pure, synchronous, no SQL.

* :mod:`~store.rules.records`: a session's records (messages, groups, events), appending
  to them with incremental annotation, and reading them back as views and models.
* :mod:`~store.rules.identity`: content identity (the canonical hash) and the dedupe
  decision of an append.
* :mod:`~store.rules.storage_json`: the storage format's JSON, written once (the
  canonical text of the hash, the column texts, the values the formats write).
* :mod:`~store.rules.checks`: the argument checks of the contract.
* :mod:`~store.rules.changes`: applying a change set or a restore to records, and the
  audit event it becomes.
* :mod:`~store.rules.conflicts`: the optimistic apply of a plan, at most twice.
* :mod:`~store.rules.why`: why a message is, or is not, sent.
* :mod:`~store.rules.pending`: the token counts of in-flight messages, kept until stored.
* :mod:`~store.rules.imported`: a compacted source's annotations as exclusions and
  summaries.

The in-memory backend (:mod:`store.memory`) and the SQL backend (:mod:`store.sql`) both
import these modules, and never each other.
"""
