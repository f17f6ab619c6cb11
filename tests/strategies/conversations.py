"""Conversations for strategy tests: a hypothesis generator and a bridge to Agent Framework.

:func:`chats` draws conversations made of turns: a user request, then assistant text,
tool-call groups (reasoning before the calls, text beside them, one to three parallel
calls, results in one tool message or one each, short, non-ASCII, JSON or huge
results), with optionally a system prompt, a pending call at the end (the in-flight
tail), and, unless ``aligned=True``, orphan results and stale pending calls (calls left
unanswered before a later user message). ``aligned=True`` conversations are the ones
Agent Framework groups exactly as chatledger does (the differential tests use them).

:func:`to_reference` converts messages to Agent Framework's ``Message`` type.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st
from pydantic import JsonValue

from strategies.base import CompactionStrategy
from strategies.changeset import ChangeSet
from strategies.messages import (
    Content,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    ReasoningContent,
    TextContent,
)
from strategies.view import View
from tests.strategies.invariants import assert_invariants

__all__ = [
    "Chat",
    "ViewCounts",
    "calls",
    "chats",
    "plan_and_project",
    "results",
    "say",
    "to_reference",
    "turns",
]


def say(role: str, message_id: str, text: str = "") -> Message:
    """A one-text message with an explicit id (text defaults to the id)."""
    return Message(
        role=role, contents=[TextContent(text=text or message_id)], message_id=message_id
    )


def calls(message_id: str, *call_ids: str, text: str | None = None) -> Message:
    """An assistant message with calls to ``get_weather`` (and text beside them, if given)."""
    contents: list[Content] = [TextContent(text=text)] if text else []
    contents += [FunctionCallContent(call_id=c, name="get_weather") for c in call_ids]
    return Message(role="assistant", contents=contents, message_id=message_id)


def results(message_id: str, *pairs: tuple[str, JsonValue]) -> Message:
    """A tool message answering ``(call_id, result)`` pairs."""
    contents: list[Content] = [FunctionResultContent(call_id=c, result=r) for c, r in pairs]
    return Message(role="tool", contents=contents, message_id=message_id)


def turns(count: int, *, system: bool = True, tools: bool = True) -> list[Message]:
    """``count`` turns: user ``u<i>``, optionally a call ``c<i>`` and result ``r<i>``,
    then assistant text ``a<i>``; after a system prompt ``s`` when ``system``."""
    out = [say("system", "s", "Be brief.")] if system else []
    for i in range(count):
        out.append(say("user", f"u{i}", f"question {i}"))
        if tools:
            out.append(calls(f"c{i}", f"k{i}"))
            out.append(results(f"r{i}", (f"k{i}", f"result {i}")))
        out.append(say("assistant", f"a{i}", f"answer {i}"))
    return out


_WORDS = st.sampled_from(
    ["ok", "sunny", "18°C", "naïve café", "東京", "Привет", "🙂 done", "a; b", " padded "]
)
_TEXT = st.lists(_WORDS, min_size=1, max_size=4).map(" ".join)
_NAMES = st.sampled_from(["get_weather", "search", "lookup", "計算"])


@dataclass
class Chat:
    """A generated conversation and the groups a test may pin."""

    messages: list[Message]
    pin: list[str] = field(default_factory=list)
    """Message ids whose groups are pinned (``group_<id>``)."""

    @property
    def pinned_groups(self) -> list[str]:
        """Group ids to pin."""
        return [f"group_{m}" for m in self.pin]


class _Builder:
    def __init__(self, draw: Any, aligned: bool) -> None:
        self.draw = draw
        self.aligned = aligned
        self.messages: list[Message] = []
        self.calls = 0

    def add(self, role: str, contents: list[Content]) -> str:
        message_id = f"m{len(self.messages)}"
        self.messages.append(Message(role=role, contents=contents, message_id=message_id))
        return message_id

    def result_value(self) -> JsonValue:
        kind = self.draw(st.sampled_from(["text", "text", "text", "json", "huge"]))
        if kind == "json":
            return {"value": self.draw(_TEXT), "n": self.draw(st.integers(0, 99))}
        if kind == "huge":
            return str(self.draw(_TEXT)) * int(self.draw(st.integers(200, 900)))
        return str(self.draw(_TEXT))

    def call_group(self, *, answered: bool) -> None:
        draw = self.draw
        if draw(st.booleans()):
            self.add("assistant", [ReasoningContent(text=draw(_TEXT))])
        ids = []
        contents: list[Content] = []
        if draw(st.booleans()):
            contents.append(TextContent(text=draw(_TEXT)))
        for _ in range(draw(st.integers(1, 3))):
            self.calls += 1
            ids.append(f"call_{self.calls}")
            contents.append(
                FunctionCallContent(call_id=ids[-1], name=draw(_NAMES), arguments={"q": "ü"})
            )
        self.add("assistant", contents)
        if not answered:
            return
        results = [FunctionResultContent(call_id=i, result=self.result_value()) for i in ids]
        if draw(st.booleans()):
            self.add("tool", list(results))
        else:
            for one in results:
                self.add("tool", [one])

    def turn(self) -> None:
        draw = self.draw
        self.add("user", [TextContent(text=draw(_TEXT))])
        for step in draw(st.lists(st.sampled_from(["text", "calls", "calls", "odd"]), max_size=4)):
            if step == "text":
                self.add("assistant", [TextContent(text=draw(_TEXT))])
            elif step == "calls":
                self.call_group(answered=True)
            elif not self.aligned:
                self.oddity()

    def oddity(self) -> None:
        if self.draw(st.booleans()):
            self.add("tool", [FunctionResultContent(call_id="nobody", result="orphan")])
        else:
            self.call_group(answered=False)  # stale once a later user message comes


@st.composite
def chats(draw: Any, *, aligned: bool = False, max_turns: int = 6) -> Chat:
    """A conversation (see the module docstring), with some groups to pin unless aligned."""
    b = _Builder(draw, aligned)
    if draw(st.integers(0, 3)) > 0:
        b.add("system", [TextContent(text="You are terse. " + draw(_TEXT))])
    if not aligned and draw(st.booleans()):
        b.add("assistant", [TextContent(text="Hello! " + draw(_TEXT))])
    for _ in range(draw(st.integers(0, max_turns))):
        b.turn()
    if draw(st.integers(0, 3)) == 0:
        b.call_group(answered=False)  # the in-flight tail
    pin: list[str] = []
    if not aligned and b.messages:
        starts = [m.message_id for m in b.messages if m.role in ("system", "user")]
        pin = draw(st.lists(st.sampled_from(starts), max_size=2, unique=True)) if starts else []
    return Chat(messages=b.messages, pin=pin)


def _reference_content(content: Content) -> Any:
    from agent_framework import Content as RefContent

    if isinstance(content, TextContent):
        return RefContent.from_text(content.text)
    if isinstance(content, ReasoningContent):
        return RefContent.from_text_reasoning(text=content.text)
    if isinstance(content, FunctionCallContent):
        return RefContent.from_function_call(
            content.call_id, content.name, arguments=content.arguments
        )
    if isinstance(content, FunctionResultContent):
        return RefContent.from_function_result(content.call_id, result=content.result)
    raise TypeError(f"no reference conversion for {type(content).__name__}")


def to_reference(messages: list[Message]) -> list[Any]:
    """The same messages as Agent Framework ``Message`` objects (same ids)."""
    from agent_framework import Message as RefMessage

    return [
        RefMessage(
            role=m.role,
            contents=[_reference_content(c) for c in m.contents],
            message_id=m.message_id,
        )
        for m in messages
    ]


async def plan_and_project(
    strategy: CompactionStrategy,
    messages: list[Message] | View,
    *,
    pinned: tuple[str, ...] = (),
    system_may_go: bool = False,
) -> tuple[ChangeSet, list[str]]:
    """Plan on a view of ``messages``, check the invariants, return the change set and the
    ids of the messages the projection sends."""
    view = messages if isinstance(messages, View) else View.from_messages(messages, pinned=pinned)
    changes = await strategy.plan(view)
    after = await assert_invariants(view, changes, strategy=strategy, system_may_go=system_may_go)
    return changes, [m.message_id for m in await after.project()]


class ViewCounts:
    """A reference tokenizer that counts each message as the view cached it."""

    def __init__(self, view: View, extra: Sequence[Message] = ()) -> None:
        self.view = view
        self.counts: dict[str, int] = {}
        self.extra = list(extra)

    async def load(self) -> ViewCounts:
        for messages in (await self.view.messages()).values():
            for message in messages:
                self.counts[message.message_id] = self.view.count(message)
        for message in self.extra:
            self.counts[message.message_id] = self.view.count(message)
        return self

    def count_tokens(self, text: str) -> int:
        data = json.loads(text)
        if data["message_id"] in self.counts:
            return self.counts[data["message_id"]]
        texts = [c.get("text", "") for c in data["contents"] if c.get("type") == "text"]
        return self.view.count(
            Message(role=data["role"], contents=[TextContent(text="".join(texts))])
        )
