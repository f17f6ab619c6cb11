"""Summarizers: the one piece of compaction that talks to a model.

:class:`Summarizer` is the contract :class:`~strategies.summarization.SummarizationStrategy`
needs: ``async summarize(messages, *, prompt) -> str``. A summarizer that also accepts
a ``focus`` keyword (``str | None``) is given what a requested compaction asked the
summary to keep (:func:`strategies.requested.requested`). Three implementations ship,
all accepting ``focus``:

* :class:`AgentFrameworkSummarizer` wraps an Agent Framework chat client (anything with
  ``get_response``); ``agent_framework`` is imported only when a summary is asked for.
* :class:`OpenAICompatibleSummarizer` wraps an ``openai.AsyncOpenAI``-like client
  (``client.chat.completions.create(...)``), duck-typed: ``openai`` is never imported.
* :class:`FakeSummarizer` is deterministic and needs no model: for tests and demos.

The adapters send the prompt as a system message and the conversation as one user
message, a numbered transcript (:func:`format_transcript`): one line per message,
``N. [role] content``, with tool calls as ``function_call name(arguments) [call_id=...]``
and results as ``function_result: text [call_id=...]``, the same shape Agent Framework
sends its summarizer.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from strategies.errors import ChatledgerError
from strategies.messages import (
    Content,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    OtherContent,
    TextContent,
)

__all__ = [
    "AgentFrameworkSummarizer",
    "FakeSummarizer",
    "FakeSummarizerError",
    "OpenAICompatibleSummarizer",
    "Summarizer",
    "accepts_focus",
    "fake_summary",
    "focused_prompt",
    "format_transcript",
]


@runtime_checkable
class Summarizer(Protocol):
    """Turns messages into a summary text. Raising or returning ``""`` means failure."""

    async def summarize(self, messages: Sequence[Message], *, prompt: str) -> str:
        """Summarize ``messages`` following the instruction ``prompt``."""
        ...


# --------------------------------------------------------------------------- transcript


def _value_text(value: Any) -> str:
    """A tool argument or result as text: strings as they are, other JSON as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = [
            item["text"]
            for item in value
            if isinstance(item, Mapping)
            and item.get("type") == "text"
            and isinstance(item.get("text"), str)
        ]
        if texts:
            return "\n".join(texts)
    return json.dumps(value, ensure_ascii=False, default=str)


def _call_id_suffix(call_id: str | None) -> str:
    return f" [call_id={call_id}]" if call_id else ""


def _render_content(content: Content) -> str:
    """One structured content as transcript text; ``""`` for text and unrendered kinds."""
    if isinstance(content, FunctionCallContent):
        arguments = "" if content.arguments is None else _value_text(content.arguments)
        return f"function_call {content.name}({arguments}){_call_id_suffix(content.call_id)}"
    if isinstance(content, FunctionResultContent):
        text = "no result" if content.result is None else _value_text(content.result)
        if content.is_error:
            text = f"error: {text}"
        return f"function_result: {text}{_call_id_suffix(content.call_id)}"
    if isinstance(content, OtherContent) and content.pairing != "none":
        payload = _value_text(content.payload) if content.payload else ""
        return f"{content.kind}: {payload}{_call_id_suffix(content.call_id)}"
    return ""


def format_message(index: int, message: Message) -> str:
    """One transcript line: ``index. [role] content``."""
    parts: list[str] = []
    texts: list[str] = []
    for content in message.contents:
        rendered = _render_content(content)
        if rendered:
            if texts:
                parts.append(" ".join(texts))
                texts = []
            parts.append(rendered)
        elif isinstance(content, TextContent) and content.text:
            texts.append(content.text)
    if texts:
        parts.append(" ".join(texts))
    body = "; ".join(parts) or ", ".join(c.type for c in message.contents)
    return f"{index}. [{message.role}] {body}"


def format_transcript(messages: Sequence[Message]) -> str:
    """The numbered transcript the adapters send as the user message."""
    return "\n".join(format_message(i, m) for i, m in enumerate(messages, start=1))


def focused_prompt(prompt: str, focus: str | None) -> str:
    """``prompt`` with what a requested compaction asked the summary to keep, if any."""
    if focus is None or not focus.strip():
        return prompt
    return f"{prompt}\n\nKeep in the summary above all: {focus.strip()}"


def accepts_focus(summarizer: object) -> bool:
    """Whether ``summarizer.summarize`` takes a ``focus`` keyword (or any keyword)."""
    try:
        parameters = inspect.signature(summarizer.summarize).parameters  # type: ignore[attr-defined]
    except (AttributeError, TypeError, ValueError):
        return False
    return "focus" in parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
    )


# --------------------------------------------------------------------------- adapters


class AgentFrameworkSummarizer:
    """Summarize with an Agent Framework chat client (anything with ``get_response``)."""

    def __init__(self, chat_client: Any, /) -> None:
        if not callable(getattr(chat_client, "get_response", None)):
            raise TypeError(
                f"{type(chat_client).__qualname__} has no get_response method; "
                "pass an Agent Framework chat client"
            )
        self.chat_client = chat_client

    async def summarize(
        self, messages: Sequence[Message], *, prompt: str, focus: str | None = None
    ) -> str:
        """Send the prompt (with ``focus``, when given) and the transcript; return the
        response text, stripped."""
        try:
            from agent_framework import Message as AFMessage
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                "AgentFrameworkSummarizer needs agent-framework-core: "
                "pip install 'chatledger[agent-framework]'"
            ) from exc
        request = [
            AFMessage(role="system", contents=[focused_prompt(prompt, focus)]),
            AFMessage(role="user", contents=[format_transcript(messages)]),
        ]
        response = await self.chat_client.get_response(request, stream=False)
        text = getattr(response, "text", None)
        return text.strip() if isinstance(text, str) else ""


class OpenAICompatibleSummarizer:
    """Summarize with an ``openai.AsyncOpenAI``-like client's chat completions."""

    def __init__(
        self, client: Any, /, *, model: str, options: Mapping[str, Any] | None = None
    ) -> None:
        self.client = client
        self.model = model
        self.options: dict[str, Any] = dict(options or {})
        """Extra keyword arguments for ``chat.completions.create`` (temperature, ...)."""

    async def summarize(
        self, messages: Sequence[Message], *, prompt: str, focus: str | None = None
    ) -> str:
        """Send the prompt (with ``focus``, when given) and the transcript; return the
        first choice's text, stripped."""
        response = await self.client.chat.completions.create(
            model=self.model,
            messages=[
                {"role": "system", "content": focused_prompt(prompt, focus)},
                {"role": "user", "content": format_transcript(messages)},
            ],
            **self.options,
        )
        choices = getattr(response, "choices", None) or []
        if not choices:
            return ""
        content = getattr(getattr(choices[0], "message", None), "content", None)
        return content.strip() if isinstance(content, str) else ""


# --------------------------------------------------------------------------- fake

_LINE_START = re.compile(r"^\d+\. \[[^\]]*\] ?", re.MULTILINE)

FailMode = Literal["never", "error", "empty"]


class FakeSummarizerError(ChatledgerError, RuntimeError):
    """Raised by :class:`FakeSummarizer` in ``fail="error"`` mode."""


def fake_summary(transcript: str, *, words: int = 3) -> str:
    """The fake's summary of a transcript: message count and first words of each message.

    ``"Summary of 2 messages: hello there | sure, here"``. A function of the transcript
    alone, so that the Agent Framework side and this side agree on the same input.
    """
    starts = list(_LINE_START.finditer(transcript))
    heads: list[str] = []
    for i, match in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(transcript)
        heads.append(" ".join(transcript[match.end() : end].split()[:words]))
    return f"Summary of {len(starts)} messages: " + " | ".join(heads)


class FakeSummarizer:
    """A deterministic summarizer (see :func:`fake_summary`), with failure modes.

    ``delay`` awaits ``asyncio.sleep(delay)`` before answering (for concurrency tests);
    ``fail="error"`` raises :class:`FakeSummarizerError`, ``fail="empty"`` returns ``""``.
    Both can be changed between calls. Every call is recorded in :attr:`calls`. It also
    answers ``get_response`` like an Agent Framework chat client, so that the reference's
    own strategy can be run with the same summaries.
    """

    def __init__(self, *, delay: float = 0.0, fail: FailMode = "never", words: int = 3) -> None:
        self.delay = delay
        self.fail: FailMode = fail
        self.words = words
        self.calls: list[tuple[list[Message], str]] = []
        """The messages and prompt of each :meth:`summarize` call, in order (the prompt
        with its focus, when one was given)."""
        self.additional_properties: dict[str, Any] = {}

    async def _answer(self, transcript: str) -> str:
        if self.delay > 0:
            await asyncio.sleep(self.delay)
        if self.fail == "error":
            raise FakeSummarizerError("fake summarizer failure")
        if self.fail == "empty":
            return ""
        return fake_summary(transcript, words=self.words)

    async def summarize(
        self, messages: Sequence[Message], *, prompt: str, focus: str | None = None
    ) -> str:
        """Summarize ``messages`` (recorded in :attr:`calls`, the prompt with ``focus``)."""
        self.calls.append((list(messages), focused_prompt(prompt, focus)))
        return await self._answer(format_transcript(messages))

    async def get_response(self, messages: Sequence[Any], **kwargs: Any) -> Any:
        """Agent Framework face: summarize the last message's text; a ``ChatResponse``."""
        from agent_framework import ChatResponse
        from agent_framework import Message as AFMessage

        transcript = str(getattr(messages[-1], "text", "") or "") if messages else ""
        text = await self._answer(transcript)
        return ChatResponse(messages=[AFMessage(role="assistant", contents=[text])])
