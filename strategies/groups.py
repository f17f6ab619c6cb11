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
(which may merge two call groups when one message answers both), when a call arrives
whose result was stored before it (the waiting orphan group joins the call's group), or
when a run of reasoning-only messages turns out to lead into a call.

Rules in short (``docs/groups.md`` has them in full, with the deliberate deviations
from Agent Framework's ``group_messages`` and the tests that show both behaviours):

* Each user message starts a turn and is its own group; each system message too.
* A result links to the one unanswered call with its ``call_id``. A result whose
  ``call_id`` matches no unanswered call (an orphan), or matches two or more
  (ambiguous), is not linked; a tool message with no linked result is its own
  ``tool_call`` group, flagged ``orphan``.
* A result stored before any call with its ``call_id`` waits for it: the next call
  declaring the id is answered by it, and the orphan group joins the call's group,
  which keeps the id, turn and place of its earliest call (:func:`in_call_order` shows
  each call before its result). A waiting group that was compacted meanwhile
  (``frozen``) joins nothing, and neither does any group when the call's message
  declares the id twice (ambiguous, as when the result comes after): the call is
  pending, and a later result for it links as usual.
* Consecutive reasoning-only assistant messages join the call they lead into, or
  else form one ``assistant_text`` group.
* Messages with a custom role form ``assistant_text`` groups.
* Approvals (Agent Framework's ``function_approval_request`` and
  ``function_approval_response``) pair by their own id, apart from call ids
  (:func:`approval_key`), as Agent Framework 1.26 groups them: the response, in a
  message of any role (a user's, usually), joins the group of the latest unanswered
  request with its id, and a request joins the group of the unanswered function call
  it asks to approve.
* Group ids are ``group_<id of the group's first message>``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, TypeVar, cast, get_args

from strategies.messages import (
    FunctionCallContent,
    FunctionResultContent,
    Message,
    OtherContent,
    ReasoningContent,
)

__all__ = [
    "APPROVAL_REQUEST",
    "APPROVAL_RESPONSE",
    "GROUP_KINDS",
    "MAX_GROUP_ID_LENGTH",
    "Annotation",
    "AnnotationState",
    "GroupInfo",
    "GroupKind",
    "Tail",
    "annotate",
    "annotate_all",
    "approval_key",
    "approved_call_ids",
    "call_ids",
    "call_links",
    "group_id_for",
    "in_call_order",
    "is_approval_key",
    "kind_is_settled",
    "referenced_ids",
    "result_ids",
]

GroupKind = Literal["system", "user", "assistant_text", "tool_call", "summary"]
GROUP_KINDS: tuple[GroupKind, ...] = ("system", "user", "assistant_text", "tool_call", "summary")

TailMode = Literal["reasoning", "calls"]

_STATE_FORMAT = 1
"""Version of the JSON written by :meth:`AnnotationState.to_json`."""


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
    """Whether any message of the group holds reasoning content."""
    pending_calls: int = 0
    """Calls in this group not answered (yet) by a linked result."""
    orphan: bool = False
    """A tool message that answers no known call: never sent to a model."""


@dataclass(frozen=True, slots=True)
class Tail:
    group: GroupInfo
    mode: TailMode


@dataclass(frozen=True, slots=True)
class AnnotationState:
    """What annotation needs to go on from where it stopped; never the messages."""

    position: int = 0
    """How many messages were annotated so far."""
    turn: int = 0
    """How many user messages were annotated so far."""
    open_calls: Mapping[str, str] = field(default_factory=dict)
    """Unanswered, unambiguous calls: ``call_id`` to the id of the group declaring it."""
    ambiguous_calls: frozenset[str] = frozenset()
    """Call ids declared by more than one unanswered call; results for them stay unlinked."""
    pending_groups: Mapping[str, GroupInfo] = field(default_factory=dict)
    """Groups with unanswered calls, by id (those that a late result may still join)."""
    tail: Tail | None = None
    """The last group, when the next message may still join it."""
    early_results: Mapping[str, str] = field(default_factory=dict)
    """Results stored before any call with their ``call_id``: ``call_id`` to the id of the
    group holding the first such result, which the next call declaring the id joins."""
    waiting_groups: Mapping[str, GroupInfo] = field(default_factory=dict)
    """The groups :attr:`early_results` point to, by id."""

    def to_json(self) -> str:
        """Serialize the state (for the store to persist between appends)."""
        data: dict[str, Any] = {
            "format": _STATE_FORMAT,
            "position": self.position,
            "turn": self.turn,
            "open_calls": dict(self.open_calls),
            "ambiguous_calls": sorted(self.ambiguous_calls),
            "pending_groups": [asdict(g) for g in self.pending_groups.values()],
            "tail": None
            if self.tail is None
            else {"group": asdict(self.tail.group), "mode": self.tail.mode},
            "early_results": dict(self.early_results),
            "waiting_groups": [asdict(g) for g in self.waiting_groups.values()],
        }
        return json.dumps(data, ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes, /) -> AnnotationState:
        """Read a state written by :meth:`to_json`; raise ``ValueError`` if malformed."""
        try:
            return _state_from_data(json.loads(text))
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"malformed annotation state: {exc!r}") from exc


def _group_from_data(data: Any) -> GroupInfo:
    group = GroupInfo(**data)
    if group.kind not in GROUP_KINDS:
        raise ValueError(f"malformed annotation state: unknown group kind {group.kind!r}")
    ints = (group.turn, group.first_position, group.pending_calls)
    if not isinstance(group.group_id, str) or not all(type(i) is int for i in ints):
        raise ValueError(f"malformed annotation state: bad group {data!r}")
    return group


def _state_from_data(data: Any) -> AnnotationState:
    if data.get("format") != _STATE_FORMAT:
        raise ValueError(f"unsupported annotation state format {data.get('format')!r}")
    tail_data = data["tail"]
    tail = None
    if tail_data is not None:
        mode = tail_data["mode"]
        if mode not in get_args(TailMode):
            raise ValueError(f"malformed annotation state: unknown tail mode {mode!r}")
        tail = Tail(_group_from_data(tail_data["group"]), cast(TailMode, mode))
    pending = [_group_from_data(g) for g in data["pending_groups"]]
    open_calls = dict(data["open_calls"])
    early = dict(data.get("early_results", {}))  # absent from states written before it
    for name, mapping in (("open_calls", open_calls), ("early_results", early)):
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in mapping.items()):
            raise ValueError(f"malformed annotation state: {name} must map str to str")
    waiting = [_group_from_data(g) for g in data.get("waiting_groups", [])]
    return AnnotationState(
        position=int(data["position"]),
        turn=int(data["turn"]),
        open_calls=open_calls,
        ambiguous_calls=frozenset(str(c) for c in data["ambiguous_calls"]),
        pending_groups={g.group_id: g for g in pending},
        tail=tail,
        early_results=early,
        waiting_groups={g.group_id: g for g in waiting},
    )


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
    """Where to go on from; pass it to the next :func:`annotate` call."""


MAX_GROUP_ID_LENGTH = 255
"""The longest group id: what a SQL store's id columns hold."""


def group_id_for(message_id: str) -> str:
    """The id of the group that starts with the message ``message_id``: ``group_`` and
    the message id, or, for a message id too long for that to fit in
    :data:`MAX_GROUP_ID_LENGTH`, ``group_sha256_`` and the id's SHA-256."""
    group_id = f"group_{message_id}"
    if len(group_id) <= MAX_GROUP_ID_LENGTH:
        return group_id
    return "group_sha256_" + hashlib.sha256(message_id.encode()).hexdigest()


APPROVAL_REQUEST = "function_approval_request"
"""The kind (Agent Framework's type tag) of an approval request."""
APPROVAL_RESPONSE = "function_approval_response"
"""The kind of an approval response."""
_APPROVAL_PREFIX = "approval:"


def approval_key(approval_id: str) -> str:
    """The key an approval with id ``approval_id`` pairs by, in the call-id namespace:
    ``approval:`` and the id (``approval:sha256_`` and its SHA-256 when that would be
    longer than :data:`MAX_GROUP_ID_LENGTH`). An approval's id is most often the
    ``call_id`` of the call it approves; the prefix keeps the two apart, so that the
    call and its approval request in one message are not a call id declared twice."""
    key = _APPROVAL_PREFIX + approval_id
    if len(key) <= MAX_GROUP_ID_LENGTH:
        return key
    return _APPROVAL_PREFIX + "sha256_" + hashlib.sha256(approval_id.encode()).hexdigest()


def is_approval_key(call_id: str) -> bool:
    """Whether ``call_id`` is an :func:`approval_key`."""
    return call_id.startswith(_APPROVAL_PREFIX)


def call_links(message: Message) -> tuple[list[str | None], list[str]]:
    """:func:`call_ids` and :func:`result_ids` of a message, in one pass over its contents.

    An approval request counts as a call and an approval response as a result, under
    their :func:`approval_key`; an approval request repeated in one message counts once.
    """
    calls: list[str | None] = []
    results: list[str] = []
    for content in message.contents:
        if isinstance(content, FunctionCallContent):
            calls.append(content.call_id or None)
        elif isinstance(content, FunctionResultContent):
            if content.call_id:
                results.append(content.call_id)
        elif isinstance(content, OtherContent):
            if content.kind == APPROVAL_REQUEST:
                if content.call_id and approval_key(content.call_id) not in calls:
                    calls.append(approval_key(content.call_id))
            elif content.kind == APPROVAL_RESPONSE:
                if content.call_id:
                    results.append(approval_key(content.call_id))
            elif content.pairing == "call":
                calls.append(content.call_id or None)
            elif content.pairing == "result" and content.call_id:
                results.append(content.call_id)
    return calls, results


def approved_call_ids(message: Message) -> list[str]:
    """The ``call_id`` of the function call each approval request of ``message`` carries
    (those that carry one), in order."""
    found: list[str] = []
    for content in message.contents:
        if isinstance(content, OtherContent) and content.kind == APPROVAL_REQUEST:
            call = content.payload.get("function_call")
            call_id = call.get("call_id") if isinstance(call, dict) else None
            if isinstance(call_id, str) and call_id:
                found.append(call_id)
    return found


def _approval_results(message: Message) -> list[str]:
    """The :func:`approval_key` of each approval response of ``message``."""
    return [
        approval_key(content.call_id)
        for content in message.contents
        if isinstance(content, OtherContent)
        and content.kind == APPROVAL_RESPONSE
        and content.call_id
    ]


def referenced_ids(message: Message) -> set[str]:
    """Every call id annotating ``message`` may look up: those its calls declare, its
    results answer, and its approval requests approve (what a store that keeps the
    unanswered calls apart must load before annotating it)."""
    calls, results = call_links(message)
    found = {c for c in calls if c is not None}
    found.update(results)
    found.update(approved_call_ids(message))
    return found


def call_ids(message: Message) -> list[str | None]:
    """Calls a message declares (function calls and hosted calls), in order.

    A call without a ``call_id`` (or with an empty one) is listed as ``None``: it makes
    its message a call, but nothing can answer it.
    """
    return call_links(message)[0]


def result_ids(message: Message) -> list[str]:
    """Call ids that a message's results answer, in order (results without an id skipped)."""
    return call_links(message)[1]


def _repeated(calls: list[str | None]) -> frozenset[str]:
    """The call ids declared more than once in one message's ``calls``."""
    if len(calls) < 2:
        return frozenset()
    seen: set[str] = set()
    repeated: set[str] = set()
    for call_id in calls:
        if call_id is not None:
            (repeated if call_id in seen else seen).add(call_id)
    return frozenset(repeated)


def _is_reasoning_only(message: Message) -> bool:
    return bool(message.contents) and all(isinstance(c, ReasoningContent) for c in message.contents)


def kind_is_settled(message: Message) -> bool:
    """Whether the kind of the group ``message`` is placed in is final: nothing appended
    or retracted later changes it. True for every message but an assistant's reasoning
    alone, whose group becomes a tool call when calls follow it (and an assistant text
    again when they are retracted). Merges join tool calls to tool calls only."""
    return message.role != "assistant" or not _is_reasoning_only(message)


def _has_reasoning(message: Message) -> bool:
    for content in message.contents:  # a loop: no generator for the usual one content
        if isinstance(content, ReasoningContent):
            return True
    return False


def _evolve(
    group: GroupInfo,
    *,
    kind: GroupKind | None = None,
    has_reasoning: bool | None = None,
    pending_calls: int | None = None,
) -> GroupInfo:
    """``dataclasses.replace`` of the fields annotation changes, without its introspection."""
    return GroupInfo(
        group.group_id,
        group.kind if kind is None else kind,
        group.turn,
        group.first_position,
        group.has_reasoning if has_reasoning is None else has_reasoning,
        group.pending_calls if pending_calls is None else pending_calls,
        group.orphan,
    )


class _Annotator:
    """Mutable working copy of a state; one instance per :func:`annotate` call."""

    def __init__(self, state: AnnotationState, frozen: Collection[str] = ()) -> None:
        self.early = dict(state.early_results)
        self.waiting = dict(state.waiting_groups)
        self.frozen = frozenset(frozen)
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
            early_results=dict(self.early),
            waiting_groups={g: self.waiting[g] for g in set(self.early.values())},
        )

    def _save(self, group: GroupInfo) -> GroupInfo:
        self.changed[group.group_id] = group
        if group.pending_calls > 0:
            self.pending[group.group_id] = group
        else:
            self.pending.pop(group.group_id, None)
        if group.group_id in self.waiting:
            self.waiting[group.group_id] = group
        if self.tail is not None and self.tail.group.group_id == group.group_id:
            self.tail = Tail(group, self.tail.mode)
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
        """The group ``message`` joins or starts."""
        role = message.role
        if role in ("system", "user"):
            self.tail = None
            linked = self._link_approvals(message)
            if linked is not None:
                return linked
            return self._new_group(message, "system" if role == "system" else "user")
        calls, results = call_links(message)  # read once: placing and linking both need them
        if role == "tool":
            self.tail = None
            return self._place_results(message, results)
        if role != "assistant":
            self.tail = None
            linked = self._link_approvals(message)
            return linked if linked is not None else self._new_group(message, "assistant_text")
        if calls:
            return self._place_calls(message, calls, results)
        if _is_reasoning_only(message):
            return self._place_reasoning(message)
        self.tail = None
        linked = self._link(message, None, results)
        return linked if linked is not None else self._new_group(message, "assistant_text")

    def _link_approvals(self, message: Message) -> GroupInfo | None:
        """Link the approval responses of a message that links nothing else (a user's,
        a system or custom-role message); return the group it joins."""
        if not message.contents or all(not isinstance(c, OtherContent) for c in message.contents):
            return None  # the usual message: nothing to look for
        keys = _approval_results(message)
        return self._link(message, None, keys) if keys else None

    def _place_reasoning(self, message: Message) -> GroupInfo:
        if self.tail is not None:
            return self._save(_evolve(self.tail.group, has_reasoning=True))
        group = self._new_group(message, "assistant_text")
        self.tail = Tail(group, "reasoning")
        return group

    def _place_calls(
        self, message: Message, calls: list[str | None], results: list[str]
    ) -> GroupInfo:
        if self.tail is not None and self.tail.mode == "reasoning":
            group = self.tail.group
            group = _evolve(
                group,
                kind="tool_call",
                has_reasoning=group.has_reasoning or _has_reasoning(message),
            )
        else:
            group = GroupInfo(
                group_id=group_id_for(message.message_id),
                kind="tool_call",
                turn=self.turn,
                first_position=self.position,
                has_reasoning=_has_reasoning(message),
            )
        pending = group.pending_calls
        joins: list[str] = []
        repeated = _repeated(calls)
        for call_id in calls:
            if call_id is None:
                continue
            waiting = self._answered_early(call_id, ambiguous=call_id in repeated)
            if waiting is not None:
                if waiting not in joins:
                    joins.append(waiting)
                continue
            pending += 1
            if is_approval_key(call_id) and call_id not in self.ambiguous:
                # A response answers the latest request with its id (Agent Framework
                # 1.26); an earlier unanswered one stays pending in its own group.
                self.open_calls[call_id] = group.group_id
            elif call_id in self.open_calls:
                # Two unanswered calls share the id: neither can be linked, ever; the
                # earlier one stays counted as pending in its own group.
                del self.open_calls[call_id]
                self.ambiguous.add(call_id)
            elif call_id not in self.ambiguous:
                self.open_calls[call_id] = group.group_id
        self.tail = Tail(group, "calls")
        group = self._save(_evolve(group, pending_calls=pending))
        for waiting in joins:
            if waiting == group.group_id:
                continue
            held = self._current(waiting)
            if held.orphan:  # the result alone: it joins the call
                group = self._merge(waiting, group)
            else:  # it joined an earlier call already: the call joins that group
                group = self._merge(group.group_id, held)
        group = self._join_approved(message, group)
        # Results in the same message (hosted tools) answer calls at once.
        linked = self._link(message, group, results)
        return group if linked is None else linked

    def _join_approved(self, message: Message, group: GroupInfo) -> GroupInfo:
        """An approval request joins the group of the unanswered function call it asks to
        approve, without answering it (the call's result is still to come); the earlier
        group keeps its id."""
        approved = approved_call_ids(message)
        if not approved:
            return group
        touched = [group.group_id]
        for call_id in approved:
            group_id = self.open_calls.get(call_id)
            if group_id is not None and group_id not in touched:
                touched.append(group_id)
        if len(touched) == 1:
            return group
        target = min((self._current(g) for g in touched), key=lambda g: g.first_position)
        for group_id in touched:
            if group_id != target.group_id:
                target = self._merge(group_id, target)
        return target

    def _link(
        self, message: Message, own: GroupInfo | None, results: list[str]
    ) -> GroupInfo | None:
        """Link the message's ``results`` to their calls; return the group it joins.

        ``own`` is the message's own group when it declares calls. Every group the
        message touches becomes one, under the id of the earliest.
        """
        answered: dict[str, int] = {}
        for call_id in results:
            group_id = self.open_calls.pop(call_id, None)
            if group_id is not None:
                answered[group_id] = answered.get(group_id, 0) + 1
        for group_id, count in answered.items():
            group = self._current(group_id)
            self._save(_evolve(group, pending_calls=group.pending_calls - count))
        touched = list(answered)
        if own is not None and own.group_id not in answered:
            touched.append(own.group_id)
        if not touched:
            return None
        if len(touched) == 1:
            target = self._current(touched[0])
        else:
            target = min((self._current(g) for g in touched), key=lambda g: g.first_position)
            for group_id in touched:
                if group_id != target.group_id:
                    target = self._merge(group_id, target)
        if not target.has_reasoning and _has_reasoning(message):
            target = self._save(_evolve(target, has_reasoning=True))
        return target

    def _answered_early(self, call_id: str, *, ambiguous: bool) -> str | None:
        """The group whose result, stored before this call, answers it (the call is then
        not pending); None when no result waits for it, or it waits in a frozen group, or
        the call's message declares the id more than once (``ambiguous``): the result
        then waits no more, and the call is pending as usual."""
        if call_id in self.open_calls or call_id in self.ambiguous:
            return None
        waiting = self.early.pop(call_id, None)
        if waiting is None or ambiguous or waiting in self.frozen:
            return None
        return waiting

    def _wait(self, results: list[str], group: GroupInfo) -> None:
        """Let the orphan ``group``'s ``results`` wait for calls declared later."""
        for call_id in results:
            if call_id in self.open_calls or call_id in self.ambiguous or call_id in self.early:
                continue
            self.early[call_id] = group.group_id
            self.waiting[group.group_id] = group

    def _current(self, group_id: str) -> GroupInfo:
        if group_id in self.changed:
            return self.changed[group_id]
        if group_id in self.pending:
            return self.pending[group_id]
        return self.waiting[group_id]

    def _merge(self, absorbed_id: str, target: GroupInfo) -> GroupInfo:
        """Fold group ``absorbed_id`` into ``target``, which keeps its id, turn and
        position (the earlier of the two, or the call an early result answers)."""
        absorbed = self._current(absorbed_id)
        merged = _evolve(
            target,
            has_reasoning=target.has_reasoning or absorbed.has_reasoning,
            pending_calls=target.pending_calls + absorbed.pending_calls,
        )
        for call_id, group_id in list(self.open_calls.items()):
            if group_id == absorbed_id:
                self.open_calls[call_id] = target.group_id
        for call_id, group_id in list(self.early.items()):
            if group_id == absorbed_id:
                self.early[call_id] = target.group_id
                self.waiting[target.group_id] = merged
        for later, into in list(self.merged.items()):
            if into == absorbed_id:
                self.merged[later] = target.group_id
        self.merged[absorbed_id] = target.group_id
        self.changed.pop(absorbed_id, None)
        self.pending.pop(absorbed_id, None)
        self.waiting.pop(absorbed_id, None)
        if self.tail is not None and self.tail.group.group_id == absorbed_id:
            self.tail = Tail(merged, self.tail.mode)
        self.message_groups = [
            (m, target.group_id if g == absorbed_id else g) for m, g in self.message_groups
        ]
        return self._save(merged)

    def _place_results(self, message: Message, results: list[str]) -> GroupInfo:
        linked = self._link(message, None, results)
        if linked is None:
            group = self._new_group(message, "tool_call", orphan=True)
            self._wait(results, group)
            return group
        return linked


def annotate(
    messages: Iterable[Message],
    state: AnnotationState | None = None,
    *,
    frozen: Collection[str] = (),
) -> Annotation:
    """Annotate ``messages``, appended after whatever ``state`` describes.

    ``frozen`` names groups of :attr:`AnnotationState.waiting_groups` that compaction
    excluded or summarized since: a call their early result answers does not join them
    (it stays pending, and the orphan stays as compaction left it).

    To apply the result to stored annotations: first re-point every message of a group
    in :attr:`Annotation.merged` to the group that absorbed it (and drop the absorbed
    group), then record :attr:`Annotation.message_groups`, then upsert
    :attr:`Annotation.groups`.
    """
    annotator = _Annotator(state or AnnotationState(), frozen)
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


T = TypeVar("T")


def in_call_order(items: Sequence[T], message: Callable[[T], Message]) -> list[T]:
    """A group's items (``message`` gives each one's message) in the order a model needs:
    stored order, except that a message holding a result stored before the call it
    answers (a joined early result) follows the message declaring that call.

    Only a group in which a tool message comes before an assistant message can need it;
    any other group is returned as it is without looking at contents.
    """
    roles = [message(item).role for item in items]
    if "tool" not in roles or "assistant" not in roles[roles.index("tool") :]:
        return list(items)
    declared: dict[str, int] = {}
    links = [call_links(message(item)) for item in items]
    for index, (calls, _) in enumerate(links):
        for call_id in calls:
            if call_id is not None:
                declared.setdefault(call_id, index)
    after: dict[int, list[int]] = {}
    moved: set[int] = set()
    for index, (_, results) in enumerate(links):
        later = [declared[c] for c in results if declared.get(c, -1) > index]
        if later:
            after.setdefault(max(later), []).append(index)
            moved.add(index)
    if not moved:
        return list(items)
    out: list[T] = []
    for index, item in enumerate(items):
        if index not in moved:
            out.append(item)
        out.extend(items[i] for i in after.get(index, ()))
    return out
