"""Summarizers: the transcript, the adapters and the fake."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from strategies.messages import (
    DataContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    OtherContent,
    ReasoningContent,
    TextContent,
)
from strategies.summarizers import (
    AgentFrameworkSummarizer,
    FakeSummarizer,
    FakeSummarizerError,
    OpenAICompatibleSummarizer,
    Summarizer,
    fake_summary,
    format_transcript,
)

CONVERSATION = [
    Message.text_message("user", "what is the weather in Paris today"),
    Message(
        role="assistant",
        contents=[
            TextContent(text="Let me check."),
            FunctionCallContent(call_id="c1", name="weather", arguments={"city": "Paris"}),
        ],
    ),
    Message(
        role="tool",
        contents=[FunctionResultContent(call_id="c1", result="sunny, 21°C", is_error=False)],
    ),
    Message(
        role="tool", contents=[FunctionResultContent(call_id="c2", result=None, is_error=True)]
    ),
    Message(role="assistant", contents=[ReasoningContent(text="hidden"), DataContent(data="AA==")]),
    Message(
        role="assistant",
        contents=[
            OtherContent(kind="mcp_call", payload={"tool": "t"}, call_id="h1", pairing="call")
        ],
    ),
]


def test_transcript_lines() -> None:
    lines = format_transcript(CONVERSATION).splitlines()
    assert lines == [
        "1. [user] what is the weather in Paris today",
        '2. [assistant] Let me check.; function_call weather({"city": "Paris"}) [call_id=c1]',
        "3. [tool] function_result: sunny, 21°C [call_id=c1]",
        "4. [tool] function_result: error: no result [call_id=c2]",
        "5. [assistant] reasoning, data",
        '6. [assistant] mcp_call: {"tool": "t"} [call_id=h1]',
    ]


def test_fake_summary_counts_messages_and_takes_first_words() -> None:
    transcript = format_transcript(
        [
            Message.text_message("user", "one two three four\n7. not a new message"),
            Message.text_message("assistant", "five six"),
        ]
    )
    assert fake_summary(transcript) == "Summary of 2 messages: one two three | five six"
    assert fake_summary(transcript, words=1) == "Summary of 2 messages: one | five"
    assert fake_summary("") == "Summary of 0 messages: "


async def test_fake_is_deterministic_and_records_calls() -> None:
    fake = FakeSummarizer()
    assert isinstance(fake, Summarizer)
    first = await fake.summarize(CONVERSATION, prompt="p")
    second = await fake.summarize(CONVERSATION, prompt="q")
    assert first == second == fake_summary(format_transcript(CONVERSATION))
    assert [(len(m), p) for m, p in fake.calls] == [(6, "p"), (6, "q")]


async def test_fake_failure_modes() -> None:
    fake = FakeSummarizer(fail="error")
    with pytest.raises(FakeSummarizerError):
        await fake.summarize(CONVERSATION, prompt="p")
    fake.fail = "empty"
    assert await fake.summarize(CONVERSATION, prompt="p") == ""
    fake.fail = "never"
    assert await fake.summarize(CONVERSATION, prompt="p")


async def test_fake_delay_yields_to_the_event_loop() -> None:
    fake = FakeSummarizer(delay=0.01)
    task = asyncio.create_task(fake.summarize(CONVERSATION, prompt="p"))
    await asyncio.sleep(0)
    assert not task.done()  # suspended in asyncio.sleep, other tasks run meanwhile
    assert (await task).startswith("Summary of 6 messages")


class RecordingChatClient:
    """An Agent Framework-like chat client that records its requests."""

    def __init__(self, text: str | None) -> None:
        self.text = text
        self.requests: list[tuple[list[Any], dict[str, Any]]] = []

    async def get_response(self, messages: list[Any], **kwargs: Any) -> Any:
        self.requests.append((messages, kwargs))
        return SimpleNamespace(text=self.text)


async def test_agent_framework_adapter_sends_prompt_and_transcript() -> None:
    pytest.importorskip("agent_framework")
    client = RecordingChatClient("  the summary \n")
    summarizer = AgentFrameworkSummarizer(client)
    assert isinstance(summarizer, Summarizer)
    assert await summarizer.summarize(CONVERSATION, prompt="be short") == "the summary"
    (request, kwargs), *_ = client.requests
    assert [(m.role, m.text) for m in request] == [
        ("system", "be short"),
        ("user", format_transcript(CONVERSATION)),
    ]
    assert kwargs == {"stream": False}
    client.text = None
    assert await summarizer.summarize(CONVERSATION, prompt="p") == ""


async def test_fake_answers_like_an_agent_framework_chat_client() -> None:
    pytest.importorskip("agent_framework")
    summarizer = AgentFrameworkSummarizer(FakeSummarizer())
    text = await summarizer.summarize(CONVERSATION, prompt="p")
    assert text == fake_summary(format_transcript(CONVERSATION))


def test_agent_framework_adapter_rejects_other_objects() -> None:
    with pytest.raises(TypeError, match="get_response"):
        AgentFrameworkSummarizer(object())


class FakeCompletions:
    def __init__(self, content: str | None, *, choices: bool = True) -> None:
        self.content = content
        self.choices = choices
        self.kwargs: list[dict[str, Any]] = []

    async def create(self, **kwargs: Any) -> Any:
        self.kwargs.append(kwargs)
        if not self.choices:
            return SimpleNamespace(choices=[])
        message = SimpleNamespace(content=self.content)
        return SimpleNamespace(choices=[SimpleNamespace(message=message)])


def openai_like(completions: FakeCompletions) -> Any:
    return SimpleNamespace(chat=SimpleNamespace(completions=completions))


async def test_openai_adapter_sends_chat_completion() -> None:
    completions = FakeCompletions(" summary text ")
    summarizer = OpenAICompatibleSummarizer(
        openai_like(completions), model="gpt-test", options={"temperature": 0}
    )
    assert await summarizer.summarize(CONVERSATION, prompt="be short") == "summary text"
    assert completions.kwargs == [
        {
            "model": "gpt-test",
            "messages": [
                {"role": "system", "content": "be short"},
                {"role": "user", "content": format_transcript(CONVERSATION)},
            ],
            "temperature": 0,
        }
    ]


async def test_openai_adapter_without_text_returns_empty() -> None:
    assert (
        await OpenAICompatibleSummarizer(openai_like(FakeCompletions(None)), model="m").summarize(
            CONVERSATION, prompt="p"
        )
        == ""
    )
    assert (
        await OpenAICompatibleSummarizer(
            openai_like(FakeCompletions("x", choices=False)), model="m"
        ).summarize(CONVERSATION, prompt="p")
        == ""
    )
