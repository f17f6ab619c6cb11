"""OpenTelemetry for chatledger: spans of the store's operations and compaction metrics.

Install the ``otel`` extra (``opentelemetry-api``) and set up providers with the SDK as
usual, globally or with :func:`configure`. Spans: ``chatledger.append``,
``chatledger.context``, ``chatledger.compact``, ``chatledger.import``. Metrics:
``chatledger.tokens.stored``, ``chatledger.tokens.sent``, ``chatledger.tokens.saved``,
``chatledger.compaction.outcomes``, ``chatledger.compaction.duration``. The names are
in :mod:`store.telemetry.names`. Nothing is emitted without a configured provider.
"""

from __future__ import annotations

from store.telemetry.operations import (
    OFF,
    CompactionSpan,
    Operation,
    Unchanged,
    compaction,
    operation,
)
from store.telemetry.providers import configure

__all__ = [
    "OFF",
    "CompactionSpan",
    "Operation",
    "Unchanged",
    "compaction",
    "configure",
    "operation",
]
