"""The message and group rows of an append, built slice by slice and counted once.

The ``contents`` and ``metadata`` columns are the texts :mod:`store.sql.codec` encodes,
once per message (no second serialization by the driver layer; the ``contents`` JSON
that hashing wrote is reused), the content hash computed by the dedupe step is reused,
and each message is tokenized once: here, or in the counting thread of a large append
(:mod:`store.sql.append.counting`). Rows are driver tuples for an ``INSERT`` compiled
once per dialect (:class:`~store.sql.append.inserts.DriverInsert`): its bind processors
are applied only to the columns that have one (timestamps, ``excluded``, the group's
kind and flags), and once per slice to the constants. A new group's row is ready as soon
as its last message is built (:class:`NewGroups`), so it goes out in the same pipeline
as the messages.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.engine import RowMapping

from store.models import Provenance
from store.rules.records import now
from store.search.text import search_text_of
from store.sql.append.inserts import DriverInsert
from store.sql.codec import encode_author, encode_contents, encode_metadata, sealing_now
from strategies.groups import GroupInfo
from strategies.messages import Message
from strategies.tokenizers import TokenCountPolicy, Tokenizer, count_message_tokens

__all__ = ["AppendContext", "AppendTotals", "NewGroups", "RowBuilder"]


@dataclass(frozen=True, slots=True)
class AppendContext:
    """Who appends, and how tokens are counted."""

    tenant: str
    session_id: str
    tokenizer: Tokenizer
    policy: TokenCountPolicy
    provenance: Provenance | None = None
    counter: Callable[[Message], int] | None = None
    """Counts a message's tokens (the store's pending-count cache); the tokenizer if None."""
    holds: Callable[[Message], bool] | None = None
    """Whether ``counter`` holds a message's count already (it is not tokenized again)."""

    def count(self, message: Message) -> int:
        """The token count of ``message`` as it is stored."""
        if self.counter is not None:
            return self.counter(message)
        return count_message_tokens(message, self.tokenizer, policy=self.policy)


@dataclass(slots=True)
class AppendTotals:
    """What an append adds to the session's and groups' aggregates."""

    messages: int = 0
    tokens: int = 0
    active_messages: int = 0
    active_tokens: int = 0
    groups: int = 0
    active_groups: int = 0
    per_group: dict[str, list[int]] = field(default_factory=dict)


@dataclass(slots=True)
class RowBuilder:
    """Builds the messages' insert parameter sets, slice by slice, adding to the totals."""

    ctx: AppendContext
    next_seq: int
    fresh: Sequence[Message]
    hashes: Mapping[str, str]
    group_ids: Sequence[str]
    kinds: Sequence[str | None]
    """The ``group_kind`` column of each message: its group's kind where the message
    settles it (:func:`~strategies.groups.kind_is_settled`), else None."""
    groups: Mapping[str, RowMapping]
    """The stored groups the append touches (by id)."""
    totals: AppendTotals
    stamp: datetime = field(default_factory=now)
    contents: Mapping[str, str] = field(default_factory=dict)
    """The ``contents`` JSON of messages whose hashing wrote it, by id."""

    def rows(
        self,
        start: int,
        stop: int,
        binds: DriverInsert,
        counted: Sequence[int | None] | None = None,
    ) -> list[tuple[Any, ...]]:
        """Driver rows of ``fresh[start:stop]``, in :data:`MESSAGE_COLUMNS` order.

        Tokens are counted here, once per message, unless ``counted`` gives a message's
        count (counted in the background); the bind processors of the constant values
        (the import stamp, ``excluded``) run once per slice.
        """
        ctx, totals = self.ctx, self.totals
        tenant, session_id, provenance = ctx.tenant, ctx.session_id, ctx.provenance
        source_ids = provenance.source_ids if provenance else {}
        source_system = provenance.system if provenance else None
        imported_at = binds.processor("imported_at")(
            (provenance.imported_at or self.stamp) if provenance else None
        )
        stored_at = binds.processor("stored_at")(self.stamp)
        excluded_flag = binds.processor("excluded")
        flags = (excluded_flag(False), excluded_flag(True))
        count = ctx.counter if ctx.counter is not None else ctx.count
        created_at, groups = binds.processor("created_at"), self.groups
        hashes, per_group, written = self.hashes, totals.per_group, self.contents
        tokens_sum = active_messages = active_tokens = 0
        searchable = sealing_now() is None  # an encrypted tenant keeps no searchable text
        seq = self.next_seq + start
        out: list[tuple[Any, ...]] = []
        known = counted if counted is not None else [None] * (stop - start)
        for message, group_id, kind, tokens in zip(
            self.fresh[start:stop],
            self.group_ids[start:stop],
            self.kinds[start:stop],
            known,
            strict=True,
        ):
            message_id = message.message_id
            if tokens is None:
                tokens = count(message)
            counts = per_group.get(group_id)
            if counts is None:
                per_group[group_id] = [1, tokens]
            else:
                counts[0] += 1
                counts[1] += tokens
            tokens_sum += tokens
            group = groups.get(group_id) if groups else None
            reason = event_id = None
            if group is not None and group["excluded"]:
                excluded = True
                reason, event_id = group["excluded_reason"], group["excluded_event_id"]
            else:
                excluded = False
                active_messages += 1
                active_tokens += tokens
            contents = encode_contents(
                tenant, session_id, seq, message.contents, written.get(message_id)
            )
            metadata = encode_metadata(tenant, session_id, seq, message.metadata)
            out.append(
                (
                    tenant,
                    session_id,
                    seq,
                    seq,  # anchor
                    0,  # slot
                    message_id,
                    message.role,
                    contents,
                    encode_author(tenant, session_id, seq, message.author_name),
                    created_at(message.created_at),
                    stored_at,
                    metadata,
                    hashes[message_id],
                    group_id,
                    tokens,
                    flags[excluded],
                    reason,
                    event_id,
                    source_system,
                    source_ids.get(message_id),
                    imported_at,
                    kind,
                    search_text_of(message) if searchable else None,
                )
            )
            seq += 1
        totals.messages += len(out)
        totals.tokens += tokens_sum
        totals.active_messages += active_messages
        totals.active_tokens += active_tokens
        return out


@dataclass(slots=True)
class NewGroups:
    """The rows of the groups an append creates, each ready once its messages are built.

    Rows are given in the order of ``groups`` (the annotation's): a group is written once
    every message of it is built and every group before it was written.
    """

    ctx: AppendContext
    first_seq: int
    """``seq`` of annotation position 0 (a group's ``seq`` is this plus its position)."""
    groups: Sequence[GroupInfo]
    last: Mapping[str, int]
    """Index (in the appended messages) of each group's last message."""
    totals: AppendTotals
    gains: Mapping[str, Sequence[int]]
    """What each group gains from stored groups merged into it (messages, tokens)."""
    revision: int
    """The session's revision the append writes (``written_revision``)."""
    stamp: datetime = field(default_factory=now)
    written: int = 0

    def ready(self, stop: int, binds: DriverInsert, *, final: bool) -> list[tuple[Any, ...]]:
        """Driver rows of the groups complete once ``fresh[:stop]`` is built (every
        remaining group when ``final``, those without messages in the append too)."""
        groups, last = self.groups, self.last
        end = self.written
        if final:
            end = len(groups)
        while end < len(groups) and last.get(groups[end].group_id, stop) < stop:
            end += 1
        if end == self.written:
            return []
        tenant, session_id = self.ctx.tenant, self.ctx.session_id
        per_group, gains = self.totals.per_group, self.gains
        created_at = binds.processor("created_at")(self.stamp)
        kind_of = binds.processor("kind")
        reasoning, orphan = binds.processor("has_reasoning"), binds.processor("orphan")
        reasoning_flags = (reasoning(False), reasoning(True))
        orphan_flags = (orphan(False), orphan(True))
        kinds: dict[str, Any] = {}
        out: list[tuple[Any, ...]] = []
        for info in groups[self.written : end]:
            group_id, position = info.group_id, info.first_position
            count, tokens = per_group.get(group_id, (0, 0))
            gain = gains.get(group_id, (0, 0))
            kind = kinds.get(info.kind)
            if kind is None:
                kind = kinds[info.kind] = kind_of(info.kind)
            seq = self.first_seq + position
            out.append(
                (
                    tenant,
                    session_id,
                    group_id,
                    kind,
                    info.turn,
                    seq,  # anchor
                    0,  # slot
                    seq,
                    position,
                    count + gain[0],
                    tokens + gain[1],
                    reasoning_flags[bool(info.has_reasoning)],
                    info.pending_calls,
                    orphan_flags[bool(info.orphan)],
                    created_at,
                    self.revision,
                )
            )
        self.written = end
        return out
