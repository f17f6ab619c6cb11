"""The names chatledger emits under: spans, attributes and metrics.

Attributes follow OpenTelemetry's generative-AI conventions where one exists
(``gen_ai.conversation.id`` for the session); the rest are chatledger's own. Metrics
never carry a session id (one series per session would explode their cardinality).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "ATTEMPTS",
    "COMPACTION_DURATION",
    "COMPACTION_OUTCOMES",
    "CONVERSATION_ID",
    "GROUPS_EXCLUDED",
    "GROUPS_REDUCED",
    "GROUPS_SUMMARIZED",
    "INSTRUMENTATION_NAME",
    "MESSAGES_AFTER",
    "MESSAGES_BEFORE",
    "OUTCOME",
    "PHASE",
    "SPAN_APPEND",
    "SPAN_APPEND_IF",
    "SPAN_COMPACT",
    "SPAN_CONTEXT",
    "SPAN_FORK",
    "SPAN_IMPORT",
    "SPAN_LOCATE",
    "SPAN_RECORD_USAGE",
    "SPAN_REQUEST_COMPACTION",
    "SPAN_REWIND",
    "SPAN_SEARCH",
    "SPAN_SET_TITLE",
    "SPAN_USAGE",
    "STRATEGY",
    "TENANT",
    "TOKENS_AFTER",
    "TOKENS_BEFORE",
    "TOKENS_SAVED",
    "TOKENS_SENT",
    "TOKENS_STORED",
]

INSTRUMENTATION_NAME: Final = "chatledger"
"""The tracer's and the meter's instrumentation scope."""

SPAN_APPEND: Final = "chatledger.append"
SPAN_CONTEXT: Final = "chatledger.context"
SPAN_COMPACT: Final = "chatledger.compact"
SPAN_IMPORT: Final = "chatledger.import"
SPAN_FORK: Final = "chatledger.fork"
SPAN_REWIND: Final = "chatledger.rewind"
SPAN_SEARCH: Final = "chatledger.search"
SPAN_SET_TITLE: Final = "chatledger.set_title"
SPAN_RECORD_USAGE: Final = "chatledger.record_usage"
SPAN_USAGE: Final = "chatledger.usage"
SPAN_REQUEST_COMPACTION: Final = "chatledger.request_compaction"
SPAN_APPEND_IF: Final = "chatledger.append_if"
SPAN_LOCATE: Final = "chatledger.locate"

CONVERSATION_ID: Final = "gen_ai.conversation.id"
"""The session id (span attribute only)."""
TENANT: Final = "chatledger.tenant"
PHASE: Final = "chatledger.phase"
STRATEGY: Final = "chatledger.strategy"
OUTCOME: Final = "chatledger.outcome"
"""``applied``, ``failed``, ``blocked``, ``abandoned``, ``unchanged`` or ``dry_run``."""
MESSAGES_BEFORE: Final = "chatledger.messages.before"
MESSAGES_AFTER: Final = "chatledger.messages.after"
TOKENS_BEFORE: Final = "chatledger.tokens.before"
TOKENS_AFTER: Final = "chatledger.tokens.after"
GROUPS_EXCLUDED: Final = "chatledger.groups.excluded"
GROUPS_SUMMARIZED: Final = "chatledger.groups.summarized"
GROUPS_REDUCED: Final = "chatledger.groups.reduced"
ATTEMPTS: Final = "chatledger.attempts"

TOKENS_STORED: Final = "chatledger.tokens.stored"
"""Counter (``{token}``): tokens of the messages stored (appends and imports)."""
TOKENS_SENT: Final = "chatledger.tokens.sent"
"""Counter (``{token}``): tokens of the contexts handed out to be sent to a model."""
TOKENS_SAVED: Final = "chatledger.tokens.saved"
"""Counter (``{token}``): active tokens that applied compactions removed."""
COMPACTION_OUTCOMES: Final = "chatledger.compaction.outcomes"
"""Counter: compactions by ``chatledger.outcome`` and ``chatledger.strategy``."""
COMPACTION_DURATION: Final = "chatledger.compaction.duration"
"""Histogram (``s``): the wall time of a compaction, by outcome and strategy."""
