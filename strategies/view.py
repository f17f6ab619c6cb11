"""The view a strategy plans on: the active groups of a history, in order.

A :class:`View` holds one :class:`GroupView` per active group (kind, turn, order keys,
message and token counts, pinned or not), the totals of the excluded groups, the
tokenizer the counts were made with, and a :class:`MessageSource` that loads a group's
messages only when a strategy asks for them. The store builds views from SQL with its
cached token counts; :meth:`View.from_messages` builds one from a plain list.

:meth:`View.apply` returns the view a change set leaves (nothing is mutated), which is
how pipelines and budgets compose strategies. :meth:`View.project` returns the messages
to send: the groups in order, reductions applied, with orphan results and stale
pending calls (calls without a result before the last user message) left out, so that
no tool result is sent without its call nor a call without its result. A source that
knows how each of its groups' messages pair (:class:`LinkedSource`, the SQL store's
cache) spares the projection that walk for every group it has seen before.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property, partial
from operator import attrgetter
from typing import Protocol, runtime_checkable

from strategies.changeset import ChangeSet
from strategies.groups import GroupKind, annotate, call_links, in_call_order
from strategies.messages import (
    Content,
    FunctionResultContent,
    Message,
    OtherContent,
)
from strategies.tokenizers import (
    DEFAULT_POLICY,
    CharacterEstimatorTokenizer,
    TokenCountPolicy,
    Tokenizer,
    count_message_tokens,
)

__all__ = [
    "GENERATED_COUNTS",
    "GeneratedCounts",
    "GroupLinks",
    "GroupView",
    "HeldSource",
    "InMemorySource",
    "LinkedSource",
    "MessageSource",
    "Totals",
    "View",
]

GENERATED_CACHE_SIZE = 2048
"""Token counts of generated messages kept by :data:`GENERATED_COUNTS`."""


@dataclass(frozen=True, slots=True)
class GroupView:
    """One active group, as strategies see it."""

    group_id: str
    kind: GroupKind
    turn: int
    anchor: int
    """Order key: the ``seq`` of the group's first message (a summary takes the first
    replaced message's)."""
    message_count: int
    token_count: int
    slot: int = 0
    """Secondary order key: 0 for appended messages, 1 or more for summaries."""
    pinned: bool = False
    has_reasoning: bool = False
    pending_calls: int = 0
    orphan: bool = False
    summary_of: tuple[str, ...] = ()
    """For a summary group, the groups it replaced."""

    @property
    def order_key(self) -> tuple[int, int]:
        """Where the group sits in the projection."""
        return (self.anchor, self.slot)


_ORDER = attrgetter("anchor", "slot")
"""A group's :attr:`GroupView.order_key`, as a sort key that runs no Python code."""


@dataclass(frozen=True, slots=True)
class Totals:
    """Counts of messages, groups and tokens."""

    messages: int = 0
    groups: int = 0
    tokens: int = 0


@runtime_checkable
class MessageSource(Protocol):
    """Loads the messages of groups on demand, in order within each group."""

    async def load(self, group_ids: Sequence[str]) -> Mapping[str, list[Message]]:
        """Return the messages of each requested group (reductions applied)."""
        ...


@dataclass(frozen=True, slots=True)
class GroupLinks:
    """How one group's messages pair with calls, as :meth:`View.project` needs it."""

    calls: frozenset[str]
    """The call ids the group's messages declare."""
    closed: bool
    """Every result in the group answers a call declared before it in the group (or in
    its own message): the projection sends the group whole, wherever it stands."""

    @classmethod
    def of(cls, messages: Iterable[Message]) -> GroupLinks:
        """The links of a group's ``messages`` (in the order the projection sends them)."""
        declared: set[str] = set()
        closed = True
        for message in messages:
            calls, answered = call_links(message)
            declared.update(c for c in calls if c)
            closed = closed and all(c in declared for c in answered)
        return cls(frozenset(declared), closed)


@runtime_checkable
class LinkedSource(MessageSource, Protocol):
    """A source that can tell, for groups it holds, how their messages pair."""

    def links(self, group_id: str) -> GroupLinks | None:
        """The links of the messages :meth:`load` returns for ``group_id`` (None: unknown,
        the projection walks them)."""
        ...


@runtime_checkable
class HeldSource(LinkedSource, Protocol):
    """A linked source that can hand over the groups it holds, with their links, at once."""

    def held(self, group_ids: Sequence[str]) -> list[tuple[Sequence[Message], GroupLinks]] | None:
        """Each group's messages as :meth:`load` returns them, with their links, in the
        order of ``group_ids``; None when the source does not hold every one of them
        (the projection then loads them)."""
        ...


@dataclass(frozen=True, slots=True)
class InMemorySource:
    """A :class:`MessageSource` over a dict, with an overlay for in-memory changes."""

    groups: Mapping[str, list[Message]]

    async def load(self, group_ids: Sequence[str]) -> Mapping[str, list[Message]]:
        return {gid: list(self.groups[gid]) for gid in group_ids}


@dataclass(frozen=True, slots=True)
class _Overlay:
    """A source with summaries added and reductions applied on top of another."""

    base: MessageSource
    added: Mapping[str, list[Message]]
    reduced: Mapping[str, Message]

    async def load(self, group_ids: Sequence[str]) -> Mapping[str, list[Message]]:
        wanted = [g for g in group_ids if g not in self.added]
        loaded = dict(await self.base.load(wanted)) if wanted else {}
        for gid in group_ids:
            if gid in self.added:
                loaded[gid] = list(self.added[gid])
        if self.reduced:
            loaded = {
                gid: [self.reduced.get(m.message_id, m) for m in msgs]
                for gid, msgs in loaded.items()
            }
        return loaded


class GeneratedCounts:
    """A bounded LRU of the token counts of messages strategies generate (summaries).

    A strategy re-creates the same summary on every plan (a before-call strategy on
    every model call); keyed by tokenizer name, policy, message id and content, its
    count is made once, and the store takes it from here when it stores the summary.
    """

    def __init__(self, size: int = GENERATED_CACHE_SIZE) -> None:
        self.size = size
        self._entries: OrderedDict[tuple[str, TokenCountPolicy, str, bytes], int] = OrderedDict()
        self._ids: dict[str, int] = {}

    @staticmethod
    def _key(
        message: Message, tokenizer: Tokenizer, policy: TokenCountPolicy
    ) -> tuple[str, TokenCountPolicy, str, bytes]:
        digest = hashlib.blake2b(message.model_dump_json().encode(), digest_size=16).digest()
        return (tokenizer.name, policy, message.message_id, digest)

    def get(self, message: Message, tokenizer: Tokenizer, policy: TokenCountPolicy) -> int | None:
        """The cached count of ``message``, or None (cheap when its id was never cached)."""
        if message.message_id not in self._ids:
            return None
        return self._entries.get(self._key(message, tokenizer, policy))

    def count(self, message: Message, tokenizer: Tokenizer, policy: TokenCountPolicy) -> int:
        """The count of ``message``, tokenized only when it is not cached."""
        if message.message_id not in self._ids:
            return self._store(self._key(message, tokenizer, policy), message, tokenizer, policy)
        key = self._key(message, tokenizer, policy)
        cached = self._entries.get(key)
        if cached is None:
            return self._store(key, message, tokenizer, policy)
        self._entries.move_to_end(key)
        return cached

    def _store(
        self,
        key: tuple[str, TokenCountPolicy, str, bytes],
        message: Message,
        tokenizer: Tokenizer,
        policy: TokenCountPolicy,
    ) -> int:
        tokens = count_message_tokens(message, tokenizer, policy=policy)
        self._entries[key] = tokens
        self._ids[key[2]] = self._ids.get(key[2], 0) + 1
        while len(self._entries) > self.size:
            old, _ = self._entries.popitem(last=False)
            left = self._ids[old[2]] - 1
            if left:
                self._ids[old[2]] = left
            else:
                del self._ids[old[2]]
        return tokens

    def clear(self) -> None:
        """Forget every count."""
        self._entries.clear()
        self._ids.clear()


GENERATED_COUNTS = GeneratedCounts()
"""The process-wide cache :meth:`View.count` uses."""


@dataclass(frozen=True)
class View:
    """The active groups of a history, in order, and how to load their messages."""

    groups: tuple[GroupView, ...]
    source: MessageSource
    tokenizer: Tokenizer = field(default_factory=CharacterEstimatorTokenizer)
    policy: TokenCountPolicy = DEFAULT_POLICY
    excluded: Totals = Totals()

    @cached_property
    def token_count(self) -> int:
        """Tokens of the active groups."""
        return sum(g.token_count for g in self.groups)

    @cached_property
    def message_count(self) -> int:
        """Messages of the active groups."""
        return sum(g.message_count for g in self.groups)

    @property
    def group_count(self) -> int:
        """Number of active groups."""
        return len(self.groups)

    @property
    def turn_count(self) -> int:
        """Number of active user groups (each user message starts a turn)."""
        return sum(1 for g in self.groups if g.kind == "user")

    @property
    def has_tool_calls(self) -> bool:
        """Whether any active group is a tool-call group."""
        return any(g.kind == "tool_call" for g in self.groups)

    @property
    def tokenizer_name(self) -> str:
        """Name of the tokenizer the counts were made with."""
        return self.tokenizer.name

    def count(self, message: Message) -> int:
        """Count a message the way the view's counts were made.

        Meant for messages a strategy generates: counts are cached in
        :data:`GENERATED_COUNTS`, so that the same summary is tokenized once however
        often it is planned, and not again when the store keeps it.
        """
        return GENERATED_COUNTS.count(message, self.tokenizer, self.policy)

    def group(self, group_id: str) -> GroupView:
        """The active group ``group_id``; KeyError when it is not active."""
        return self._by_id[group_id]

    @cached_property
    def _by_id(self) -> dict[str, GroupView]:
        return {g.group_id: g for g in self.groups}

    def last_user_index(self) -> int | None:
        """Index in :attr:`groups` of the newest user group, or None."""
        for index in range(len(self.groups) - 1, -1, -1):
            if self.groups[index].kind == "user":
                return index
        return None

    async def messages(self, group_ids: Iterable[str] | None = None) -> dict[str, list[Message]]:
        """Load the messages of ``group_ids`` (all active groups when None)."""
        ids = [g.group_id for g in self.groups] if group_ids is None else list(group_ids)
        return dict(await self.source.load(ids)) if ids else {}

    def sendable(self) -> list[GroupView]:
        """Groups the projection sends: orphans and stale pending calls left out."""
        return list(self._sendable)

    @cached_property
    def _sendable(self) -> tuple[GroupView, ...]:
        groups = self.groups
        last_user = self.last_user_index()
        if last_user is None:  # no stale pending calls: only orphans are left out
            return tuple(g for g in groups if not g.orphan)
        before = [g for g in groups[:last_user] if not g.orphan and g.pending_calls <= 0]
        return (*before, *(g for g in groups[last_user:] if not g.orphan))

    async def project(self) -> list[Message]:
        """The messages to send, in order.

        Results are sent only after a call they answer; a result content that answers no
        earlier call in the projection (a duplicate, or one that shares a message with
        linked results) is dropped from its message, and a message left empty by that is
        dropped. The stored message is unchanged.
        """
        groups = self._sendable
        # a HeldSource's and a LinkedSource's methods (looked up, not checked with
        # isinstance: that is slow)
        held = getattr(self.source, "held", None)
        pairs = None if held is None else held([g.group_id for g in groups])
        if pairs is not None:
            return _paired(pairs)
        loaded = await self.messages(g.group_id for g in groups)
        links: Callable[[str], GroupLinks | None] = getattr(self.source, "links", _unknown)
        return _paired((loaded[g.group_id], links(g.group_id)) for g in groups)

    def apply(self, changes: ChangeSet) -> View:
        """The view left after ``changes``; ``self`` is not modified."""
        if changes.is_empty:
            return self
        by_id = dict(self._by_id)
        removed: set[str] = set()
        added: dict[str, list[Message]] = {}
        excluded = self.excluded
        top_slot: dict[int, int] = {}  # the highest slot above 0 at each anchor
        if changes.summaries:
            for g in self.groups:
                if g.slot > top_slot.get(g.anchor, 0):
                    top_slot[g.anchor] = g.slot
        for summary in changes.summaries:
            replaced = [by_id[g] for g in summary.replaces if g in by_id and g not in removed]
            if not replaced:
                continue
            first = min(replaced, key=_ORDER)
            slot = 1 + top_slot.get(first.anchor, 0)
            top_slot[first.anchor] = slot
            view_group = GroupView(
                group_id=summary.group_id,
                kind="summary",
                turn=first.turn,
                anchor=first.anchor,
                slot=slot,
                message_count=1,
                token_count=self.count(summary.message),
                summary_of=tuple(g.group_id for g in replaced),
            )
            by_id[view_group.group_id] = view_group
            added[view_group.group_id] = [summary.message]
            removed.update(g.group_id for g in replaced)
            excluded = _add(excluded, replaced)
        for exclusion in changes.exclusions:
            group = by_id.get(exclusion.group_id)
            if group is not None and exclusion.group_id not in removed:
                removed.add(exclusion.group_id)
                excluded = _add(excluded, [group])
        reduced: dict[str, Message] = {}
        for reduction in changes.reductions:
            group = by_id.get(reduction.group_id)
            if group is None or reduction.group_id in removed:
                continue
            reduced[reduction.message_id] = reduction.message
        return self._rebuild(by_id, removed, added, reduced, excluded, changes)

    def _rebuild(
        self,
        by_id: dict[str, GroupView],
        removed: set[str],
        added: dict[str, list[Message]],
        reduced: dict[str, Message],
        excluded: Totals,
        changes: ChangeSet,
    ) -> View:
        deltas: dict[str, int] = {}
        for reduction in changes.reductions:
            if reduction.message_id in reduced:
                delta = reduction.tokens_after - reduction.tokens_before
                deltas[reduction.group_id] = deltas.get(reduction.group_id, 0) + delta
        groups = [
            replace(g, token_count=g.token_count + deltas[g.group_id])
            if g.group_id in deltas
            else g
            for g in by_id.values()
            if g.group_id not in removed
        ]
        groups.sort(key=_ORDER)
        source: MessageSource = self.source
        if added or reduced:
            source = _Overlay(base=self.source, added=added, reduced=reduced)
        return View(
            groups=tuple(groups),
            source=source,
            tokenizer=self.tokenizer,
            policy=self.policy,
            excluded=excluded,
        )

    @classmethod
    def from_messages(
        cls,
        messages: Sequence[Message],
        tokenizer: Tokenizer | None = None,
        *,
        policy: TokenCountPolicy = DEFAULT_POLICY,
        pinned: Iterable[str] = (),
        counter: Callable[[Message], int] | None = None,
    ) -> View:
        """Annotate and count a plain list of messages (nothing stored, nothing excluded).

        ``counter`` counts a message (a store passes its cache of pending counts); by
        default :func:`count_message_tokens` with ``tokenizer`` and ``policy``.
        """
        tokenizer = tokenizer or CharacterEstimatorTokenizer()
        if counter is None:
            counter = partial(count_message_tokens, tokenizer=tokenizer, policy=policy)
        annotation = annotate(messages)
        members: dict[str, list[Message]] = {}
        for message, (_, group_id) in zip(messages, annotation.message_groups, strict=True):
            members.setdefault(group_id, []).append(message)
        members = {gid: in_call_order(msgs, _itself) for gid, msgs in members.items()}
        pinned_ids = set(pinned)
        groups = []
        for group_id, msgs in members.items():
            info = annotation.groups[group_id]
            groups.append(
                GroupView(
                    group_id=group_id,
                    kind=info.kind,
                    turn=info.turn,
                    anchor=info.first_position + 1,
                    message_count=len(msgs),
                    token_count=sum(map(counter, msgs)),
                    pinned=group_id in pinned_ids,
                    has_reasoning=info.has_reasoning,
                    pending_calls=info.pending_calls,
                    orphan=info.orphan,
                )
            )
        groups.sort(key=_ORDER)
        return cls(
            groups=tuple(groups),
            source=InMemorySource(members),
            tokenizer=tokenizer,
            policy=policy,
        )


def _itself(message: Message) -> Message:
    return message


def _unknown(group_id: str) -> GroupLinks | None:
    return None


def _paired(groups: Iterable[tuple[Sequence[Message], GroupLinks | None]]) -> list[Message]:
    """The groups' messages in order, each result content that answers no earlier call
    dropped (and a message left empty by that): a closed group goes whole."""
    declared: set[str] = set()
    out: list[Message] = []
    for messages, links in groups:
        if links is not None and links.closed:
            out.extend(messages)
            declared.update(links.calls)
        else:
            _pair_messages(messages, declared, out)
    return out


def _pair_messages(messages: Iterable[Message], declared: set[str], out: list[Message]) -> None:
    """Add ``messages`` to ``out`` as :func:`_paired` does, one by one."""
    for message in messages:
        calls, answered = call_links(message)
        declared.update(c for c in calls if c)
        if all(c in declared for c in answered):
            out.append(message)
            continue
        kept = [c for c in message.contents if _answers(c) in declared or _answers(c) is None]
        if kept:
            out.append(message.model_copy(update={"contents": kept}))


def _answers(content: Content) -> str | None:
    """The call id a result content answers; None for anything that is not a result."""
    if isinstance(content, FunctionResultContent):
        return content.call_id
    if isinstance(content, OtherContent) and content.pairing == "result":
        return content.call_id or None
    return None


def _add(totals: Totals, groups: Sequence[GroupView]) -> Totals:
    return Totals(
        messages=totals.messages + sum(g.message_count for g in groups),
        groups=totals.groups + len(groups),
        tokens=totals.tokens + sum(g.token_count for g in groups),
    )
