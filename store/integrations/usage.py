"""What each framework reports of a model call's usage, as a :class:`~store.usage.Usage`.

The adapters record every model call through their provider
(:meth:`~store.provider.TwoPhaseProvider.record_usage`); the conversions live here, free
of any framework import (they read the framework's objects by their names), so that
they can be tested alone.

The meaning of :class:`~store.usage.Usage` is the same whatever the framework:
``input_tokens`` includes the cache reads and writes, ``output_tokens`` includes the
reasoning, and a lane is None where the framework does not report it (a reported 0
stays 0). Each framework's own convention, and what is done with it:

- Agent Framework (``ChatResponse.usage_details``, a ``UsageDetails`` mapping):
  ``input_token_count`` is already the whole input (its clients add the cache tokens to
  it), ``output_token_count`` the whole output. The cache and reasoning lanes are the
  standard keys (``cache_read_input_token_count``, ``cache_creation_input_token_count``,
  ``reasoning_output_token_count``), else the provider-named keys the framework's
  telemetry reads (``anthropic.cache_read_input_tokens``,
  ``openai.cached_input_tokens``, ``openai.reasoning_tokens``, ...).
- OpenAI Agents SDK (a ``RequestUsage`` of ``Usage.request_usage_entries``): the
  Responses API's meaning, which is ours (``input_tokens`` includes
  ``input_tokens_details.cached_tokens``, ``output_tokens`` includes
  ``output_tokens_details.reasoning_tokens``). The SDK fills a detail the provider left
  out with 0, so its lanes are never None; ``cache_write_tokens`` is None with an
  ``openai`` package that has no such field.
- LangChain (``AIMessage.usage_metadata``, a ``UsageMetadata`` mapping): LangChain's
  meaning is ours too (``input_tokens`` is the sum of every input token type);
  ``input_token_details`` gives ``cache_read`` and ``cache_creation``,
  ``output_token_details`` gives ``reasoning``. The model is the message's
  ``response_metadata["model_name"]`` (or ``["model"]``).
- Pydantic AI (``ModelResponse.usage``, a ``RequestUsage``): its meaning is ours
  (``input_tokens`` includes the cache reads and writes, ``output_tokens`` the
  reasoning, ``details["reasoning_tokens"]`` when the provider gives it); a request it
  reports as unmeasured, or with no tokens either way, reports no usage.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from store.errors import InvalidInput
from store.provider import TwoPhaseProvider
from store.usage.models import Usage

__all__ = [
    "langchain_model",
    "record_call",
    "usage_from_agent_framework",
    "usage_from_langchain",
    "usage_from_openai_agents",
    "usage_from_pydantic_ai",
]

logger = logging.getLogger("chatledger.integrations")

_AF_CACHE_READ = (
    "cache_read_input_token_count",
    "anthropic.cache_read_input_tokens",
    "openai.cached_input_tokens",
    "prompt/cached_tokens",
)
_AF_CACHE_WRITE = (
    "cache_creation_input_token_count",
    "anthropic.cache_creation_input_tokens",
    "openai.cache_write_tokens",
    "prompt/cache_write_tokens",
)
_AF_REASONING = (
    "reasoning_output_token_count",
    "openai.reasoning_tokens",
    "completion/reasoning_tokens",
    "reasoning_tokens",
)


def _count(value: object) -> int | None:
    """A reported count: a non-negative int (a bool is not one), else None."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _first(details: Mapping[str, Any], keys: tuple[str, ...]) -> int | None:
    for key in keys:
        found = _count(details.get(key))
        if found is not None:
            return found
    return None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _usage(model: str | None, **lanes: int | None) -> Usage | None:
    """The usage of the lanes, or None when no lane was reported."""
    if all(value is None for value in lanes.values()):
        return None
    return Usage(model=model, exact=True, **lanes)


def usage_from_agent_framework(
    details: Mapping[str, Any] | None, *, model: str | None = None
) -> Usage | None:
    """The usage of an Agent Framework ``UsageDetails`` (see the module docstring);
    None when it reports no lane. ``model`` is the response's ``model``."""
    if not details:
        return None
    return _usage(
        _text(model),
        input_tokens=_count(details.get("input_token_count")),
        output_tokens=_count(details.get("output_token_count")),
        cache_read_tokens=_first(details, _AF_CACHE_READ),
        cache_write_tokens=_first(details, _AF_CACHE_WRITE),
        reasoning_tokens=_first(details, _AF_REASONING),
    )


def usage_from_openai_agents(entry: object, *, model: str | None = None) -> Usage | None:
    """The usage of one OpenAI Agents SDK request (a ``RequestUsage``, or a ``Usage`` of
    one request); None when it reports no lane. The SDK does not say which model
    answered a request: give ``model`` when it is known."""
    if entry is None:
        return None
    input_details = getattr(entry, "input_tokens_details", None)
    output_details = getattr(entry, "output_tokens_details", None)
    return _usage(
        _text(model),
        input_tokens=_count(getattr(entry, "input_tokens", None)),
        output_tokens=_count(getattr(entry, "output_tokens", None)),
        cache_read_tokens=_count(getattr(input_details, "cached_tokens", None)),
        cache_write_tokens=_count(getattr(input_details, "cache_write_tokens", None)),
        reasoning_tokens=_count(getattr(output_details, "reasoning_tokens", None)),
    )


def usage_from_langchain(
    metadata: Mapping[str, Any] | None, *, model: str | None = None
) -> Usage | None:
    """The usage of a LangChain ``UsageMetadata`` (see the module docstring); None when
    it reports no lane. ``model`` is the message's model name."""
    if not metadata:
        return None
    inputs = metadata.get("input_token_details")
    outputs = metadata.get("output_token_details")
    inputs = inputs if isinstance(inputs, Mapping) else {}
    outputs = outputs if isinstance(outputs, Mapping) else {}
    return _usage(
        _text(model),
        input_tokens=_count(metadata.get("input_tokens")),
        output_tokens=_count(metadata.get("output_tokens")),
        cache_read_tokens=_count(inputs.get("cache_read")),
        cache_write_tokens=_count(inputs.get("cache_creation")),
        reasoning_tokens=_count(outputs.get("reasoning")),
    )


def usage_from_pydantic_ai(
    usage: object, *, model: str | None = None, at: datetime | None = None
) -> Usage | None:
    """The usage of one Pydantic AI model request (``ModelResponse.usage``, a
    ``RequestUsage``) made at ``at`` (None: now); None when it reports none (no tokens
    either way, or ``unmeasured_requests``)."""
    if usage is None or getattr(usage, "unmeasured_requests", None):
        return None
    input_tokens = _count(getattr(usage, "input_tokens", None))
    output_tokens = _count(getattr(usage, "output_tokens", None))
    if not (input_tokens or output_tokens):
        return None
    details = getattr(usage, "details", None) or {}
    reasoning = details.get("reasoning_tokens") if isinstance(details, Mapping) else None
    when = {} if at is None else {"at": at}
    return Usage(
        model=model or None,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cache_read_tokens=_count(getattr(usage, "cache_read_tokens", None)),
        cache_write_tokens=_count(getattr(usage, "cache_write_tokens", None)),
        reasoning_tokens=reasoning if isinstance(reasoning, int) and reasoning >= 0 else None,
        **when,
    )


def langchain_model(response_metadata: Mapping[str, Any] | None) -> str | None:
    """The model a LangChain message's ``response_metadata`` names, if any."""
    if not response_metadata:
        return None
    return _text(response_metadata.get("model_name")) or _text(response_metadata.get("model"))


async def record_call(
    phases: TwoPhaseProvider,
    session_id: str,
    usage: Usage,
    *,
    message_id: str | None,
    call_id: str | None,
) -> bool:
    """Record one call's usage through ``phases`` (a
    :class:`~store.provider.TwoPhaseProvider`); False when it was not recorded.

    A backend that does not implement the usage ledger yet (its ``record_usage`` raises
    :class:`~store.errors.InvalidInput`, "not supported"), or refuses the call, records
    nothing: what a call cost is bookkeeping, and must not fail the agent's run. Each
    distinct refusal is logged once, as a warning (else every model call would log it).
    """
    try:
        return await phases.record_usage(session_id, usage, message_id=message_id, call_id=call_id)
    except InvalidInput as error:
        reason = str(error)
        if reason not in _WARNED and len(_WARNED) < _WARNED_KEPT:
            _WARNED.add(reason)
            logger.warning("model call usage not recorded (session %s): %s", session_id, reason)
        return False


_WARNED: set[str] = set()
"""The refusals :func:`record_call` logged already."""

_WARNED_KEPT = 64
"""How many distinct refusals are logged (in a process)."""
