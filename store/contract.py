"""The store's contract: its whole async API, stated once, for every backend.

:class:`HistoryBackend` is what :class:`store.HistoryStore` (SQL) and
:class:`store.InMemoryHistoryStore` implement, and what a third-party backend
implements to plug into the provider, the integrations, the demo and the CLI. Parts of
it stand alone, for consumers that need only those:

* :class:`ProviderBackend`: the four methods the two-phase provider calls
  (:class:`store.provider.TwoPhaseProvider`);
* :class:`MetadataBackend`: a session's metadata, where the provider records the spec
  of its before-call strategy when the backend has it;
* :class:`DemoBackend`: what the demo reads besides (its tokenizer, the session's
  aggregates, its stored history and audit).

All three are runtime-checkable: test a store with ``isinstance`` (``issubclass`` is not
supported, as the contract has properties). Methods are documented on
:class:`HistoryBackend`; the parts refer to them.

Every method raises only :class:`~store.errors.ChatledgerError` subclasses:
:class:`~store.errors.InvalidInput` for a bad argument (before anything is read or
written), :class:`~store.errors.SessionNotFound` where a session must exist.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from types import TracebackType
from typing import Literal, Protocol, Self, overload, runtime_checkable

from pydantic import JsonValue

from store.models import (
    CompactionEvent,
    EventOutcome,
    ExcludedGroup,
    ImportResult,
    Phase,
    Provenance,
    PurgeReport,
    RedactReport,
    SessionInfo,
    SessionOrder,
    Stats,
    StoredMessage,
    WhyResult,
)
from strategies.base import CompactionStrategy
from strategies.changeset import ChangeSet
from strategies.messages import Message
from strategies.tokenizers import TokenCountPolicy, Tokenizer
from strategies.view import View

__all__ = [
    "DEFAULT_TENANT",
    "DEFAULT_TOKENIZER",
    "PAGE_SIZE",
    "DemoBackend",
    "HistoryBackend",
    "MetadataBackend",
    "ProviderBackend",
]

DEFAULT_TENANT = "default"
"""The tenant of a store opened without one."""

DEFAULT_TOKENIZER = "o200k_base"
"""The tokenizer of a store opened without one (tiktoken's encoding, shipped offline)."""

PAGE_SIZE = 500
"""Messages per page of :meth:`HistoryBackend.aiter_history` when none is given."""


@runtime_checkable
class ProviderBackend(Protocol):
    """What :class:`store.provider.TwoPhaseProvider` calls (see :class:`HistoryBackend`)."""

    async def append(self, session_id: str, messages: Sequence[Message]) -> list[str]:
        """See :meth:`HistoryBackend.append`."""
        ...

    async def context(
        self,
        session_id: str,
        *,
        strategy: CompactionStrategy | None = None,
        pending: Sequence[Message] = (),
    ) -> list[Message]:
        """See :meth:`HistoryBackend.context`."""
        ...

    async def compact(
        self, session_id: str, strategy: CompactionStrategy, *, phase: Phase = ...
    ) -> CompactionEvent | None:
        """See :meth:`HistoryBackend.compact`."""
        ...

    async def history(
        self,
        session_id: str,
        *,
        include_excluded: bool = ...,
        limit: int | None = ...,
        before: int | None = ...,
    ) -> list[StoredMessage]:
        """See :meth:`HistoryBackend.history`."""
        ...


@runtime_checkable
class MetadataBackend(Protocol):
    """A session's metadata, read and replaced (see :class:`HistoryBackend`); the
    provider records its before-call strategy there when the backend has it."""

    async def get_metadata(self, session_id: str) -> dict[str, JsonValue]:
        """See :meth:`HistoryBackend.get_metadata`."""
        ...

    async def set_metadata(self, session_id: str, metadata: Mapping[str, JsonValue]) -> None:
        """See :meth:`HistoryBackend.set_metadata`."""
        ...


@runtime_checkable
class DemoBackend(ProviderBackend, Protocol):
    """What ``chatledger demo`` reads besides the provider's part (see
    :class:`HistoryBackend`)."""

    @property
    def tokenizer(self) -> Tokenizer:
        """See :attr:`HistoryBackend.tokenizer`."""
        ...

    @property
    def policy(self) -> TokenCountPolicy:
        """See :attr:`HistoryBackend.policy`."""
        ...

    async def session(self, session_id: str) -> SessionInfo:
        """See :meth:`HistoryBackend.session`."""
        ...

    def aiter_history(
        self, session_id: str, *, include_excluded: bool = ...
    ) -> AsyncIterator[StoredMessage]:
        """See :meth:`HistoryBackend.aiter_history`."""
        ...

    async def audit(self, session_id: str | None = ...) -> list[CompactionEvent]:
        """See :meth:`HistoryBackend.audit`."""
        ...


@runtime_checkable
class HistoryBackend(Protocol):
    """The store's whole async API, for one tenant.

    Sessions are created by their first write. Every read and write is limited to the
    store's tenant.
    """

    @property
    def tenant(self) -> str:
        """The tenant every call of this store is limited to."""
        ...

    @property
    def tokenizer(self) -> Tokenizer:
        """The tokenizer new messages are counted with (recorded per session)."""
        ...

    @property
    def policy(self) -> TokenCountPolicy:
        """The token-count policy new messages are counted with."""
        ...

    def count_tokens(self, message: Message) -> int:
        """Count ``message`` the way this store counts what it stores."""
        ...

    async def aclose(self) -> None:
        """Release what the store holds (idempotent)."""
        ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    # -- messages -----------------------------------------------------------------

    async def append(
        self,
        session_id: str,
        messages: Message | Iterable[Message],
        *,
        provenance: Provenance | None = None,
    ) -> list[str]:
        """Append ``messages`` (one message, or several) to the session (created on first
        use), in one write.

        Returns the id of each given message. A message whose id is already stored with
        the same content is skipped; with different content it raises
        :class:`~store.errors.InvalidInput` and nothing of the batch is stored. An empty
        batch does nothing (and creates no session). ``provenance`` is recorded on every
        message of the batch. Reads give ``created_at`` back in UTC (a naive one is taken
        as UTC).
        """
        ...

    async def history(
        self,
        session_id: str,
        *,
        include_excluded: bool = False,
        limit: int | None = None,
        before: int | None = None,
        after: int | None = None,
    ) -> list[StoredMessage]:
        """Stored messages of the session, oldest first, paged by ``seq``.

        ``after`` and ``before`` are exclusive ``seq`` bounds; with ``before`` and
        ``limit``, the newest ``limit`` messages before ``before`` are returned.
        Messages of excluded groups are left out unless ``include_excluded``.
        """
        ...

    def aiter_history(
        self,
        session_id: str,
        *,
        include_excluded: bool = False,
        after: int | None = None,
        before: int | None = None,
        page_size: int = PAGE_SIZE,
    ) -> AsyncIterator[StoredMessage]:
        """Stream the session's history oldest first, read ``page_size`` at a time.

        :class:`~store.errors.SessionNotFound` is raised at the first step when the
        session is absent, :class:`~store.errors.CorruptRowError` at a row that does not
        validate.
        """
        ...

    async def retract_last(self, session_id: str) -> StoredMessage | None:
        """Take back the session's newest appended message, for good, and return it as
        it was stored (None when the session holds no appended message).

        Unlike compaction this deletes: the message's group, the session's unanswered
        calls (a retracted result's call is pending again), annotation and totals become
        what they were before the message was appended, and its ``seq`` is given back
        when no summary was stored after it. Audited as a ``manual`` event of strategy
        ``retract``. Refused with :class:`~store.errors.InvalidInput` when the message is
        excluded, summarized or reduced, when it joined two groups into one, or when
        annotating the history again cannot give its stored groups (a result compacted
        before its call arrived, whose group a later result then merged with the
        call's). Re-annotates the session's appended messages: O(history).
        """
        ...

    # -- sessions -----------------------------------------------------------------

    async def sessions(
        self,
        *,
        limit: int | None = None,
        after: str | None = None,
        updated_since: datetime | None = None,
        order: SessionOrder = "id",
    ) -> list[SessionInfo]:
        """The tenant's sessions, by id (``order="id"``) or by last update, newest first
        (``order="updated"``), updated at or after ``updated_since``.

        Page with ``after``, the id of the last session seen (a keyset page: O(page)
        however many sessions there are).
        """
        ...

    async def session(self, session_id: str) -> SessionInfo:
        """One session's info and aggregates; :class:`~store.errors.SessionNotFound`
        when absent."""
        ...

    async def get_metadata(self, session_id: str) -> dict[str, JsonValue]:
        """The session's metadata."""
        ...

    async def set_metadata(self, session_id: str, metadata: Mapping[str, JsonValue]) -> None:
        """Replace the session's metadata (creating the session when absent)."""
        ...

    async def delete_session(self, session_id: str) -> None:
        """Delete the session and everything stored for it."""
        ...

    async def recount(self, session_id: str) -> SessionInfo:
        """Recount every message of the session with this store's tokenizer and policy,
        and record the tokenizer as the session's."""
        ...

    # -- projection ---------------------------------------------------------------

    async def view(self, session_id: str) -> View:
        """The active view of the session: what a strategy plans on."""
        ...

    async def context(
        self,
        session_id: str,
        *,
        strategy: CompactionStrategy | str | None = None,
        pending: Sequence[Message] = (),
    ) -> list[Message]:
        """The messages to send: the active groups plus ``pending``, through ``strategy``
        (a strategy or a spec, as for :meth:`compact`).

        ``pending`` are the in-flight messages of the run, not stored yet: annotated after
        the stored ones (a pending result joins its stored call), their token counts kept
        so that appending them later does not count them again. Nothing is persisted; a
        missing session reads as empty. Costs O(active groups and their messages).
        """
        ...

    # -- compaction ---------------------------------------------------------------

    @overload
    async def compact(
        self,
        session_id: str,
        strategy: CompactionStrategy | str,
        *,
        phase: Phase = ...,
        dry_run: Literal[False] = ...,
    ) -> CompactionEvent | None: ...

    @overload
    async def compact(
        self,
        session_id: str,
        strategy: CompactionStrategy | str,
        *,
        phase: Phase = ...,
        dry_run: Literal[True],
    ) -> ChangeSet: ...

    async def compact(
        self,
        session_id: str,
        strategy: CompactionStrategy | str,
        *,
        phase: Phase = "manual",
        dry_run: bool = False,
    ) -> CompactionEvent | ChangeSet | None:
        """Plan ``strategy`` (a strategy, or a spec such as ``"truncation:max_n=20,
        compact_to=10"``, see :func:`strategies.parse_strategy`) on a snapshot of the
        active view and apply it if still valid.

        The plan is made outside any write transaction; it applies only if the groups it
        touches are unchanged since the snapshot, else it is planned again once, and on a
        second conflict nothing is applied, a warning is logged and an ``abandoned``
        event is recorded. A plan that changes nothing but reports a failed step (a
        summarizer that raised or returned nothing) or protected groups above the budget
        records a ``failed`` or ``blocked`` event. Returns the event of the recorded
        outcome, or None when nothing changed and nothing was reported (no row); with
        ``dry_run`` the change set, writing nothing.
        """
        ...

    # -- audit --------------------------------------------------------------------

    async def audit(
        self,
        session_id: str | None = None,
        *,
        since: datetime | None = None,
        strategy: str | None = None,
        phase: Phase | None = None,
        limit: int | None = None,
        outcome: EventOutcome | None = None,
    ) -> list[CompactionEvent]:
        """Compaction events, newest first, of one session or of the whole tenant:
        every recorded outcome (``applied``, ``failed``, ``blocked``, ``abandoned``), or
        only ``outcome``'s."""
        ...

    async def excluded(self, session_id: str) -> list[ExcludedGroup]:
        """The session's excluded groups in projection order, with reason, event and
        summary."""
        ...

    async def why(self, session_id: str, message_id: str) -> WhyResult:
        """Whether a stored message is in the context (built without a strategy), and why."""
        ...

    async def stats(self, session_id: str | None = None) -> Stats:
        """Stored versus active messages, groups and tokens (one session or the tenant)."""
        ...

    # -- restore and pin ----------------------------------------------------------

    async def restore(
        self,
        session_id: str,
        *,
        group_ids: Iterable[str] | None = None,
        event_id: str | None = None,
    ) -> CompactionEvent | None:
        """Re-include groups (pinning them), or undo one event; audited as ``restore``.

        Restoring an event re-includes the groups it excluded or summarized, excludes the
        summaries it inserted and drops its reductions. Restoring a group replaced by a
        summary restores every group of that summary and excludes the summary. Only
        ``applied`` events can be restored (another outcome is :class:`InvalidInput`).
        Returns None when nothing changed.
        """
        ...

    async def pin(self, session_id: str, group_ids: Iterable[str]) -> list[str]:
        """Pin groups: strategies never exclude them. Returns the ids that changed."""
        ...

    async def unpin(self, session_id: str, group_ids: Iterable[str]) -> list[str]:
        """Unpin groups. Returns the ids that changed."""
        ...

    # -- import -------------------------------------------------------------------

    async def import_messages(
        self,
        session_id: str,
        messages: Sequence[Message],
        *,
        source: str = "agent_framework",
    ) -> ImportResult:
        """Append messages that another system may have compacted already.

        Agent Framework's annotations become exclusions and summary groups recorded as
        one ``import`` event, so that the projection never holds both a summary and what
        it replaced. Every message is recorded with ``source`` as its provenance.
        Importing the same messages again changes nothing.
        """
        ...

    # -- retention and erasure ----------------------------------------------------

    async def purge(
        self, *, older_than: datetime | timedelta, dry_run: bool = False
    ) -> PurgeReport:
        """Remove the tenant's sessions last updated before ``older_than`` (an aware
        datetime, or a timedelta back from now) with their messages, groups and audit
        events; with ``dry_run``, report what would go and remove nothing.

        The SQL backend erases in the bytes where the database can (see
        :mod:`store.sql.upkeep.erasure` and ``docs/retention.md``).
        """
        ...

    async def redact(
        self, session_id: str, message_ids: Iterable[str], *, reason: str
    ) -> RedactReport:
        """Replace the messages by tombstones that keep their id, role, call ids and
        pairing (see :mod:`store.rules.erasure`); recount their tokens, redact the
        summaries that cover them, clear their reductions, and audit it as a ``manual``
        event of strategy ``redact``.

        Unknown ids raise :class:`~store.errors.InvalidInput` and redact nothing; an
        already redacted message is left as it is. Appending or importing a redacted
        message again is a replay: reported as stored, never restored.
        """
        ...
