"""Group annotation: partitions messages into the atomic units of compaction.

Kinds: ``system``, ``user``, ``assistant_text``, ``tool_call`` and ``summary``. A
``tool_call`` group holds an assistant message with calls, every result that answers
them (linked by ``call_id``, also when not adjacent), and reasoning-only assistant
messages that lead into the calls or sit between the calls and their results.

Annotation is incremental. :func:`annotate` takes the messages to add and the
:class:`AnnotationState` left by the previous call (the unanswered calls, the turn
counter and the last group, never the earlier messages) and returns the group of
each new message, the groups created or changed, groups merged away, and the new
state. Annotating a prefix and then the rest gives exactly what annotating the whole
gives. Settled groups change only when a late result joins its pending call's group
(which may merge two call groups when one message answers both), or when a run of
reasoning-only messages turns out to lead into a call.

Rules, and where they deliberately differ from Agent Framework's ``group_messages``:

* Each user message starts a turn and is its own group; each system message too.
* A result whose ``call_id`` matches no unanswered call (an orphan), or one whose
  ``call_id`` was declared by two unanswered calls (ambiguous), is not linked: its
  message forms its own ``tool_call`` group. Agent Framework instead absorbs every
  ``tool`` message that directly follows a call group, whatever its ``call_id``.
* Consecutive reasoning-only assistant messages that do not lead into a call form one
  ``assistant_text`` group (Agent Framework makes one group per message).
* Messages with a custom role form ``assistant_text`` groups.
* Group ids are ``group_<id of the group's first message>``, as in Agent Framework,
  which makes them stable across sessions, processes and re-annotation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from strategies.messages import (
    FunctionCallContent,
    FunctionResultContent,
    Message,
    OtherContent,
    ReasoningContent,
)

__all__ = [
    "GROUP_KINDS",
    "Annotation",
    "AnnotationState",
    "GroupInfo",
    "GroupKind",
    "annotate",
    "call_ids",
    "group_id_for",
    "result_ids",
]

GroupKind = Literal["system", "user", "assistant_text", "tool_call", "summary"]
GROUP_KINDS: tuple[GroupKind, ...] = ("system", "user", "assistant_text", "tool_call", "summary")

TailMode = Literal["reasoning", "calls"]


@dataclass(frozen=True, slots=True)
class GroupInfo:
    """A group's annotation: what the store keeps in its groups table."""

    group_id: str
    kind: GroupKind
    turn: int
    """Number of user messages up to and including this group's start (0 before any)."""
    first_position: int
    """0-based position, in the session, of the group's first message."""
    has_reasoning: bool = False
    pending_calls: int = 0
    """Calls in this group not answered (yet) by a linked result."""
    orphan: bool = False
    """A result (or tool message) that answers no known call: never sent to a model."""


@dataclass(frozen=True, slots=True)
class _Tail:
    group: GroupInfo
    mode: TailMode


@dataclass(frozen=True, slots=True)
class AnnotationState:
    """What annotation needs to go on from where it stopped; never the messages."""

    position: int = 0
    """How many messages were annotated so far."""
    turn: int = 0
    open_calls: Mapping[str, str] = field(default_factory=dict)
    """Unanswered, unambiguous calls: ``call_id`` to the id of the group declaring it."""
    ambiguous_calls: frozenset[str] = frozenset()
    """Call ids declared by more than one unanswered call; results for them stay unlinked."""
    pending_groups: Mapping[str, GroupInfo] = field(default_factory=dict)
    """Groups with unanswered calls, by id (those that a late result may still join)."""
    tail: _Tail | None = None
    """The last group, when the next message may still join it."""


@dataclass(frozen=True, slots=True)
class Annotation:
    """The outcome of one :func:`annotate` call."""

    message_groups: list[tuple[str, str]]
    """``(message_id, group_id)`` for each new message, in order."""
    groups: dict[str, GroupInfo]
    """Groups created or changed by this call, by id, with their final values."""
    merged: dict[str, str]
    """Groups merged away: absorbed group id to the id of the group that absorbed it."""
    state: AnnotationState


def group_id_for(message_id: str) -> str:
    """The id of the group that starts with the message ``message_id``."""
    return f"group_{message_id}"


def call_ids(message: Message) -> list[str | None]:
    """Calls a message declares (function calls and hosted calls), in order."""
    out: list[str | None] = []
    for content in message.contents:
        if isinstance(content, FunctionCallContent):
            out.append(content.call_id)
        elif isinstance(content, OtherContent) and content.pairing == "call":
            out.append(content.call_id)
    return out


def result_ids(message: Message) -> list[str]:
    """Call ids that a message's results answer, in order (results without an id skipped)."""
    out: list[str] = []
    for content in message.contents:
        if isinstance(content, FunctionResultContent):
            out.append(content.call_id)
        elif isinstance(content, OtherContent) and content.pairing == "result" and content.call_id:
            out.append(content.call_id)
    return out


def _is_reasoning_only(message: Message) -> bool:
    return bool(message.contents) and all(isinstance(c, ReasoningContent) for c in message.contents)


def _has_reasoning(message: Message) -> bool:
    return any(isinstance(c, ReasoningContent) for c in message.contents)


class _Annotator:
    """Mutable working copy of a state; one instance per :func:`annotate` call."""

    def __init__(self, state: AnnotationState) -> None:
        self.position = state.position
        self.turn = state.turn
        self.open_calls = dict(state.open_calls)
        self.ambiguous = set(state.ambiguous_calls)
        self.pending = dict(state.pending_groups)
        self.tail = state.tail
        self.message_groups: list[tuple[str, str]] = []
        self.changed: dict[str, GroupInfo] = {}
        self.merged: dict[str, str] = {}

    def state(self) -> AnnotationState:
        return AnnotationState(
            position=self.position,
            turn=self.turn,
            open_calls=dict(self.open_calls),
            ambiguous_calls=frozenset(self.ambiguous),
            pending_groups=dict(self.pending),
            tail=self.tail,
        )

    def _save(self, group: GroupInfo) -> GroupInfo:
        self.changed[group.group_id] = group
        if group.pending_calls > 0:
            self.pending[group.group_id] = group
        else:
            self.pending.pop(group.group_id, None)
        if self.tail is not None and self.tail.group.group_id == group.group_id:
            self.tail = replace(self.tail, group=group)
        return group

    def _new_group(self, message: Message, kind: GroupKind, *, orphan: bool = False) -> GroupInfo:
        group = GroupInfo(
            group_id=group_id_for(message.message_id),
            kind=kind,
            turn=self.turn,
            first_position=self.position,
            has_reasoning=_has_reasoning(message),
            orphan=orphan,
        )
        return self._save(group)

    def add(self, message: Message) -> None:
        if message.role == "user":
            self.turn += 1
        group = self._place(message)
        self.message_groups.append((message.message_id, group.group_id))
        self.position += 1

    def _place(self, message: Message) -> GroupInfo:
        role = message.role
        if role == "system" or role == "user":
            self.tail = None
            return self._new_group(message, "system" if role == "system" else "user")
        if role == "tool":
            self.tail = None
            return self._place_results(message)
        if role != "assistant":
            self.tail = None
            return self._new_group(message, "assistant_text")
        if call_ids(message):
            return self._place_calls(message)
        if _is_reasoning_only(message):
            return self._place_reasoning(message)
        self.tail = None
        return self._new_group(message, "assistant_text")

    def _place_reasoning(self, message: Message) -> GroupInfo:
        if self.tail is not None:
            return self._save(replace(self.tail.group, has_reasoning=True))
        group = self._new_group(message, "assistant_text")
        self.tail = _Tail(group, "reasoning")
        return group

    def _place_calls(self, message: Message) -> GroupInfo:
        if self.tail is not None and self.tail.mode == "reasoning":
            group = replace(self.tail.group, kind="tool_call")
            group = replace(group, has_reasoning=group.has_reasoning or _has_reasoning(message))
        else:
            group = GroupInfo(
                group_id=group_id_for(message.message_id),
                kind="tool_call",
                turn=self.turn,
                first_position=self.position,
                has_reasoning=_has_reasoning(message),
            )
        pending = group.pending_calls
        for call_id in call_ids(message):
            if call_id is None:
                continue
            if call_id in self.ambiguous:
                pending += 1
            elif call_id in self.open_calls:
                self.ambiguous.add(call_id)
                other = self.open_calls.pop(call_id)
                pending += 1
                if other == group.group_id:
                    continue
                # the other group's call stays unanswered forever, and so counted
            else:
                self.open_calls[call_id] = group.group_id
                pending += 1
        group = replace(group, pending_calls=pending)
        self.tail = _Tail(group, "calls")
        group = self._save(group)
        # Results co-located with their calls (hosted tools) answer them at once.
        return self._answer(message, group)

    def _answer(self, message: Message, default: GroupInfo) -> GroupInfo:
        linked: list[str] = []
        answered: dict[str, int] = {}
        for call_id in result_ids(message):
            group_id = self.open_calls.pop(call_id, None)
            if group_id is None:
                continue
            answered[group_id] = answered.get(group_id, 0) + 1
            if group_id not in linked:
                linked.append(group_id)
        for group_id, count in answered.items():
            group = self._current(group_id)
            self._save(replace(group, pending_calls=group.pending_calls - count))
        if not linked:
            return default
        target = self._current(min(linked, key=lambda g: self._current(g).first_position))
        for group_id in linked:
            if group_id != target.group_id:
                target = self._merge(group_id, target)
        return target

    def _current(self, group_id: str) -> GroupInfo:
        if group_id in self.changed:
            return self.changed[group_id]
        return self.pending[group_id]

    def _merge(self, absorbed_id: str, target: GroupInfo) -> GroupInfo:
        absorbed = self._current(absorbed_id)
        merged = replace(
            target,
            turn=min(target.turn, absorbed.turn),
            first_position=min(target.first_position, absorbed.first_position),
            has_reasoning=target.has_reasoning or absorbed.has_reasoning,
            pending_calls=target.pending_calls + absorbed.pending_calls,
        )
        for call_id, group_id in list(self.open_calls.items()):
            if group_id == absorbed_id:
                self.open_calls[call_id] = target.group_id
        for later, into in list(self.merged.items()):
            if into == absorbed_id:
                self.merged[later] = target.group_id
        self.merged[absorbed_id] = target.group_id
        self.changed.pop(absorbed_id, None)
        self.pending.pop(absorbed_id, None)
        self.message_groups = [
            (m, target.group_id if g == absorbed_id else g) for m, g in self.message_groups
        ]
        return self._save(merged)

    def _place_results(self, message: Message) -> GroupInfo:
        group = self._answer(message, default=_UNLINKED)
        if group is _UNLINKED:
            return self._new_group(message, "tool_call", orphan=True)
        return group


_UNLINKED = GroupInfo(group_id="", kind="tool_call", turn=0, first_position=-1)


def annotate(messages: Iterable[Message], state: AnnotationState | None = None) -> Annotation:
    """Annotate ``messages``, appended after whatever ``state`` describes."""
    annotator = _Annotator(state or AnnotationState())
    for message in messages:
        annotator.add(message)
    return Annotation(
        message_groups=annotator.message_groups,
        groups=dict(annotator.changed),
        merged=dict(annotator.merged),
        state=annotator.state(),
    )


def annotate_all(messages: Sequence[Message]) -> Annotation:
    """Annotate a whole conversation from the start."""
    return annotate(messages, AnnotationState())
