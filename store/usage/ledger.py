"""The rules of recording a call's usage, the same for every backend.

A store notes the context it projects for each session (:class:`ProjectionNotes`, in
the process, never written): the local count and the messages. A call recorded with
:meth:`~store.contract.HistoryBackend.record_usage` is paired with the session's newest
projection not yet paired, made by the same store object; older ones are dropped (a
projection that no recorded call followed was not sent, or its call reported nothing).
A call without one (recorded in another process, or after a restart, or a second call
inside one tool loop of a framework that projects once per run) is recorded without a
local count and left out of calibration.

For a paired call the store keeps the digest chain of its context (:func:`context_chain`:
each message's role and contents, chained), and records whether the context began with
the context of the session's previous paired call (:func:`prefix_kept`): what a
provider's prompt cache can reuse. A call whose context did not is a cache break.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from store.rules.identity import digest_bytes
from store.usage.models import Usage, UsageCall
from strategies.messages import Message

__all__ = [
    "NOTED_SESSIONS",
    "PreviousContext",
    "ProjectionNotes",
    "Sent",
    "UsageEntry",
    "context_chain",
    "prefix_kept",
]

NOTED_SESSIONS = 1024
"""How many sessions' newest projections a store keeps noted (the least recent go)."""


@dataclass(frozen=True, slots=True)
class Sent:
    """A projection as a call sent it: chatledger's count and the digest chain."""

    local_tokens: int
    chain: tuple[str, ...]
    """The digest of each prefix of the context (``chain[k]`` covers messages 0..k)."""
    source: object = None
    """The note it was read from."""


@dataclass(frozen=True, slots=True)
class _Projection:
    local_tokens: int
    messages: tuple[Message, ...]


class ProjectionNotes:
    """The newest projection of each session, noted by ``context`` and taken by
    ``record_usage`` (bounded: :data:`NOTED_SESSIONS`)."""

    def __init__(self, size: int = NOTED_SESSIONS) -> None:
        self._size = size
        self._notes: OrderedDict[str, _Projection] = OrderedDict()

    def note(self, session_id: str, local_tokens: int, messages: Sequence[Message]) -> None:
        """Note the projection ``context`` returned (it replaces an unpaired one)."""
        self._notes[session_id] = _Projection(local_tokens, tuple(messages))
        self._notes.move_to_end(session_id)
        while len(self._notes) > self._size:
            self._notes.popitem(last=False)

    def sent(self, session_id: str) -> Sent | None:
        """The session's newest unpaired projection, as sent; None when there is none.
        It stays noted until :meth:`paired` with it."""
        projection = self._notes.get(session_id)
        if projection is None:
            return None
        return Sent(projection.local_tokens, context_chain(projection.messages), projection)

    def paired(self, session_id: str, sent: Sent) -> None:
        """Drop the projection ``sent`` came from, now paired with a recorded call (a
        newer projection noted since stays)."""
        if self._notes.get(session_id) is sent.source:
            del self._notes[session_id]

    def forget(self, session_id: str) -> None:
        """Drop the session's note (the session was deleted)."""
        self._notes.pop(session_id, None)


def _message_digest(message: Message) -> bytes:
    """What a provider sees of a message: its role and contents (not its id, not its
    metadata), as canonical JSON."""
    contents = [c.model_dump(mode="json", exclude={"extra"}) for c in message.contents]
    text = json.dumps([message.role, contents], sort_keys=True, ensure_ascii=False)
    return digest_bytes(text.encode())


def context_chain(messages: Sequence[Message]) -> tuple[str, ...]:
    """The digest of each prefix of ``messages``: ``chain[k]`` covers messages 0..k."""
    chain: list[str] = []
    state = b""
    for message in messages:
        state = digest_bytes(state + _message_digest(message))
        chain.append(state.hex())
    return tuple(chain)


@dataclass(frozen=True, slots=True)
class PreviousContext:
    """What the session's previous paired call sent: its length and whole digest."""

    messages: int
    digest: str


def prefix_kept(chain: Sequence[str], previous: PreviousContext | None) -> bool | None:
    """Whether a context (its ``chain``) began with the previous paired call's context;
    None when there was no previous one."""
    if previous is None:
        return None
    if previous.messages == 0:
        return True
    return previous.messages <= len(chain) and chain[previous.messages - 1] == previous.digest


@dataclass(frozen=True, slots=True)
class UsageEntry:
    """A recorded call as a backend keeps it: the call, and the digest of its context
    (for the next call's :func:`prefix_kept`)."""

    call: UsageCall
    context: PreviousContext | None

    @staticmethod
    def of(
        session_id: str,
        seq: int,
        usage: Usage,
        *,
        call_id: str | None,
        message_id: str | None,
        after_seq: int | None,
        sent: Sent | None,
        previous: PreviousContext | None,
        recorded_at: datetime,
    ) -> UsageEntry:
        """The entry of a call, its prefix judged against ``previous``."""
        context = None
        kept = None
        if sent is not None:
            kept = prefix_kept(sent.chain, previous)
            context = PreviousContext(len(sent.chain), sent.chain[-1] if sent.chain else "")
        call = UsageCall(
            session_id=session_id,
            seq=seq,
            call_id=call_id,
            message_id=message_id,
            after_seq=after_seq,
            usage=usage,
            local_tokens=None if sent is None else sent.local_tokens,
            prefix_kept=kept,
            recorded_at=recorded_at,
        )
        return UsageEntry(call, context)
