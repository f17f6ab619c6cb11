"""The usage an imported message carries, in the usage ledger's lanes.

Some sources keep, on the assistant message a model call produced, what the provider
reported of that call; their readers keep it in the message's metadata, as the source
wrote it. :func:`usage_of` turns it into a :class:`~store.usage.models.Usage`, whose
``input_tokens`` includes the cache reads and writes and whose ``output_tokens`` the
reasoning, whatever the source's convention:

- Anthropic (Claude Code, the ``anthropic`` format): the ``usage`` beside the message's
  ``model`` under :data:`~store.formats.anthropic.ANTHROPIC_EXTRA_KEY`. Anthropic's
  ``input_tokens`` leaves the cache out: input is ``input_tokens`` +
  ``cache_creation_input_tokens`` + ``cache_read_input_tokens``; cache writes
  ``cache_creation_input_tokens``, cache reads ``cache_read_input_tokens``, output
  ``output_tokens``; no reasoning lane. Claude Code's ``<synthetic>`` messages (written
  by Claude Code itself, no model called) carry none.
- Codex: ``last_token_usage`` of the ``token_count`` ``info`` under
  :data:`~store.importing.readers.codex.USAGE_KEY`, in OpenAI's convention (input
  includes ``cached_input_tokens``, output ``reasoning_output_tokens``); no cache-write
  lane. The model is the one the rollout's newest ``turn_context`` names
  (:class:`UsageScan` follows it).
- Pydantic AI: a response's ``usage`` under
  :data:`~store.formats.pydantic_ai.PYDANTIC_AI_MESSAGE_KEY` (its convention is
  chatledger's): ``input_tokens``, ``output_tokens``, ``cache_read_tokens``,
  ``cache_write_tokens``, reasoning ``output_reasoning_tokens`` else
  ``details.reasoning_tokens``; older releases' ``request_tokens`` and
  ``response_tokens``. The model is ``model_name``.
- Open WebUI: the message's ``usage`` under
  :data:`~store.formats.open_webui.OPEN_WEBUI_MESSAGE_KEY`, OpenAI's
  (``prompt_tokens``, ``completion_tokens``, ``prompt_tokens_details.cached_tokens``,
  ``completion_tokens_details.reasoning_tokens``) or Ollama's (``prompt_eval_count``,
  ``eval_count``); the model is the message's ``model``.

A lane the source does not report (absent or null) is None; a reported 0 stays 0. The
counts are the provider's (``exact``); ``at`` is the message's time when it has one. A
usage holding anything but non-negative integers where counts belong (a string, a
bool, a negative number, a non-object) is refused whole: :func:`usage_of` raises
:class:`UnusableUsage`, and the import skips it with a warning.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from store.errors import ChatledgerError
from store.formats.anthropic import ANTHROPIC_EXTRA_KEY
from store.formats.open_webui import OPEN_WEBUI_MESSAGE_KEY
from store.formats.pydantic_ai import PYDANTIC_AI_MESSAGE_KEY
from store.importing.readers.codex import USAGE_KEY as CODEX_USAGE_KEY
from store.usage.models import Usage
from strategies.messages import Message, OtherContent

__all__ = ["CALL_ID_PREFIX", "UnusableUsage", "UsageScan", "call_id_of", "usage_of"]

CALL_ID_PREFIX = "import:"
"""The ``call_id`` of an imported call is this prefix and its message's id."""

SYNTHETIC_MODEL = "<synthetic>"
"""The model Claude Code names on the messages it writes itself (no model was called)."""


class UnusableUsage(ChatledgerError, ValueError):
    """A message's usage is there, but does not hold counts (the import skips it)."""


_KEY_LENGTH = 255
"""The longest call id and model name the ledger keeps."""


def call_id_of(message_id: str) -> str:
    """The ``call_id`` an import records a message's call under, the same every run:
    :data:`CALL_ID_PREFIX` and the message id, or, for an id too long for the ledger,
    ``import:#`` and a digest of it."""
    call_id = f"{CALL_ID_PREFIX}{message_id}"
    if len(call_id) <= _KEY_LENGTH:
        return call_id
    return f"{CALL_ID_PREFIX}#{hashlib.sha256(message_id.encode()).hexdigest()}"


def usage_of(message: Message, *, model: str | None = None) -> Usage | None:
    """The usage ``message`` carries from its source, in the ledger's lanes; None when
    it carries none. ``model`` names the model where the usage does not (Codex).

    Raises :class:`UnusableUsage` when the usage is there but is not counts."""
    if message.role != "assistant":
        return None
    metadata = message.metadata
    found: dict[str, Any] | None = None
    if ANTHROPIC_EXTRA_KEY in metadata:
        found = _anthropic(metadata[ANTHROPIC_EXTRA_KEY])
    elif CODEX_USAGE_KEY in metadata:
        found = _codex(metadata[CODEX_USAGE_KEY], model)
    elif PYDANTIC_AI_MESSAGE_KEY in metadata:
        found = _pydantic_ai(metadata[PYDANTIC_AI_MESSAGE_KEY])
    elif OPEN_WEBUI_MESSAGE_KEY in metadata:
        found = _open_webui(metadata[OPEN_WEBUI_MESSAGE_KEY])
    if found is None:
        return None
    if message.created_at is not None:
        found["at"] = message.created_at
    return Usage(exact=True, **found)


class UsageScan:
    """:func:`usage_of` over a read's messages in order, following what an earlier
    message says of the later ones' model (Codex's ``turn_context``), a refused usage
    taken as none."""

    def __init__(self) -> None:
        self.model: str | None = None
        self.refused = False
        """Whether the last message's usage was refused (:class:`UnusableUsage`)."""

    def usage(self, message: Message) -> Usage | None:
        """The usage of ``message``; None when it carries none, or one refused (then
        :attr:`refused` is set)."""
        self._follow(message)
        try:
            found = usage_of(message, model=self.model)
        except UnusableUsage:
            self.refused = True
            return None
        self.refused = False
        return found

    def _follow(self, message: Message) -> None:
        if message.role != "system" or len(message.contents) != 1:
            return
        content = message.contents[0]
        if not isinstance(content, OtherContent) or content.kind != "turn_context":
            return
        line = content.payload
        payload = line.get("payload") if isinstance(line, Mapping) else None
        named = payload.get("model") if isinstance(payload, Mapping) else None
        self.model = _model(named)


def _count(fields: Mapping[str, Any], key: str) -> int | None:
    """The count under ``key``: None when absent or null; refused when not a count."""
    value = fields.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UnusableUsage(f"{key} is {value!r}, not a count")
    return value


def _object(value: Any, what: str) -> Mapping[str, Any] | None:
    """``value`` as an object: None when absent; refused when something else."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise UnusableUsage(f"{what} is not an object")
    return value


def _model(value: Any) -> str | None:
    """The model a source names (None: none, or not a name the ledger can keep)."""
    if not isinstance(value, str) or not value or len(value) > _KEY_LENGTH:
        return None
    return value


def _reported(lanes: dict[str, Any]) -> dict[str, Any] | None:
    """The lanes, or None when the usage reports none of them."""
    counts = [v for k, v in lanes.items() if k != "model"]
    return lanes if any(v is not None for v in counts) else None


def _total(first: int | None, *others: int | None) -> int | None:
    """``first`` plus the others reported (None when ``first`` is not reported)."""
    if first is None:
        return None
    return first + sum(o for o in others if o is not None)


def _anthropic(extra: Any) -> dict[str, Any] | None:
    if not isinstance(extra, Mapping) or "usage" not in extra:
        return None
    model = _model(extra.get("model"))
    if model == SYNTHETIC_MODEL:
        return None
    usage = _object(extra["usage"], "usage")
    if usage is None:
        return None
    uncached = _count(usage, "input_tokens")
    writes = _count(usage, "cache_creation_input_tokens")
    reads = _count(usage, "cache_read_input_tokens")
    return _reported(
        {
            "model": model,
            "input_tokens": _total(uncached, writes, reads),
            "output_tokens": _count(usage, "output_tokens"),
            "cache_read_tokens": reads,
            "cache_write_tokens": writes,
        }
    )


def _codex(info: Any, model: str | None) -> dict[str, Any] | None:
    info = _object(info, "info")
    if info is None:
        return None
    last = _object(info.get("last_token_usage"), "last_token_usage")
    if last is None:
        return None
    return _reported(
        {
            "model": model,
            "input_tokens": _count(last, "input_tokens"),
            "output_tokens": _count(last, "output_tokens"),
            "cache_read_tokens": _count(last, "cached_input_tokens"),
            "reasoning_tokens": _count(last, "reasoning_output_tokens"),
        }
    )


def _pydantic_ai(fields: Any) -> dict[str, Any] | None:
    if not isinstance(fields, Mapping) or fields.get("kind", "response") != "response":
        return None
    usage = _object(fields.get("usage"), "usage")
    if usage is None:
        return None
    details = _object(usage.get("details"), "usage.details") or {}
    reasoning = _count(usage, "output_reasoning_tokens")
    if reasoning is None:
        reasoning = _count(details, "reasoning_tokens")
    newer = "input_tokens" in usage or "output_tokens" in usage
    return _reported(
        {
            "model": _model(fields.get("model_name")),
            "input_tokens": _count(usage, "input_tokens" if newer else "request_tokens"),
            "output_tokens": _count(usage, "output_tokens" if newer else "response_tokens"),
            "cache_read_tokens": _count(usage, "cache_read_tokens"),
            "cache_write_tokens": _count(usage, "cache_write_tokens"),
            "reasoning_tokens": reasoning,
        }
    )


def _open_webui(fields: Any) -> dict[str, Any] | None:
    if not isinstance(fields, Mapping):
        return None
    usage = _object(fields.get("usage"), "usage")
    if usage is None:
        return None
    prompt = _object(usage.get("prompt_tokens_details"), "prompt_tokens_details") or {}
    completion = _object(usage.get("completion_tokens_details"), "completion_tokens_details") or {}
    openai = "prompt_tokens" in usage or "completion_tokens" in usage
    return _reported(
        {
            "model": _model(fields.get("model")),
            "input_tokens": _count(usage, "prompt_tokens" if openai else "prompt_eval_count"),
            "output_tokens": _count(usage, "completion_tokens" if openai else "eval_count"),
            "cache_read_tokens": _count(prompt, "cached_tokens"),
            "reasoning_tokens": _count(completion, "reasoning_tokens"),
        }
    )
