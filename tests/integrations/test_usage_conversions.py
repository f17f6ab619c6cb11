"""The conversions of each framework's usage into chatledger's :class:`Usage`, lane by lane."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from store.integrations import usage as usage_module
from store.integrations.usage import (
    langchain_model,
    record_call,
    usage_from_agent_framework,
    usage_from_langchain,
    usage_from_openai_agents,
)
from store.memory import InMemoryHistoryStore
from store.provider import TwoPhaseProvider
from store.usage import Usage

LANES = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


def lanes(usage: Usage | None) -> tuple[int | None, ...]:
    assert usage is not None
    return (*(getattr(usage, lane) for lane in LANES), usage.reasoning_tokens)


def test_agent_framework_standard_keys() -> None:
    details = {
        "input_token_count": 1200,
        "output_token_count": 90,
        "total_token_count": 1290,
        "cache_read_input_token_count": 800,
        "cache_creation_input_token_count": 100,
        "reasoning_output_token_count": 40,
    }
    usage = usage_from_agent_framework(details, model="gpt-x")
    assert lanes(usage) == (1200, 90, 800, 100, 40)
    assert usage is not None and usage.model == "gpt-x" and usage.exact


def test_agent_framework_provider_named_keys_when_the_standard_ones_are_missing() -> None:
    anthropic = {
        "input_token_count": 500,
        "output_token_count": 20,
        "anthropic.cache_read_input_tokens": 300,
        "anthropic.cache_creation_input_tokens": 0,
    }
    assert lanes(usage_from_agent_framework(anthropic)) == (500, 20, 300, 0, None)
    openai = {
        "input_token_count": 10,
        "openai.cached_input_tokens": 4,
        "openai.reasoning_tokens": 7,
    }
    assert lanes(usage_from_agent_framework(openai)) == (10, None, 4, None, 7)


def test_agent_framework_unreported_lanes_are_none_and_zero_stays_zero() -> None:
    usage = usage_from_agent_framework({"input_token_count": 0, "output_token_count": None})
    assert lanes(usage) == (0, None, None, None, None)
    assert usage is not None and usage.model is None
    assert usage_from_agent_framework(None) is None
    assert usage_from_agent_framework({}) is None
    assert usage_from_agent_framework({"total_token_count": 12}) is None
    # a count of the wrong type is not reported
    assert usage_from_agent_framework({"input_token_count": True, "output_token_count": -1}) is None


def test_openai_agents_request_usage() -> None:
    agents_usage = pytest.importorskip("agents.usage")
    from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

    entry = agents_usage.RequestUsage(
        input_tokens=1000,
        output_tokens=200,
        total_tokens=1200,
        input_tokens_details=InputTokensDetails.model_validate(
            {"cached_tokens": 600, "cache_write_tokens": 50}
        ),
        output_tokens_details=OutputTokensDetails(reasoning_tokens=120),
    )
    usage = usage_from_openai_agents(entry, model="gpt-5")
    assert lanes(usage) == (1000, 200, 600, 50, 120)
    assert usage is not None and usage.model == "gpt-5"


def test_openai_agents_details_missing() -> None:
    entry = SimpleNamespace(
        input_tokens=10,
        output_tokens=3,
        input_tokens_details=SimpleNamespace(cached_tokens=0),
        output_tokens_details=None,
    )
    assert lanes(usage_from_openai_agents(entry)) == (10, 3, 0, None, None)
    assert usage_from_openai_agents(None) is None


def test_langchain_usage_metadata() -> None:
    metadata: dict[str, Any] = {
        "input_tokens": 350,
        "output_tokens": 240,
        "total_tokens": 590,
        "input_token_details": {"audio": 10, "cache_creation": 200, "cache_read": 100},
        "output_token_details": {"audio": 10, "reasoning": 200},
    }
    usage = usage_from_langchain(metadata, model="claude-x")
    assert lanes(usage) == (350, 240, 100, 200, 200)
    assert usage is not None and usage.model == "claude-x"
    bare = usage_from_langchain({"input_tokens": 5, "output_tokens": 0, "total_tokens": 5})
    assert lanes(bare) == (5, 0, None, None, None)
    assert usage_from_langchain(None) is None


def test_langchain_model_name() -> None:
    assert langchain_model({"model_name": "gpt-4o", "model": "other"}) == "gpt-4o"
    assert langchain_model({"model": "claude"}) == "claude"
    assert langchain_model({"model_name": ""}) is None
    assert langchain_model(None) is None


async def test_record_call_records_once_per_call_id() -> None:
    store = InMemoryHistoryStore()
    phases = TwoPhaseProvider(store)
    usage = Usage(input_tokens=10, output_tokens=2)
    assert await record_call(phases, "s", usage, message_id="m1", call_id="c1")
    assert await record_call(phases, "s", usage, message_id="m1", call_id="c1")
    calls = await store.usage_calls("s")
    assert [(c.message_id, c.call_id) for c in calls] == [("m1", "c1")]


async def test_record_call_on_a_backend_without_the_ledger_records_nothing(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    class NoLedger(InMemoryHistoryStore):
        async def record_usage(self, *args: Any, **kwargs: Any) -> None:
            raise self._unsupported("record_usage")

    monkeypatch.setattr(usage_module, "_WARNED", set())
    phases = TwoPhaseProvider(NoLedger())
    usage = Usage(input_tokens=1)
    for _ in range(3):
        assert not await record_call(phases, "s", usage, message_id=None, call_id=None)
    warned = [r for r in caplog.records if "not supported" in r.getMessage()]
    assert len(warned) == 1  # once, not at every call
