"""OpenTelemetry: the spans and metrics of the issue, by their names, on every backend;
nothing emitted without a configured provider."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from store import telemetry
from store.contract import HistoryBackend
from store.telemetry import names, providers
from strategies import SummarizationStrategy, TruncationStrategy
from strategies.messages import Message
from strategies.summarizers import FakeSummarizer
from tests.telemetry.conftest import Collected

SESSION = "traced"


def _turns(count: int) -> list[Message]:
    out: list[Message] = []
    for index in range(count):
        out.append(Message.text_message("user", f"question {index} " + "word " * 20))
        out.append(Message.text_message("assistant", f"answer {index} " + "text " * 20))
    return out


async def test_append_and_context_spans_and_token_counters(
    any_store: HistoryBackend, collected: Collected
) -> None:
    await any_store.append(SESSION, _turns(3))
    stored = (await any_store.stats(SESSION)).stored_tokens
    context = await any_store.context(SESSION)
    [append] = collected.spans(names.SPAN_APPEND)
    assert append.attributes is not None
    assert append.attributes[names.CONVERSATION_ID] == SESSION
    assert append.attributes[names.TENANT] == any_store.tenant
    assert append.attributes[names.TOKENS_AFTER] == stored
    [sent] = collected.spans(names.SPAN_CONTEXT)
    assert sent.attributes is not None
    assert sent.attributes[names.MESSAGES_AFTER] == len(context)
    assert collected.total(names.TOKENS_STORED) == stored
    assert collected.total(names.TOKENS_SENT) == sum(any_store.count_tokens(m) for m in context)


async def test_compact_span_attributes_and_metrics(
    any_store: HistoryBackend, collected: Collected
) -> None:
    await any_store.append(SESSION, _turns(5))
    event = await any_store.compact(SESSION, TruncationStrategy(max_n=4, compact_to=2))
    assert event is not None
    [span] = collected.spans(names.SPAN_COMPACT)
    attrs = dict(span.attributes or {})
    assert attrs[names.CONVERSATION_ID] == SESSION
    assert attrs[names.TENANT] == any_store.tenant
    assert attrs[names.PHASE] == "manual"
    assert attrs[names.STRATEGY] == "TruncationStrategy"
    assert attrs[names.OUTCOME] == "applied"
    assert attrs[names.MESSAGES_BEFORE] == event.messages_before
    assert attrs[names.MESSAGES_AFTER] == event.messages_after
    assert attrs[names.TOKENS_BEFORE] == event.tokens_before
    assert attrs[names.TOKENS_AFTER] == event.tokens_after
    assert attrs[names.GROUPS_EXCLUDED] == len(event.excluded)
    assert attrs[names.GROUPS_SUMMARIZED] == 0 and attrs[names.GROUPS_REDUCED] == 0
    assert attrs[names.ATTEMPTS] == 1
    assert collected.total(names.TOKENS_SAVED) == event.tokens_saved > 0
    outcome = {"chatledger__outcome": "applied", "chatledger__strategy": "TruncationStrategy"}
    assert collected.total(names.COMPACTION_OUTCOMES, **outcome) == 1
    [(attributes, histogram)] = collected.points(names.COMPACTION_DURATION)
    assert attributes == {names.OUTCOME: "applied", names.STRATEGY: "TruncationStrategy"}
    assert histogram.count == 1 and histogram.sum >= 0


async def test_failed_and_unchanged_compactions_are_counted(
    any_store: HistoryBackend, collected: Collected
) -> None:
    await any_store.append(SESSION, _turns(4))
    failing = SummarizationStrategy(
        client=FakeSummarizer(fail="error"), target_count=2, threshold=0
    )
    failed = await any_store.compact(SESSION, failing)
    assert failed is not None and failed.outcome == "failed"
    assert await any_store.compact(SESSION, TruncationStrategy(max_n=999, compact_to=99)) is None
    await any_store.compact(SESSION, TruncationStrategy(max_n=2, compact_to=1), dry_run=True)
    outcomes = [
        dict(s.attributes or {})[names.OUTCOME] for s in collected.spans(names.SPAN_COMPACT)
    ]
    assert outcomes == ["failed", "unchanged", "dry_run"]
    counted = {a[names.OUTCOME]: p.value for a, p in collected.points(names.COMPACTION_OUTCOMES)}
    assert counted == {"failed": 1, "unchanged": 1}  # a dry run is not a compaction
    assert collected.total(names.TOKENS_SAVED) == 0


async def test_import_span(any_store: HistoryBackend, collected: Collected) -> None:
    result = await any_store.import_messages(SESSION, _turns(2), source="agent_framework")
    [span] = collected.spans(names.SPAN_IMPORT)
    attrs = dict(span.attributes or {})
    assert attrs[names.CONVERSATION_ID] == SESSION and attrs[names.OUTCOME] == "unchanged"
    assert result.event is None
    assert collected.total(names.TOKENS_STORED) == (await any_store.stats(SESSION)).stored_tokens


async def test_search_fork_and_rewind_spans(
    any_store: HistoryBackend, collected: Collected
) -> None:
    await any_store.append(SESSION, _turns(2))
    await any_store.search("turn")
    await any_store.search("turn", session_id=SESSION)
    wide, scoped = collected.spans(names.SPAN_SEARCH)
    assert names.CONVERSATION_ID not in dict(wide.attributes or {})
    assert dict(scoped.attributes or {})[names.CONVERSATION_ID] == SESSION
    fork = await any_store.fork(SESSION, new_session_id="forked")
    [forked] = collected.spans(names.SPAN_FORK)
    assert dict(forked.attributes or {})[names.CONVERSATION_ID] == SESSION
    event = await any_store.rewind(fork.session_id, to=None)
    [rewound] = collected.spans(names.SPAN_REWIND)
    assert event is not None
    assert dict(rewound.attributes or {})[names.CONVERSATION_ID] == "forked"


async def test_metrics_never_carry_a_session_id(
    any_store: HistoryBackend, collected: Collected
) -> None:
    await any_store.append(SESSION, _turns(5))
    await any_store.context(SESSION)
    await any_store.compact(SESSION, TruncationStrategy(max_n=4, compact_to=2))
    metrics = [
        names.TOKENS_STORED,
        names.TOKENS_SENT,
        names.TOKENS_SAVED,
        names.COMPACTION_OUTCOMES,
        names.COMPACTION_DURATION,
    ]
    points = [p for m in metrics for p in collected.points(m)]
    assert len(points) >= len(metrics)
    for attributes, _ in points:
        assert names.CONVERSATION_ID not in attributes
        assert SESSION not in attributes.values()


async def test_nothing_is_emitted_without_a_configured_provider(
    any_store: HistoryBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no provider (the global ones unset in the test process), no instrument is
    built: an SDK provider that was created but not configured receives nothing."""
    exporter = InMemorySpanExporter()
    unused = TracerProvider()
    unused.add_span_processor(SimpleSpanProcessor(exporter))
    built: list[object] = []
    monkeypatch.setattr(providers, "_build", lambda *a: built.append(a))
    assert providers.instruments() is None
    await any_store.append(SESSION, _turns(5))
    await any_store.context(SESSION)
    await any_store.compact(SESSION, TruncationStrategy(max_n=4, compact_to=2))
    assert built == [] and exporter.get_finished_spans() == ()
    unused.shutdown()


async def test_configure_goes_back_to_the_global_providers(collected: Collected) -> None:
    assert providers.instruments() is not None
    telemetry.configure()
    assert providers.instruments() is None
