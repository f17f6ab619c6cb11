"""Conversations for group-annotation tests: builders, hypothesis strategies, oracles.

Builders (``user``, ``assistant``, ``tool``, ``call``, ``result``, ...) make short,
readable fixtures with explicit message ids. Strategies:

* :func:`conversations`: realistic and adversarial sequences (parallel calls, orphan
  results, pending calls, reasoning runs, reused and duplicated call ids, results before
  their calls, interleavings, hosted calls, custom roles, non-ASCII text and ids).
* :func:`aligned_conversations`: conversations without the shapes where chatledger
  deliberately groups differently from Agent Framework (see ``docs/groups.md``), for
  the differential test.

Helpers: :func:`fold` applies a sequence of :class:`Annotation` the way a store would
(merges, then new messages, later group values overriding earlier ones);
:func:`split_annotate` annotates in chunks, passing the state (optionally through
JSON); :func:`linked_pairs` is an independent statement of which result answers which
call. Builders and helpers live in :mod:`tests.groups.support` and are re-exported here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st

from strategies.messages import Content, Message, TextContent
from tests.groups.support import (
    Folded,
    assistant,
    call,
    custom,
    declared_count,
    fold,
    hosted_call,
    hosted_result,
    linked_pairs,
    make_message,
    reasoning,
    result,
    split_annotate,
    system,
    text,
    tool,
    user,
)

__all__ = [
    "Folded",
    "aligned_conversations",
    "assistant",
    "call",
    "conversations",
    "custom",
    "declared_count",
    "fold",
    "hosted_call",
    "hosted_result",
    "linked_pairs",
    "make_message",
    "reasoning",
    "result",
    "split_annotate",
    "system",
    "text",
    "tool",
    "user",
]

# --- hypothesis strategies --------------------------------------------------------------

_ID_PREFIXES = ("m", "msg_", "сообщение-", "消息", "🙂")
_SHORT_TEXT = st.text(max_size=6)
_STEPS = (
    "user",
    "user",
    "system",
    "text",
    "text",
    "reasoning",
    "reasoning",
    "calls",
    "calls",
    "calls",
    "results",
    "results",
    "results_each",
    "hosted",
    "orphan",
    "custom",
    "empty",
    "assistant_result",
    "tool_text",
)


class _Builder:
    """Accumulates a conversation, tracking the calls it left unanswered."""

    def __init__(self, draw: Any, prefix: str) -> None:
        self.draw = draw
        self.prefix = prefix
        self.messages: list[Message] = []
        self.open: list[str] = []
        self.counter = 0

    def add(self, role: str, contents: Sequence[Content]) -> None:
        message_id = f"{self.prefix}{len(self.messages)}"
        self.messages.append(make_message(role, message_id, contents))

    def fresh_id(self) -> str:
        self.counter += 1
        return f"call_{self.counter}_é"

    def some_text(self) -> TextContent:
        return TextContent(text=self.draw(_SHORT_TEXT))


_POOL = ("c_a", "c_b", "c_ü")
"""A few call ids shared by calls and results, so that ids repeat in every way."""


def _pick_call_id(draw: Any, builder: _Builder) -> str:
    if draw(st.integers(0, 5)) == 0:
        return str(draw(st.sampled_from(_POOL)))
    return builder.fresh_id()


def _pick_result_id(draw: Any, builder: _Builder) -> str:
    if builder.open and draw(st.integers(0, 4)) > 0:
        return str(draw(st.sampled_from(builder.open)))
    return str(draw(st.sampled_from((*_POOL, "never_called"))))


def _step_calls(draw: Any, b: _Builder) -> None:
    contents: list[Content] = []
    if draw(st.booleans()):
        contents.append(reasoning(draw(_SHORT_TEXT)))
    if draw(st.booleans()):
        contents.append(b.some_text())
    ids = [_pick_call_id(draw, b) for _ in range(draw(st.integers(1, 3)))]
    if draw(st.integers(0, 5)) == 0:
        ids.append(ids[0])  # a duplicated id in one message
    contents.extend(call(i) for i in ids)
    if b.open and draw(st.integers(0, 4)) == 0:
        contents.append(result(_pick_result_id(draw, b)))  # answers an earlier call
    b.open.extend(ids)
    b.add("assistant", contents)


def _step_results(draw: Any, b: _Builder, *, each: bool) -> None:
    count = draw(st.integers(1, 3))
    ids = [_pick_result_id(draw, b) for _ in range(count)]
    for call_id in ids:
        if call_id in b.open:
            b.open.remove(call_id)
    if each:
        for call_id in ids:
            b.add("tool", [result(call_id)])
    else:
        b.add("tool", [result(i) for i in ids])


def _step_hosted(draw: Any, b: _Builder) -> None:
    call_id = draw(st.sampled_from((b.fresh_id(), "c_a", None)))
    contents: list[Content] = [hosted_call(call_id)]
    if call_id is not None and draw(st.booleans()):
        contents.append(hosted_result(call_id))
    elif call_id is not None:
        b.open.append(call_id)
    b.add("assistant", contents)


def _step(draw: Any, b: _Builder, step: str) -> None:
    if step in ("user", "system"):
        b.add(step, [b.some_text()])
    elif step == "text":
        b.add("assistant", [b.some_text()])
    elif step == "reasoning":
        b.add("assistant", [reasoning(draw(st.none() | _SHORT_TEXT))])
    elif step == "calls":
        _step_calls(draw, b)
    elif step in ("results", "results_each"):
        _step_results(draw, b, each=step == "results_each")
    elif step == "hosted":
        _step_hosted(draw, b)
    elif step == "orphan":
        b.add(
            "tool",
            [hosted_result(draw(st.sampled_from(_POOL))) if draw(st.booleans()) else result("zz")],
        )
    elif step == "custom":
        b.add(draw(st.sampled_from(("narrator", "критик"))), [b.some_text()])
    elif step == "empty":
        b.add("assistant", [])
    elif step == "assistant_result":
        b.add("assistant", [result(_pick_result_id(draw, b))])
    else:
        b.add("tool", [b.some_text()])


@st.composite
def conversations(draw: Any, max_steps: int = 24) -> list[Message]:
    """Realistic and adversarial conversations (see the module docstring)."""
    b = _Builder(draw, draw(st.sampled_from(_ID_PREFIXES)))
    for _ in range(draw(st.integers(0, max_steps))):
        _step(draw, b, draw(st.sampled_from(_STEPS)))
    return b.messages


# --- conversations without deviating shapes ---------------------------------------------


class _Aligned(_Builder):
    """Builder that also tracks what the last message was, for the reference's rules."""

    def __init__(self, draw: Any, prefix: str) -> None:
        super().__init__(draw, prefix)
        self.after = "start"  # "other", "call_group" or "lone_tool"
        self.group_open: list[str] = []  # unanswered calls of the last call group
        self.reusable: list[str] = []  # ids answered (or orphaned) that a call may reuse

    def call_id(self) -> str:
        usable = [i for i in self.reusable if i not in self.open]
        if usable and self.draw(st.integers(0, 3)) == 0:
            chosen = str(self.draw(st.sampled_from(usable)))
            self.reusable.remove(chosen)
            return chosen
        return self.fresh_id()

    def answer(self, ids: Sequence[str]) -> None:
        self.add("tool", [result(i) for i in ids])
        for i in ids:
            self.open.remove(i)
            if i in self.group_open:
                self.group_open.remove(i)
            self.reusable.append(i)


def _aligned_call_group(draw: Any, b: _Aligned) -> None:
    for _ in range(draw(st.integers(0, 2))):
        b.add("assistant", [reasoning(draw(_SHORT_TEXT))])
    contents: list[Content] = []
    if draw(st.booleans()):
        contents.append(draw(st.sampled_from((reasoning("r"), text("calling")))))
    ids = [b.call_id() for _ in range(draw(st.integers(1, 3)))]
    contents.extend(call(i) for i in ids)
    if draw(st.integers(0, 5)) == 0:
        dead = b.fresh_id()  # declared twice: ambiguous, never answered
        contents.extend([call(dead), call(dead)])
    b.add("assistant", contents)
    b.open.extend(ids)
    b.group_open = list(ids)
    b.after = "call_group"
    if draw(st.booleans()):
        b.add("assistant", [reasoning(draw(_SHORT_TEXT))])
    now = draw(st.lists(st.sampled_from(ids), unique=True))
    if draw(st.booleans()):
        for i in now:
            b.answer([i])
    elif now:
        late = [i for i in b.open if i not in ids]
        extra = draw(st.lists(st.sampled_from(late), unique=True)) if late else []
        b.answer([*now, *extra])


def _aligned_step(draw: Any, b: _Aligned, step: str) -> None:
    late = [i for i in b.open if i not in b.group_open]
    if step == "deferred" and late and b.after == "other":
        b.answer(draw(st.lists(st.sampled_from(late), min_size=1, unique=True)))
        b.after = "lone_tool"
    elif step == "orphan" and b.after == "other":
        orphan_id = b.fresh_id()  # never declared later: a call would join it (deviation 10)
        b.add("tool", [result(orphan_id)])
        b.after = "lone_tool"
    elif step == "calls":
        _aligned_call_group(draw, b)
    elif step == "hosted":
        call_id = b.fresh_id()
        b.add("assistant", [hosted_call(call_id), hosted_result(call_id)])
        b.group_open = []
        b.after = "call_group"
    elif step == "reasoning":
        b.add("assistant", [reasoning(draw(_SHORT_TEXT))])
        b.add("assistant", [b.some_text()])
        b.after = "other"
    elif step in _PLAIN:
        role, contents = _PLAIN[step]
        b.add(role, [b.some_text()] if contents else [])
        b.after = "other"
        b.group_open = []


_PLAIN = {
    "user": ("user", True),
    "system": ("system", True),
    "text": ("assistant", True),
    "custom": ("narrator", True),
    "empty": ("assistant", False),
}


_ALIGNED_STEPS = (
    "user",
    "user",
    "system",
    "text",
    "reasoning",
    "calls",
    "calls",
    "calls",
    "deferred",
    "deferred",
    "orphan",
    "hosted",
    "custom",
    "empty",
)


@st.composite
def aligned_conversations(draw: Any, max_steps: int = 16) -> list[Message]:
    """Conversations that Agent Framework and chatledger must group identically."""
    b = _Aligned(draw, draw(st.sampled_from(_ID_PREFIXES)))
    for _ in range(draw(st.integers(0, max_steps))):
        _aligned_step(draw, b, draw(st.sampled_from(_ALIGNED_STEPS)))
    return b.messages
