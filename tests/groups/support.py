"""Builders, a store-like fold of annotations, and an independent linking oracle.

Re-exported by :mod:`tests.groups.conversations`; import from there.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from strategies.groups import Annotation, AnnotationState, GroupInfo, annotate
from strategies.messages import (
    Content,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    OtherContent,
    ReasoningContent,
    TextContent,
)

# --- builders ---------------------------------------------------------------------------


def text(value: str = "text") -> TextContent:
    """A text content."""
    return TextContent(text=value)


def reasoning(value: str | None = "thinking") -> ReasoningContent:
    """A reasoning content."""
    return ReasoningContent(text=value)


def call(call_id: str, name: str = "lookup") -> FunctionCallContent:
    """A function call."""
    return FunctionCallContent(call_id=call_id, name=name, arguments={"q": call_id})


def result(call_id: str, value: str = "ok") -> FunctionResultContent:
    """A function result answering ``call_id``."""
    return FunctionResultContent(call_id=call_id, result=value)


def hosted_call(call_id: str | None, kind: str = "mcp_server_tool_call") -> OtherContent:
    """A hosted-tool call, as converters store it."""
    return OtherContent(kind=kind, call_id=call_id, pairing="call", payload={"tool": "t"})


def hosted_result(call_id: str | None, kind: str = "mcp_server_tool_result") -> OtherContent:
    """A hosted-tool result, as converters store it."""
    return OtherContent(kind=kind, call_id=call_id, pairing="result", payload={"out": 1})


def make_message(role: str, message_id: str, contents: Iterable[Content | str]) -> Message:
    """A message with any role (custom roles allowed); strings become text contents."""
    items = [TextContent(text=c) if isinstance(c, str) else c for c in contents]
    data = {"role": role, "message_id": message_id, "contents": items}
    return Message.model_validate(data, context={"allow_custom_roles": True})


def user(message_id: str, *contents: Content | str) -> Message:
    """A user message (text ``"hi"`` when no content is given)."""
    return make_message("user", message_id, contents or ("hi",))


def system(message_id: str, *contents: Content | str) -> Message:
    """A system message."""
    return make_message("system", message_id, contents or ("be brief",))


def assistant(message_id: str, *contents: Content | str) -> Message:
    """An assistant message with exactly the given contents."""
    return make_message("assistant", message_id, contents)


def tool(message_id: str, *contents: Content | str) -> Message:
    """A tool message with exactly the given contents."""
    return make_message("tool", message_id, contents)


def custom(message_id: str, role: str = "narrator", *contents: Content | str) -> Message:
    """A message with a custom role (``allow_custom_roles``)."""
    return make_message(role, message_id, contents or ("meanwhile",))


# --- applying annotations ---------------------------------------------------------------


@dataclass
class Folded:
    """The annotations of a conversation as a store would hold them."""

    group_of: dict[str, str] = field(default_factory=dict)
    """Message id to group id."""
    groups: dict[str, GroupInfo] = field(default_factory=dict)
    """Group id to its latest value."""

    def members(self) -> dict[str, list[str]]:
        """Group id to its message ids, in message order."""
        out: dict[str, list[str]] = {}
        for message_id, group_id in self.group_of.items():
            out.setdefault(group_id, []).append(message_id)
        return out


def fold(annotations: Iterable[Annotation]) -> Folded:
    """Apply annotations in order: merges, then new messages, then group values."""
    folded = Folded()
    for annotation in annotations:
        for absorbed, into in annotation.merged.items():
            folded.groups.pop(absorbed, None)
            for message_id, group_id in folded.group_of.items():
                if group_id == absorbed:
                    folded.group_of[message_id] = into
        folded.group_of.update(annotation.message_groups)
        folded.groups.update(annotation.groups)
    return folded


def split_annotate(
    messages: Sequence[Message], cuts: Iterable[int], *, through_json: bool = False
) -> list[Annotation]:
    """Annotate ``messages`` in chunks ending at ``cuts``, passing the state along."""
    annotations: list[Annotation] = []
    state = AnnotationState()
    start = 0
    for end in [*sorted(cuts), len(messages)]:
        if through_json:
            state = AnnotationState.from_json(state.to_json())
        annotation = annotate(messages[start:end], state)
        annotations.append(annotation)
        state = annotation.state
        start = end
    return annotations


# --- an independent statement of linking ------------------------------------------------


def _declared(message: Message) -> list[str]:
    if message.role != "assistant":
        return []
    return [
        c.call_id
        for c in message.contents
        if (
            isinstance(c, FunctionCallContent)
            or (isinstance(c, OtherContent) and c.pairing == "call")
        )
        and c.call_id
    ]


def _answers(message: Message) -> list[str]:
    if message.role not in ("assistant", "tool"):
        return []
    return [
        c.call_id
        for c in message.contents
        if (
            isinstance(c, FunctionResultContent)
            or (isinstance(c, OtherContent) and c.pairing == "result")
        )
        and c.call_id
    ]


def linked_pairs(messages: Sequence[Message]) -> list[tuple[int, int]]:
    """``(call message index, result message index)`` for every linked result.

    A result links when exactly one earlier call with its id is still unanswered (a
    message's calls count as earlier than its own results). Each pair is one result. A
    tool message none of whose results links leaves each of its ids that no call holds
    waiting (the first such message per id): the next call declaring a waiting id, when
    no call holds it and its message declares the id once, pairs with that message
    instead (result index below call index).
    """
    unanswered: dict[str, list[int]] = {}
    waiting: dict[str, int] = {}
    pairs: list[tuple[int, int]] = []
    for index, message in enumerate(messages):
        declared = _declared(message)
        for call_id in declared:
            if call_id in waiting and not unanswered.get(call_id) and declared.count(call_id) == 1:
                pairs.append((index, waiting.pop(call_id)))
                continue
            unanswered.setdefault(call_id, []).append(index)
        linked = False
        for call_id in _answers(message):
            candidates = unanswered.get(call_id, [])
            if len(candidates) == 1:
                pairs.append((candidates.pop(), index))
                linked = True
        if message.role == "tool" and not linked:
            for call_id in _answers(message):
                if not unanswered.get(call_id):
                    waiting.setdefault(call_id, index)
    return pairs


def early_results(messages: Sequence[Message]) -> set[int]:
    """Indexes of the messages holding a result that joined a call declared after it."""
    return {result for call, result in linked_pairs(messages) if result < call}


def declared_count(message: Message) -> int:
    """How many answerable calls (with an id) the message declares."""
    return len(_declared(message))
