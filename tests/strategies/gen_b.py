"""Hypothesis generators of conversations and views (summaries, pipelines, reductions).

A conversation is a list of :class:`Message` built from random steps: system prompts,
user and assistant text (some non-ASCII), tool rounds with one to three parallel calls
(results in one message or several, sometimes after reasoning, sometimes huge),
orphan results and pending calls. Message ids are ``m<index>``, so that the same draw
always gives the same conversation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from strategies.messages import (
    FunctionCallContent,
    FunctionResultContent,
    Message,
    ReasoningContent,
    TextContent,
)
from strategies.view import View

TOOLS = ("search", "fetch", "calc")
WORDS = ("alpha", "beta", "gamma", "delta", "héllo", "数据", "naïve", "ok", "done", "🙂")

Draw = Callable[[st.SearchStrategy[Any]], Any]


class _Builder:
    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.calls = 0

    def next_id(self) -> str:
        return f"m{len(self.messages)}"

    def add(self, role: str, contents: list[Any]) -> None:
        self.messages.append(Message(role=role, contents=contents, message_id=self.next_id()))

    def call_id(self) -> str:
        self.calls += 1
        return f"c{self.calls}"


def _text(draw: Draw, low: int = 1, high: int = 8) -> str:
    return " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=low, max_size=high)))


def _tool_round(draw: Draw, builder: _Builder, *, answered: bool) -> None:
    count = draw(st.integers(1, 3))
    calls = [
        FunctionCallContent(
            call_id=builder.call_id(), name=draw(st.sampled_from(TOOLS)), arguments={"q": "x"}
        )
        for _ in range(count)
    ]
    if draw(st.booleans()):
        builder.add("assistant", [ReasoningContent(text=_text(draw))])
    lead: list[Any] = [TextContent(text=_text(draw))] if draw(st.booleans()) else []
    builder.add("assistant", [*lead, *calls])
    if not answered:
        return
    huge = draw(st.booleans())
    results = [
        FunctionResultContent(
            call_id=c.call_id,
            result=_text(draw) * (200 if huge else 1),
            is_error=draw(st.booleans()),
        )
        for c in calls
    ]
    if draw(st.booleans()):
        builder.add("tool", list(results))
    else:
        for result in results:
            builder.add("tool", [result])


@st.composite
def conversations(draw: Draw, *, max_steps: int = 14) -> list[Message]:
    """A random conversation (possibly starting with a system prompt)."""
    builder = _Builder()
    if draw(st.booleans()):
        builder.add("system", [TextContent(text="You are helpful. " + _text(draw))])
    steps = draw(
        st.lists(
            st.sampled_from(
                ["user", "user", "assistant", "tools", "tools", "system", "orphan", "pending"]
            ),
            min_size=1,
            max_size=max_steps,
        )
    )
    for step in steps:
        if step in ("user", "assistant", "system"):
            builder.add(step, [TextContent(text=_text(draw))])
        elif step == "tools":
            _tool_round(draw, builder, answered=True)
        elif step == "pending":
            _tool_round(draw, builder, answered=False)
        else:
            builder.add("tool", [FunctionResultContent(call_id="nobody", result=_text(draw))])
    return builder.messages


@st.composite
def views(draw: Draw, *, max_steps: int = 14, pinned: bool = True) -> View:
    """A view of a random conversation, with some groups pinned when ``pinned``."""
    messages = draw(conversations(max_steps=max_steps))
    view = View.from_messages(messages)
    if not pinned:
        return view
    flags = draw(st.lists(st.booleans(), min_size=len(view.groups), max_size=len(view.groups)))
    chosen = [g.group_id for g, flag in zip(view.groups, flags, strict=True) if flag]
    chosen = chosen[: draw(st.integers(0, 2))]
    return View.from_messages(messages, pinned=chosen)
