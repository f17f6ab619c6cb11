"""The usage an imported message carries, in the ledger's lanes (store/importing/usage.py):
each source's convention converted (Anthropic's input made to include the cache, the
others' kept), a lane absent or null left None and a reported 0 kept, the model and the
time taken from the message, and junk (strings, bools, negative numbers, a non-object)
refused whole, never raising past the scan."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from store.formats.anthropic import ANTHROPIC_EXTRA_KEY
from store.formats.open_webui import OPEN_WEBUI_MESSAGE_KEY
from store.formats.pydantic_ai import PYDANTIC_AI_MESSAGE_KEY
from store.importing.readers.codex import USAGE_KEY
from store.importing.usage import UnusableUsage, UsageScan, call_id_of, usage_of
from store.usage.models import Usage
from strategies.messages import Message, OtherContent, TextContent

AT = datetime(2025, 11, 3, 9, 0, 3, tzinfo=UTC)


def _message(key: str, value: Any, *, role: str = "assistant", at: datetime | None = AT) -> Message:
    return Message(
        role=role,
        contents=[TextContent(text="answer")],
        message_id="m1",
        created_at=at,
        metadata={key: value},
    )


def _lanes(usage: Usage | None) -> tuple[Any, ...]:
    assert usage is not None
    return (
        usage.model,
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
        usage.reasoning_tokens,
    )


def test_anthropic_input_includes_the_cache_reads_and_writes() -> None:
    extra = {
        "model": "claude-sonnet-4-5-20250929",
        "usage": {
            "input_tokens": 12,
            "cache_creation_input_tokens": 2048,
            "cache_read_input_tokens": 0,
            "output_tokens": 161,
            "service_tier": "standard",
        },
    }
    usage = usage_of(_message(ANTHROPIC_EXTRA_KEY, extra))
    assert _lanes(usage) == ("claude-sonnet-4-5-20250929", 2060, 161, 0, 2048, None)
    assert usage is not None and usage.exact and usage.at == AT


def test_anthropic_lanes_absent_or_null_are_none_and_the_input_their_sum() -> None:
    absent = {"model": "claude-x", "usage": {"input_tokens": 40, "output_tokens": 6}}
    assert _lanes(usage_of(_message(ANTHROPIC_EXTRA_KEY, absent))) == (
        "claude-x", 40, 6, None, None, None,
    )  # fmt: skip
    null = {
        "model": "claude-x",
        "usage": {
            "input_tokens": 30,
            "cache_creation_input_tokens": None,
            "cache_read_input_tokens": 2048,
            "output_tokens": 25,
        },
    }
    assert _lanes(usage_of(_message(ANTHROPIC_EXTRA_KEY, null))) == (
        "claude-x", 2078, 25, 2048, None, None,
    )  # fmt: skip


def test_claude_codes_synthetic_messages_and_messages_without_usage_carry_none() -> None:
    synthetic = {"model": "<synthetic>", "usage": {"input_tokens": 0, "output_tokens": 0}}
    assert usage_of(_message(ANTHROPIC_EXTRA_KEY, synthetic)) is None
    assert usage_of(_message(ANTHROPIC_EXTRA_KEY, {"model": "claude-x"})) is None
    assert usage_of(_message(ANTHROPIC_EXTRA_KEY, {"model": "claude-x", "usage": {}})) is None
    usage = {"model": "claude-x", "usage": {"input_tokens": 1, "output_tokens": 1}}
    assert usage_of(_message(ANTHROPIC_EXTRA_KEY, usage, role="user")) is None


def test_codex_last_token_usage_keeps_openai_lanes_and_takes_the_model_given() -> None:
    info = {
        "total_token_usage": {"input_tokens": 99999, "output_tokens": 99999},
        "last_token_usage": {
            "input_tokens": 5420,
            "cached_input_tokens": 5120,
            "output_tokens": 140,
            "reasoning_output_tokens": 32,
            "total_tokens": 5560,
        },
        "model_context_window": 272000,
    }
    usage = usage_of(_message(USAGE_KEY, info), model="gpt-5-codex")
    assert _lanes(usage) == ("gpt-5-codex", 5420, 140, 5120, None, 32)
    assert _lanes(usage_of(_message(USAGE_KEY, info))) == (None, 5420, 140, 5120, None, 32)
    assert usage_of(_message(USAGE_KEY, {"total_token_usage": {"input_tokens": 1}})) is None


def test_the_scan_follows_codexs_turn_context_model() -> None:
    def turn(model: Any) -> Message:
        line = {"type": "turn_context", "payload": {"model": model, "cwd": "/"}}
        return Message(role="system", contents=[OtherContent(kind="turn_context", payload=line)])

    info = {"last_token_usage": {"input_tokens": 10, "output_tokens": 2}}
    scan = UsageScan()
    assert scan.usage(_message(USAGE_KEY, info)) is not None
    assert scan.model is None
    scan.usage(turn("gpt-5-codex"))
    assert _lanes(scan.usage(_message(USAGE_KEY, info)))[0] == "gpt-5-codex"
    scan.usage(turn(7))
    assert _lanes(scan.usage(_message(USAGE_KEY, info)))[0] is None


def test_pydantic_ai_newer_usage_is_chatledgers_convention() -> None:
    response = {
        "kind": "response",
        "model_name": "gpt-4.1",
        "usage": {
            "input_tokens": 1830,
            "cache_write_tokens": 0,
            "cache_read_tokens": 1024,
            "output_tokens": 240,
            "output_reasoning_tokens": 64,
            "details": {"reasoning_tokens": 99},
        },
    }
    assert _lanes(usage_of(_message(PYDANTIC_AI_MESSAGE_KEY, response))) == (
        "gpt-4.1", 1830, 240, 1024, 0, 64,
    )  # fmt: skip
    details_only = {
        "kind": "response",
        "model_name": "gpt-4.1",
        "usage": {"input_tokens": 10, "output_tokens": 5, "details": {"reasoning_tokens": 3}},
    }
    assert _lanes(usage_of(_message(PYDANTIC_AI_MESSAGE_KEY, details_only))) == (
        "gpt-4.1", 10, 5, None, None, 3,
    )  # fmt: skip


def test_pydantic_ai_older_request_and_response_tokens() -> None:
    response = {
        "kind": "response",
        "model_name": "claude-3-5-haiku-latest",
        "usage": {
            "requests": 1,
            "request_tokens": 300,
            "response_tokens": 20,
            "total_tokens": 320,
            "details": None,
        },
    }
    assert _lanes(usage_of(_message(PYDANTIC_AI_MESSAGE_KEY, response))) == (
        "claude-3-5-haiku-latest", 300, 20, None, None, None,
    )  # fmt: skip
    request = {"kind": "request", "usage": {"input_tokens": 1}}
    assert usage_of(_message(PYDANTIC_AI_MESSAGE_KEY, request)) is None


def test_open_webui_openai_and_ollama_usage() -> None:
    openai = {
        "model": "gpt-4o",
        "usage": {
            "prompt_tokens": 812,
            "completion_tokens": 96,
            "total_tokens": 908,
            "prompt_tokens_details": {"cached_tokens": 512},
            "completion_tokens_details": {"reasoning_tokens": 0},
        },
    }
    assert _lanes(usage_of(_message(OPEN_WEBUI_MESSAGE_KEY, openai))) == (
        "gpt-4o", 812, 96, 512, None, 0,
    )  # fmt: skip
    ollama = {
        "model": "llama3.2:latest",
        "usage": {
            "response_token/s": 41.2,
            "prompt_token/s": 520.9,
            "total_duration": 2100000000,
            "prompt_eval_count": 26,
            "eval_count": 298,
            "approximate_total": "0h0m2s",
        },
    }
    assert _lanes(usage_of(_message(OPEN_WEBUI_MESSAGE_KEY, ollama))) == (
        "llama3.2:latest", 26, 298, None, None, None,
    )  # fmt: skip
    assert usage_of(_message(OPEN_WEBUI_MESSAGE_KEY, {"model": "gpt-4o"})) is None


def test_the_time_is_the_messages_and_now_without_one() -> None:
    extra = {"model": "m", "usage": {"input_tokens": 1, "output_tokens": 1}}
    before = datetime.now(UTC)
    usage = usage_of(_message(ANTHROPIC_EXTRA_KEY, extra, at=None))
    assert usage is not None and usage.at >= before


@pytest.mark.parametrize("junk", ["12", True, -1, 1.5, [3]])
def test_junk_counts_refuse_the_whole_usage(junk: Any) -> None:
    extra = {"model": "m", "usage": {"input_tokens": junk, "output_tokens": 1}}
    with pytest.raises(UnusableUsage):
        usage_of(_message(ANTHROPIC_EXTRA_KEY, extra))
    info = {"last_token_usage": {"input_tokens": 5, "cached_input_tokens": junk}}
    with pytest.raises(UnusableUsage):
        usage_of(_message(USAGE_KEY, info))
    scan = UsageScan()
    assert scan.usage(_message(USAGE_KEY, info)) is None
    assert scan.refused
    assert scan.usage(_message(USAGE_KEY, {"last_token_usage": {"input_tokens": 5}})) is not None
    assert not scan.refused


def test_a_usage_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(UnusableUsage):
        usage_of(_message(ANTHROPIC_EXTRA_KEY, {"model": "m", "usage": "lots"}))
    with pytest.raises(UnusableUsage):
        usage_of(_message(OPEN_WEBUI_MESSAGE_KEY, {"usage": {"prompt_tokens_details": 3}}))
    with pytest.raises(UnusableUsage):
        usage_of(_message(PYDANTIC_AI_MESSAGE_KEY, {"kind": "response", "usage": [1, 2]}))


def test_a_model_name_too_long_for_the_ledger_is_left_out() -> None:
    extra = {"model": "m" * 256, "usage": {"input_tokens": 1, "output_tokens": 1}}
    assert _lanes(usage_of(_message(ANTHROPIC_EXTRA_KEY, extra)))[0] is None


def test_call_ids_are_the_message_ids_and_fit_the_ledger() -> None:
    assert call_id_of("a-0002") == "import:a-0002"
    long = call_id_of("x" * 255)
    assert long.startswith("import:#") and len(long) <= 255
    assert long == call_id_of("x" * 255) != call_id_of("x" * 254 + "y")
