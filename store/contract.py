"""The store's contract: its whole async API, stated once, and the one front that
implements it for every backend.

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

:class:`BackendBase` is the way to write a backend: it implements every method of the
contract once (the argument checks, the closed-store guard, the spans, the translation
of a strategy's errors) and calls the backend's own primitives. Both backends are built
on it; a backend may also implement :class:`HistoryBackend` directly.

Abilities beyond the contract are small Protocols of their own, each with a function
that tells whether a store has it: :class:`BulkImportBackend`
(:func:`is_bulk_import_backend`), :class:`AdminBackend` (:func:`is_admin_backend`) and
:class:`UpkeepBackend` (:func:`is_upkeep_backend`).

Every method raises only :class:`~store.errors.ChatledgerError` subclasses:
:class:`~store.errors.InvalidInput` for a bad argument (before anything is read or
written), :class:`~store.errors.SessionNotFound` where a session must exist,
:class:`~store.errors.StoreClosed` once the store is closed.
"""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from types import TracebackType
from typing import (
    TYPE_CHECKING,
    Any,
    Literal,
    NamedTuple,
    Protocol,
    Self,
    TypeGuard,
    overload,
    runtime_checkable,
)

from pydantic import JsonValue

from store import telemetry
from store.errors import InvalidInput, StoreClosed, strategy_errors
from store.models import (
    BranchInfo,
    CompactionEvent,
    CompactionRequest,
    DoctorReport,
    EventOutcome,
    ExcludedGroup,
    ImportResult,
    Phase,
    Provenance,
    PurgeReport,
    RedactReport,
    SearchPage,
    SessionInfo,
    SessionOrder,
    Stats,
    StoredMessage,
    TenantInfo,
    WhyResult,
)
from store.rules.checks import (
    check_bound,
    check_compact_phase,
    check_flag,
    check_limit,
    check_message,
    check_metadata,
    check_outcome,
    check_page_size,
    check_phase,
    check_provenance,
    check_restore_target,
    check_session_id,
    check_session_order,
    check_since,
    check_tenant,
    check_text,
    check_title,
    checked_ids,
    checked_messages,
    compaction_request,
    resolve_strategy,
    resolve_tokenizer,
)
from store.rules.conflicts import planner
from store.rules.erasure import check_redaction, purge_cutoff
from store.rules.limits import DEFAULT_LIMITS, Limits
from store.rules.records import now
from store.search.request import SearchRequest, check_search
from store.telemetry.names import (
    SPAN_APPEND,
    SPAN_APPEND_IF,
    SPAN_CONTEXT,
    SPAN_FORK,
    SPAN_IMPORT,
    SPAN_LOCATE,
    SPAN_RECORD_USAGE,
    SPAN_REQUEST_COMPACTION,
    SPAN_REWIND,
    SPAN_SEARCH,
    SPAN_SET_TITLE,
    SPAN_USAGE,
)
from store.usage.calibration import WINDOW as FIT_WINDOW
from store.usage.calibration import fit
from store.usage.checks import (
    check_grouping,
    check_prices,
    check_usage,
    paired_points,
    usage_since,
)
from store.usage.ledger import ProjectionNotes, Sent
from store.usage.models import Calibration, ModelPrice, Usage, UsageCall, UsageReport
from store.usage.report import report as usage_report
from store.usage.report import row_of
from strategies.base import CompactionStrategy
from strategies.changeset import ChangeSet
from strategies.messages import Message
from strategies.requested import RequestedStrategy
from strategies.tokenizers import (
    DEFAULT_POLICY,
    TiktokenTokenizer,
    TokenCountPolicy,
    Tokenizer,
    count_message_tokens,
)
from strategies.view import View

__all__ = [
    "BEFORE_STRATEGY_KEY",
    "DEFAULT_TENANT",
    "DEFAULT_TOKENIZER",
    "PAGE_SIZE",
    "RECORD_KEY",
    "AdminBackend",
    "BackendBase",
    "BulkImportBackend",
    "BulkUsageBackend",
    "CompactionRequests",
    "DemoBackend",
    "HistoryBackend",
    "MetadataBackend",
    "ProviderBackend",
    "UpkeepBackend",
    "UsageBackend",
    "UsageRecord",
    "Written",
    "is_admin_backend",
    "is_bulk_import_backend",
    "is_bulk_usage_backend",
    "is_upkeep_backend",
]

DEFAULT_TENANT = "default"
"""The tenant of a store opened without one."""

DEFAULT_TOKENIZER = "o200k_base"
"""The tokenizer of a store opened without one (tiktoken's encoding, shipped offline)."""

PAGE_SIZE = 500
"""Messages per page of :meth:`HistoryBackend.aiter_history` when none is given."""

RECORD_KEY = "chatledger.record"
"""The key of a session's metadata under which :meth:`HistoryBackend.append_if` keeps
the session's record."""


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
class UsageBackend(Protocol):
    """What a provider records each model call's usage on, and reads its calibration
    from (:class:`HistoryBackend` has both)."""

    async def record_usage(
        self,
        session_id: str,
        usage: Usage,
        *,
        message_id: str | None = None,
        call_id: str | None = None,
    ) -> None:
        """See :meth:`HistoryBackend.record_usage`."""
        ...

    async def calibration(self, session_id: str, *, model: str | None = None) -> Calibration | None:
        """See :meth:`HistoryBackend.calibration`."""
        ...


BEFORE_STRATEGY_KEY = "chatledger.before_strategy"
"""The session metadata key under which a provider records the spec of its before-call
strategy (``chatledger show --context`` projects with it, ``request_compaction(now=True)``
compacts with it; :mod:`store.provider` re-exports it)."""


@runtime_checkable
class CompactionRequests(Protocol):
    """What a provider asks for compaction on (see :class:`HistoryBackend`)."""

    async def request_compaction(
        self,
        session_id: str,
        *,
        reason: str = ...,
        focus: str | None = ...,
        now: bool = ...,
        strategy: CompactionStrategy | str | None = ...,
    ) -> CompactionEvent | None:
        """See :meth:`HistoryBackend.request_compaction`."""
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
        batch does nothing (and creates no session). More messages than the store's
        ``limits.max_append_messages`` (100,000 by default) raise ``InvalidInput`` and
        store nothing: a larger history goes in with ``chatledger import``. ``provenance``
        is recorded on every message of the batch. Reads give ``created_at`` back in UTC
        (a naive one is taken as UTC).
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

    async def append_if(
        self,
        session_id: str,
        messages: Message | Iterable[Message],
        *,
        record: Mapping[str, JsonValue],
        expected: str | None,
    ) -> list[str]:
        """Append ``messages`` and replace the session's record with ``record``, in one
        transaction, only if the stored record's ``revision`` is ``expected`` (None: the
        session has no record, or does not exist yet).

        The record is a JSON object holding a string ``revision``, kept in the session's
        metadata under :data:`RECORD_KEY` (the rest of the metadata is left as it is);
        read it back with :meth:`get_metadata`. Another revision raises
        :class:`~store.errors.RecordConflict` and stores nothing. The messages follow
        :meth:`append`'s rules (an empty batch writes the record alone). A fork starts
        with its source's metadata, record included.
        """
        ...

    async def locate(self, message_id: str) -> str | None:
        """The session holding the message ``message_id`` in the store's tenant, found
        by an index (None when no session holds it).

        Where several branches hold it (a fork, a superseded tail, the same id appended
        again after a rewind), the session that stored the row is preferred, then the
        first by id of those that read it: any of them reads the message with the
        history that led to it.
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

    async def set_title(self, session_id: str, title: str | None) -> None:
        """Set the session's title (:attr:`SessionInfo.title`), creating the session when
        absent; None removes it. A title is one line of printable text, at most 500
        characters, not only whitespace (anything else: :class:`InvalidInput`). Counts
        as a write (the session's ``revision`` and ``updated_at``); a superseded tail is
        refused like any write to it."""
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

    async def request_compaction(
        self,
        session_id: str,
        *,
        reason: str = "manual",
        focus: str | None = None,
        now: bool = False,
        strategy: CompactionStrategy | str | None = None,
    ) -> CompactionEvent | None:
        """Ask for compaction of an existing session: its next compaction (and, until
        then, every projection with a strategy) runs whatever its strategy's triggers say
        (:func:`strategies.requested.requested`), passes ``focus`` to a summarizer that
        accepts it, and records ``reason`` and ``focus`` on its event
        (``params["request"]``, :attr:`CompactionEvent.reason`); then the request is
        consumed. A newer request replaces an older one. Returns None.

        With ``now=True`` the compaction runs at once (phase ``manual``) with
        ``strategy``, or else the before-call strategy a provider recorded in the
        session's metadata, and its event (or None when nothing changed) is returned;
        a request waiting is consumed by it. ``reason`` is one line of text, at most
        200 characters; ``focus`` at most 2,000 (anything else: :class:`InvalidInput`).
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
        already redacted message stays as it is, and what an earlier redaction left of
        it (a content hash, a ``doctor`` quarantine copy) is erased (``leftovers``).
        The row keeps no hash of what it held. Appending or importing any message under
        a redacted id again is a replay: reported as stored, never restored. Where a
        write-ahead log keeps old pages (SQLite), the log is checkpointed every time;
        ``complete`` is False when a reader kept it from being truncated.
        """
        ...

    async def fork(
        self, session_id: str, *, at: str | None = None, new_session_id: str | None = None
    ) -> SessionInfo:
        """A new session whose history is this one's up to and including message ``at``
        (default: all of it; a message of a superseded tail is allowed), then its own
        appends; message ids are kept, and no message is copied: the fork reads the
        stored rows it shares with its parent.

        The fork starts with the source's metadata and title, and its exclusions,
        summaries, reductions and pins
        over that prefix, except a summary that covers messages after ``at`` (not
        carried over: the groups it replaced are active in the fork). Its audit starts
        with a ``fork`` event saying what it inherited. From then on each branch keeps
        its own state: nothing written to one changes what the other reads, except a
        redaction, which reaches every branch holding the message. ``new_session_id``
        defaults to a fresh ``fork-`` id. An existing ``new_session_id``, an unknown
        ``at``, or an ``at`` that cuts a tool call from its result is
        :class:`~store.errors.InvalidInput` naming it.
        """
        ...

    async def rewind(self, session_id: str, *, to: str | None) -> CompactionEvent | None:
        """Set the messages after ``to`` (``None``: all of them) aside as a superseded
        tail: they leave the session's history and context (``include_excluded=True``
        too), are kept under a tail id (:meth:`branches`), and are recorded by an event
        of phase ``rewind``. Appends continue at ``to``'s position (the tail's ids may be
        appended again). ``restore(session_id, event_id=<the rewind event>)`` brings the
        tail back at any time; whatever was appended since becomes a tail in its turn.
        A rewind to the last message changes nothing and returns None; ``to`` follows
        the cutting rule of :meth:`fork`.
        """
        ...

    async def branches(self, session_id: str) -> list[BranchInfo]:
        """The session's parent (``relation="parent"``, with the fork point), its forks
        (``"fork"``) and its superseded tails (``"tail"``), in that order, each oldest
        first."""
        ...

    async def search(
        self,
        query: str,
        *,
        session_id: str | None = None,
        include_excluded: bool = True,
        excluded_only: bool = False,
        roles: Iterable[str] | None = None,
        limit: int = 20,
        cursor: str | None = None,
    ) -> SearchPage:
        """Full-text search of the tenant's stored messages (``docs/search.md``): what
        the model sees of each (text, reasoning, call names and arguments, results),
        normalized by :func:`~store.search.normalize` (no case, no diacritics, CJK found
        inside unspaced text). ``query`` is words (all must match), ``"quoted
        phrases"`` and ``word*`` prefixes; anything else is
        :class:`~store.errors.InvalidInput`. Best matches first, ties newest first,
        ``limit`` a page; ``next_cursor`` continues it. Tenant-wide, a message shared by
        branches is one hit, under the session that stored it; with ``session_id``, the
        session's whole conversation with its own exclusion state. Summaries and
        redacted messages are searched as they read now.
        """
        ...

    # -- usage ------------------------------------------------------------------------

    async def record_usage(
        self,
        session_id: str,
        usage: Usage,
        *,
        message_id: str | None = None,
        call_id: str | None = None,
    ) -> None:
        """Record what one model call of the session cost, as its provider reported it
        (``docs/usage.md``). ``message_id`` ties it to the assistant message the call
        produced (which may be stored after the usage); without it the call belongs to
        the session's newest turn. A ``call_id`` recorded already for the session makes
        the call a no-op. The call is paired with the session's newest projection of
        this store not yet paired (:meth:`context`), whose local count and cache prefix
        it keeps. The session need not exist yet; redaction leaves the record,
        ``delete_session`` and ``purge`` remove it."""
        ...

    async def usage_calls(self, session_id: str) -> list[UsageCall]:
        """The session's recorded calls, in the order they were recorded."""
        ...

    async def usage(
        self,
        session_id: str | None = None,
        *,
        since: datetime | timedelta | None = None,
        by: str = "model",
        prices: Mapping[str, ModelPrice] | None = None,
    ) -> UsageReport:
        """The recorded calls of one session, or of the tenant, totalled by ``model``,
        ``session`` or ``day`` (UTC), from ``since`` (a time, or a span back from now);
        priced with ``prices`` (``{model: ModelPrice}``, see
        :func:`store.usage.load_prices`) when given."""
        ...

    async def calibration(self, session_id: str, *, model: str | None = None) -> Calibration | None:
        """The fit of the provider's input count on chatledger's for the session's calls
        of ``model`` (None: the model of the newest paired call), or None before a call
        paired with a projection (:mod:`store.usage.calibration`)."""
        ...


# -- abilities beyond the contract ----------------------------------------------------


@runtime_checkable
class BulkImportBackend(Protocol):
    """The bulk path of an import: many sessions read in one go, and written in one
    transaction.

    The importer (:mod:`store.importing`) takes it when the store has it
    (:func:`is_bulk_import_backend`), and else the contract's methods, a session at a
    time.
    """

    async def stored_hashes(self, session_ids: Sequence[str]) -> dict[str, dict[str, str]]:
        """The content hash of each stored message id of each of ``session_ids`` (sessions
        that hold no message are left out)."""
        ...

    async def append_sessions(
        self, batches: Sequence[tuple[str, Sequence[Message], Provenance | None]]
    ) -> int:
        """Append each ``(session id, messages, provenance)`` as
        :meth:`HistoryBackend.append` would, in the given order, in one write: nothing is
        stored when one fails. Returns the messages stored."""
        ...


def is_bulk_import_backend(store: object) -> TypeGuard[BulkImportBackend]:
    """Whether ``store`` has the bulk path of an import (:class:`BulkImportBackend`)."""
    return isinstance(store, BulkImportBackend)


UsageRecord = tuple[str, Usage, str | None, str | None]
"""One call for :meth:`BulkUsageBackend.record_usages`: ``(session id, usage,
message_id, call_id)``."""


@runtime_checkable
class BulkUsageBackend(Protocol):
    """Many calls' usage recorded in one transaction: the importer's path (a store
    without it is asked :meth:`HistoryBackend.record_usage` a call at a time)."""

    async def record_usages(self, calls: Sequence[UsageRecord]) -> int:
        """Record each ``(session id, usage, message_id, call_id)`` as
        :meth:`HistoryBackend.record_usage` would, in the given order, in one write
        (nothing is recorded when one fails), none paired with a projection (the calls
        were not made through this store). A ``call_id`` recorded already for its
        session, or earlier in ``calls``, records nothing. Returns the calls recorded."""
        ...


def is_bulk_usage_backend(store: object) -> TypeGuard[BulkUsageBackend]:
    """Whether ``store`` records many calls in one write (:class:`BulkUsageBackend`)."""
    return isinstance(store, BulkUsageBackend)


@runtime_checkable
class AdminBackend(Protocol):
    """Administration across the tenants of the store's database, which the contract
    never reaches (every call of a store is limited to its tenant). It only reads."""

    async def tenants(self) -> list[TenantInfo]:
        """Every tenant of the database with its totals, by name."""
        ...


def is_admin_backend(store: object) -> TypeGuard[AdminBackend]:
    """Whether ``store`` can list its database's tenants (:class:`AdminBackend`)."""
    return isinstance(store, AdminBackend)


@runtime_checkable
class UpkeepBackend(Protocol):
    """Upkeep of the stored rows: check them and repair what can be repaired, and give
    the space of what was deleted back to the system."""

    async def doctor(self, session_id: str | None = None, *, fix: bool = False) -> DoctorReport:
        """Check one session, or every session of the tenant, for damage; with ``fix``,
        repair what can be repaired (each repair audited)."""
        ...

    async def vacuum(self) -> None:
        """Return the space of what was deleted to the system, leaving no old copy of an
        erased row behind where the storage allows."""
        ...


def is_upkeep_backend(store: object) -> TypeGuard[UpkeepBackend]:
    """Whether ``store`` can check, repair and vacuum its rows (:class:`UpkeepBackend`)."""
    return isinstance(store, UpkeepBackend)


# -- the one front ----------------------------------------------------------------------


class Written(NamedTuple):
    """What a write stored, as a primitive reports it to :class:`BackendBase` (the
    figures of the operation's span and of the stored-tokens metric)."""

    messages: int
    """Messages stored (those found stored already are not counted)."""
    tokens: int
    """Their tokens."""


_CLOSED = "the store was closed (aclose): open a new one"


class BackendBase(metaclass=ABCMeta):
    """The way to write a backend: the whole contract, written once, over a backend's
    primitives.

    Every method of :class:`HistoryBackend` is implemented here. It refuses a closed
    store (:class:`~store.errors.StoreClosed`), checks its arguments with
    :mod:`store.rules.checks` (:class:`~store.errors.InvalidInput`, before anything is
    read or written), opens its span where the operation has one (``chatledger.append``,
    ``chatledger.context``, ``chatledger.compact``, ``chatledger.import``: see
    :mod:`store.telemetry`), and calls the backend's primitive of the same name with a
    leading underscore (``append`` calls :meth:`_append`) inside
    :meth:`_translate_errors`, which turns a strategy's errors into ``InvalidInput``. A
    primitive is given checked arguments in their normal form (a list of messages, a
    resolved strategy, lists of ids) and does the backend's own work only::

        class MyBackend(BackendBase):
            def __init__(self, client: MyClient, *, tenant: str = DEFAULT_TENANT) -> None:
                super().__init__(tenant=tenant)
                self._client = client

            async def _append(self, session_id, batch, provenance) -> Written: ...
            ...  # every abstract primitive

    A subclass calls ``super().__init__`` with its tenant, tokenizer, policy and limits,
    implements every abstract primitive (the class cannot be instantiated before), and
    may override :meth:`_release` (what :meth:`aclose` frees) and
    :meth:`_translate_errors` (to translate its own driver's errors too). The abilities
    beyond the contract (:class:`BulkImportBackend`, :class:`AdminBackend`,
    :class:`UpkeepBackend`) are the subclass's own public methods.

    The contract grows by addition only. A method added to :class:`HistoryBackend` gets
    a default here that raises ``InvalidInput("<method> is not supported by <backend
    class name>")`` (:meth:`_unsupported`), and ``CHANGELOG.md`` names it: a backend
    built on this base keeps working, and keeps conforming, until it implements it.
    """

    def __init__(
        self,
        *,
        tenant: str = DEFAULT_TENANT,
        tokenizer: Tokenizer | None = None,
        policy: TokenCountPolicy = DEFAULT_POLICY,
        limits: Limits | None = None,
    ) -> None:
        """A store of ``tenant`` that counts with ``tokenizer`` (or the tokenizer a name
        names; tiktoken's ``o200k_base``, loaded on first use, when None) and ``policy``,
        and accepts what ``limits`` allow (:class:`~store.rules.limits.Limits`)."""
        check_tenant(tenant)
        if limits is not None and not isinstance(limits, Limits):
            raise InvalidInput(f"limits must be a Limits, got {type(limits).__name__}")
        resolved = resolve_tokenizer(tokenizer)
        self._tenant = tenant
        self._limits = limits or DEFAULT_LIMITS
        self._tokenizer: Tokenizer | None = resolved
        self._tokenizer_name = resolved.name if resolved is not None else DEFAULT_TOKENIZER
        self._policy = policy
        self._closed = False
        self._projections = ProjectionNotes()
        """The newest projection of each session, for the next recorded call."""

    # -- what the store is ------------------------------------------------------------

    @property
    def tenant(self) -> str:
        """The tenant every call of this store is limited to."""
        return self._tenant

    @property
    def tokenizer(self) -> Tokenizer:
        """The tokenizer new messages are counted with (the default one is loaded on first
        use: calls that count nothing never load it)."""
        if self._tokenizer is None:
            self._tokenizer = TiktokenTokenizer(self._tokenizer_name)
        return self._tokenizer

    @property
    def policy(self) -> TokenCountPolicy:
        """The token-count policy new messages are counted with."""
        return self._policy

    @property
    def limits(self) -> Limits:
        """The largest values the store accepts (:class:`~store.rules.limits.Limits`)."""
        return self._limits

    def count_tokens(self, message: Message) -> int:
        """Count ``message`` the way this store counts what it stores."""
        return count_message_tokens(message, self.tokenizer, policy=self._policy)

    # -- lifecycle --------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the store and release what it holds (:meth:`_release`); every later call
        raises :class:`~store.errors.StoreClosed`. Idempotent."""
        if not self._closed:
            self._closed = True
            await self._release()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def _check_open(self) -> None:
        """Refuse a closed store."""
        if self._closed:
            raise StoreClosed(_CLOSED)

    async def _release(self) -> None:
        """Free what the backend holds, once, when the store is closed (nothing here)."""
        return

    def _translate_errors(self) -> AbstractContextManager[None]:
        """The context every primitive runs in, so that a call raises only
        :class:`~store.errors.ChatledgerError` (the stream of :meth:`_aiter_history`,
        which runs after its call has returned, translates its own). Here a strategy's
        errors become :class:`~store.errors.InvalidInput`
        (:func:`~store.errors.strategy_errors`); a backend whose storage raises errors of
        its own translates those as well, and a strategy's still."""
        return strategy_errors()

    def _checked_batch(
        self, session_id: str, messages: Message | Iterable[Message], provenance: object
    ) -> list[Message]:
        """The checks of an append (the session id, the provenance, every message), and
        its messages as a list: for :meth:`append` and a backend's bulk appends."""
        check_session_id(session_id, self._limits)
        check_provenance(provenance)
        batch = checked_messages(messages, self._limits)
        for message in batch:
            check_message(message, self._limits)
        return batch

    def _unsupported(self, method: str) -> InvalidInput:
        """The error of a contract method this backend does not implement (the default
        of a method added to the contract after the backend was written)."""
        return InvalidInput(f"{method} is not supported by {type(self).__name__}")

    # -- messages ---------------------------------------------------------------------

    async def append(
        self,
        session_id: str,
        messages: Message | Iterable[Message],
        *,
        provenance: Provenance | None = None,
    ) -> list[str]:
        """Append ``messages`` to the session, in one write (see the contract)."""
        self._check_open()
        batch = self._checked_batch(session_id, messages, provenance)
        if not batch:
            return []
        with (
            self._translate_errors(),
            telemetry.operation(SPAN_APPEND, self._tenant, session_id) as traced,
        ):
            written = await self._append(session_id, batch, provenance)
            traced.stored(written.messages, written.tokens)
        return [m.message_id for m in batch]

    async def history(
        self,
        session_id: str,
        *,
        include_excluded: bool = False,
        limit: int | None = None,
        before: int | None = None,
        after: int | None = None,
    ) -> list[StoredMessage]:
        """Stored messages of the session, oldest first, paged by ``seq``."""
        self._check_open()
        check_session_id(session_id, self._limits)
        check_limit(limit)
        check_bound(before, "before")
        check_bound(after, "after")
        with self._translate_errors():
            return await self._history(
                session_id,
                include_excluded=include_excluded,
                limit=limit,
                before=before,
                after=after,
            )

    def aiter_history(
        self,
        session_id: str,
        *,
        include_excluded: bool = False,
        after: int | None = None,
        before: int | None = None,
        page_size: int = PAGE_SIZE,
    ) -> AsyncIterator[StoredMessage]:
        """Stream the session's history, ``page_size`` messages a read, oldest first (the
        arguments are checked at once; the stream raises only ``ChatledgerError``)."""
        self._check_open()
        check_session_id(session_id, self._limits)
        check_bound(before, "before")
        check_bound(after, "after")
        check_page_size(page_size)
        return self._aiter_history(
            session_id,
            include_excluded=include_excluded,
            after=after,
            before=before,
            page_size=page_size,
        )

    async def retract_last(self, session_id: str) -> StoredMessage | None:
        """Take back the newest appended message for good (see the contract)."""
        self._check_open()
        check_session_id(session_id, self._limits)
        with self._translate_errors():
            return await self._retract_last(session_id)

    async def append_if(
        self,
        session_id: str,
        messages: Message | Iterable[Message],
        *,
        record: Mapping[str, JsonValue],
        expected: str | None,
    ) -> list[str]:
        """Append ``messages`` and replace the session's record, only if its revision is
        ``expected`` (see the contract)."""
        self._check_open()
        batch = self._checked_batch(session_id, messages, None)
        value = _checked_record(record, self._limits)
        check_text(expected, "expected", optional=True)
        with (
            self._translate_errors(),
            telemetry.operation(SPAN_APPEND_IF, self._tenant, session_id) as traced,
        ):
            written = await self._append_if(session_id, batch, value, expected=expected)
            traced.stored(written.messages, written.tokens)
        return [m.message_id for m in batch]

    async def locate(self, message_id: str) -> str | None:
        """The session holding the message (see the contract)."""
        self._check_open()
        check_text(message_id, "message_id")
        with (
            self._translate_errors(),
            telemetry.operation(SPAN_LOCATE, self._tenant, None),
        ):
            return await self._locate(message_id)

    # -- sessions ---------------------------------------------------------------------

    async def sessions(
        self,
        *,
        limit: int | None = None,
        after: str | None = None,
        updated_since: datetime | None = None,
        order: SessionOrder = "id",
    ) -> list[SessionInfo]:
        """The tenant's sessions by id or newest update first; page with ``after``."""
        self._check_open()
        check_limit(limit)
        check_session_order(order)
        check_text(after, "after", optional=True)
        check_since(updated_since)
        with self._translate_errors():
            return await self._sessions(
                limit=limit, after=after, updated_since=updated_since, order=order
            )

    async def session(self, session_id: str) -> SessionInfo:
        """One session's info; :class:`~store.errors.SessionNotFound` when absent."""
        self._check_open()
        check_session_id(session_id, self._limits)
        with self._translate_errors():
            return await self._session(session_id)

    async def get_metadata(self, session_id: str) -> dict[str, JsonValue]:
        """The session's metadata."""
        self._check_open()
        check_session_id(session_id, self._limits)
        with self._translate_errors():
            return await self._get_metadata(session_id)

    async def set_metadata(self, session_id: str, metadata: Mapping[str, JsonValue]) -> None:
        """Replace the session's metadata (creating the session when absent)."""
        self._check_open()
        check_session_id(session_id, self._limits)
        value = check_metadata(metadata, self._limits)
        with self._translate_errors():
            await self._set_metadata(session_id, value)

    async def set_title(self, session_id: str, title: str | None) -> None:
        """Set or remove the session's title (see the contract)."""
        self._check_open()
        check_session_id(session_id, self._limits)
        value = check_title(title)
        with (
            self._translate_errors(),
            telemetry.operation(SPAN_SET_TITLE, self._tenant, session_id),
        ):
            await self._set_title(session_id, value)

    async def delete_session(self, session_id: str) -> None:
        """Delete the session and everything stored for it."""
        self._check_open()
        check_session_id(session_id, self._limits)
        with self._translate_errors():
            await self._delete_session(session_id)
        self._projections.forget(session_id)

    async def recount(self, session_id: str) -> SessionInfo:
        """Recount every message of the session with this store's tokenizer and policy."""
        self._check_open()
        check_session_id(session_id, self._limits)
        with self._translate_errors():
            return await self._recount(session_id)

    # -- projection -------------------------------------------------------------------

    async def view(self, session_id: str) -> View:
        """The active view of the session: what a strategy plans on."""
        self._check_open()
        check_session_id(session_id, self._limits)
        with self._translate_errors():
            return await self._view(session_id)

    async def context(
        self,
        session_id: str,
        *,
        strategy: CompactionStrategy | str | None = None,
        pending: Sequence[Message] = (),
    ) -> list[Message]:
        """The messages to send: active groups plus ``pending``, through ``strategy``."""
        self._check_open()
        check_session_id(session_id, self._limits)
        chosen = resolve_strategy(strategy) if strategy is not None else None
        batch = checked_messages(pending)
        with (
            self._translate_errors(),
            telemetry.operation(SPAN_CONTEXT, self._tenant, session_id) as traced,
        ):
            view, request = await self._projection_input(session_id, batch)
            if chosen is not None:
                view = view.apply(await planner(chosen, request).plan(view))
            traced.sent(view)
            projected = await view.project()
            self._projections.note(session_id, view.token_count, projected)
            return projected

    # -- compaction -------------------------------------------------------------------

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
        """Plan ``strategy`` on a snapshot of the active view and apply it if still valid."""
        self._check_open()
        check_session_id(session_id, self._limits)
        check_compact_phase(phase)
        return await self._traced_compact(
            session_id, resolve_strategy(strategy), phase=phase, dry_run=dry_run
        )

    async def _traced_compact(
        self, session_id: str, strategy: CompactionStrategy, *, phase: Phase, dry_run: bool
    ) -> CompactionEvent | ChangeSet | None:
        """:meth:`_compact` in its span, its errors translated (checked arguments)."""
        with (
            self._translate_errors(),
            telemetry.compaction(self._tenant, session_id, phase, strategy.name) as span,
        ):
            return span.finish(
                await self._compact(session_id, strategy, phase=phase, dry_run=dry_run)
            )

    async def request_compaction(
        self,
        session_id: str,
        *,
        reason: str = "manual",
        focus: str | None = None,
        now: bool = False,
        strategy: CompactionStrategy | str | None = None,
    ) -> CompactionEvent | None:
        """Ask for compaction: at the next compaction, or ``now`` (see the contract)."""
        self._check_open()
        check_session_id(session_id, self._limits)
        request = compaction_request(reason, focus)
        check_flag(now, "now")
        if strategy is not None and not now:
            raise InvalidInput("strategy is used only with now=True")
        chosen = resolve_strategy(strategy) if strategy is not None else None
        if not now:
            with (
                self._translate_errors(),
                telemetry.operation(SPAN_REQUEST_COMPACTION, self._tenant, session_id),
            ):
                await self._request_compaction(session_id, request)
            return None
        if chosen is None:
            chosen = await self._recorded_strategy(session_id)
        forced = RequestedStrategy(chosen, reason=request.reason, focus=request.focus)
        done = await self._traced_compact(session_id, forced, phase="manual", dry_run=False)
        assert not isinstance(done, ChangeSet)  # not a dry run
        return done

    async def _recorded_strategy(self, session_id: str) -> CompactionStrategy:
        """The before-call strategy a provider recorded in the session's metadata."""
        metadata = await self.get_metadata(session_id)
        spec = metadata.get(BEFORE_STRATEGY_KEY)
        if not isinstance(spec, str):
            raise InvalidInput(
                f"session {session_id!r} records no strategy to compact with: give one "
                "(strategy=, or --strategy)"
            )
        return resolve_strategy(spec)

    # -- audit ------------------------------------------------------------------------

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
        """Compaction events, newest first, of one session or of the whole tenant."""
        self._check_open()
        if session_id is not None:
            check_session_id(session_id, self._limits)
        check_limit(limit)
        check_since(since)
        check_text(strategy, "strategy", optional=True)
        if phase is not None:
            check_phase(phase)
        if outcome is not None:
            check_outcome(outcome)
        with self._translate_errors():
            return await self._audit(
                session_id,
                since=since,
                strategy=strategy,
                phase=phase,
                limit=limit,
                outcome=outcome,
            )

    async def excluded(self, session_id: str) -> list[ExcludedGroup]:
        """The session's excluded groups in order, with reason, event and summary."""
        self._check_open()
        check_session_id(session_id, self._limits)
        with self._translate_errors():
            return await self._excluded(session_id)

    async def why(self, session_id: str, message_id: str) -> WhyResult:
        """Whether a stored message is in the context (built without a strategy), and why."""
        self._check_open()
        check_session_id(session_id, self._limits)
        check_text(message_id, "message_id")
        with self._translate_errors():
            return await self._why(session_id, message_id)

    async def stats(self, session_id: str | None = None) -> Stats:
        """Stored versus active messages, groups and tokens (one session or the tenant)."""
        self._check_open()
        if session_id is not None:
            check_session_id(session_id, self._limits)
        with self._translate_errors():
            stats = await self._stats(session_id)
            calls = row_of("total", await self._usage_calls(session_id, since=None), None)
        return stats.model_copy(
            update={
                "usage_calls": calls.calls,
                "cache_read_tokens": calls.cache_read_tokens,
                "cache_breaks": calls.cache_breaks,
            }
        )

    # -- restore and pin --------------------------------------------------------------

    async def restore(
        self,
        session_id: str,
        *,
        group_ids: Iterable[str] | None = None,
        event_id: str | None = None,
    ) -> CompactionEvent | None:
        """Re-include groups (pinning them), or undo one event; audited as ``restore``."""
        self._check_open()
        check_session_id(session_id, self._limits)
        ids = check_restore_target(group_ids, event_id)
        with self._translate_errors():
            return await self._restore(session_id, group_ids=ids, event_id=event_id)

    async def pin(self, session_id: str, group_ids: Iterable[str]) -> list[str]:
        """Pin groups: strategies never exclude them. Returns the ids that changed."""
        self._check_open()
        check_session_id(session_id, self._limits)
        ids = checked_ids(group_ids, "group_ids")
        with self._translate_errors():
            return await self._set_pinned(session_id, ids, pinned=True)

    async def unpin(self, session_id: str, group_ids: Iterable[str]) -> list[str]:
        """Unpin groups. Returns the ids that changed."""
        self._check_open()
        check_session_id(session_id, self._limits)
        ids = checked_ids(group_ids, "group_ids")
        with self._translate_errors():
            return await self._set_pinned(session_id, ids, pinned=False)

    # -- import -----------------------------------------------------------------------

    async def import_messages(
        self,
        session_id: str,
        messages: Sequence[Message],
        *,
        source: str = "agent_framework",
    ) -> ImportResult:
        """Append messages that another system may have compacted already (see the
        contract)."""
        self._check_open()
        check_session_id(session_id, self._limits)
        check_text(source, "source")
        batch = checked_messages(messages)
        for message in batch:
            check_message(message, self._limits)
        with (
            self._translate_errors(),
            telemetry.operation(SPAN_IMPORT, self._tenant, session_id) as traced,
        ):
            result, written = await self._import(session_id, batch, source)
            traced.stored(written.messages, written.tokens)
            traced.event(result.event)
            return result

    # -- retention and erasure --------------------------------------------------------

    async def purge(
        self, *, older_than: datetime | timedelta, dry_run: bool = False
    ) -> PurgeReport:
        """Remove the tenant's sessions last updated before ``older_than`` (see the
        contract)."""
        self._check_open()
        cutoff = purge_cutoff(older_than, now())
        check_flag(dry_run, "dry_run")
        with self._translate_errors():
            return await self._purge(cutoff, dry_run=dry_run)

    async def redact(
        self, session_id: str, message_ids: Iterable[str], *, reason: str
    ) -> RedactReport:
        """Replace the messages by tombstones (see the contract)."""
        self._check_open()
        check_session_id(session_id, self._limits)
        ids = check_redaction(message_ids, reason, self._limits)
        with self._translate_errors():
            return await self._redact(session_id, ids, reason=reason)

    # -- branches ---------------------------------------------------------------------

    async def fork(
        self, session_id: str, *, at: str | None = None, new_session_id: str | None = None
    ) -> SessionInfo:
        """Fork the session at message ``at`` (see the contract)."""
        self._check_open()
        check_session_id(session_id, self._limits)
        check_text(at, "at", optional=True)
        if new_session_id is not None:
            check_session_id(new_session_id, self._limits)
        with (
            self._translate_errors(),
            telemetry.operation(SPAN_FORK, self._tenant, session_id),
        ):
            return await self._fork(session_id, at=at, new_session_id=new_session_id)

    async def rewind(self, session_id: str, *, to: str | None) -> CompactionEvent | None:
        """Set the messages after ``to`` aside as a superseded tail (see the contract)."""
        self._check_open()
        check_session_id(session_id, self._limits)
        check_text(to, "to", optional=True)
        with (
            self._translate_errors(),
            telemetry.operation(SPAN_REWIND, self._tenant, session_id) as traced,
        ):
            event = await self._rewind(session_id, to=to)
            traced.event(event)
            return event

    async def branches(self, session_id: str) -> list[BranchInfo]:
        """The session's parent, forks and superseded tails (see the contract)."""
        self._check_open()
        check_session_id(session_id, self._limits)
        with self._translate_errors():
            return await self._branches(session_id)

    # -- search -----------------------------------------------------------------------

    async def search(
        self,
        query: str,
        *,
        session_id: str | None = None,
        include_excluded: bool = True,
        excluded_only: bool = False,
        roles: Iterable[str] | None = None,
        limit: int = 20,
        cursor: str | None = None,
    ) -> SearchPage:
        """Search the tenant's stored messages (see the contract)."""
        self._check_open()
        if session_id is not None:
            check_session_id(session_id, self._limits)
        request = check_search(
            query,
            include_excluded=include_excluded,
            excluded_only=excluded_only,
            roles=roles,
            limit=limit,
            cursor=cursor,
        )
        with (
            self._translate_errors(),
            telemetry.operation(SPAN_SEARCH, self._tenant, session_id),
        ):
            return await self._search(request, session_id=session_id)

    # -- usage ------------------------------------------------------------------------

    async def record_usage(
        self,
        session_id: str,
        usage: Usage,
        *,
        message_id: str | None = None,
        call_id: str | None = None,
    ) -> None:
        """Record one call's usage, paired with the session's newest unpaired projection
        (see the contract)."""
        self._check_open()
        check_session_id(session_id, self._limits)
        check_usage(usage)
        check_text(message_id, "message_id", optional=True)
        check_text(call_id, "call_id", optional=True)
        with (
            self._translate_errors(),
            telemetry.operation(SPAN_RECORD_USAGE, self._tenant, session_id),
        ):
            sent = self._projections.sent(session_id)
            recorded = await self._record_usage(
                session_id, usage, message_id=message_id, call_id=call_id, sent=sent
            )
            if recorded and sent is not None:
                self._projections.paired(session_id, sent)

    async def usage_calls(self, session_id: str) -> list[UsageCall]:
        """The session's recorded calls, oldest first."""
        self._check_open()
        check_session_id(session_id, self._limits)
        with self._translate_errors():
            return await self._usage_calls(session_id, since=None)

    async def usage(
        self,
        session_id: str | None = None,
        *,
        since: datetime | timedelta | None = None,
        by: str = "model",
        prices: Mapping[str, ModelPrice] | None = None,
    ) -> UsageReport:
        """The recorded calls totalled by ``by`` (see the contract)."""
        self._check_open()
        if session_id is not None:
            check_session_id(session_id, self._limits)
        start = usage_since(since)
        grouping = check_grouping(by)
        check_prices(prices)
        with (
            self._translate_errors(),
            telemetry.operation(SPAN_USAGE, self._tenant, session_id),
        ):
            calls = await self._usage_calls(session_id, since=start)
            return usage_report(
                self._tenant, calls, session_id=session_id, since=start, by=grouping, prices=prices
            )

    async def calibration(self, session_id: str, *, model: str | None = None) -> Calibration | None:
        """The fit of the session's paired calls of ``model`` (see the contract)."""
        self._check_open()
        check_session_id(session_id, self._limits)
        check_text(model, "model", optional=True)
        with self._translate_errors():
            found, points = await self._paired_calls(session_id, model=model, limit=FIT_WINDOW)
            return fit(session_id, found, points)

    # -- the backend's primitives -----------------------------------------------------

    @abstractmethod
    async def _append(
        self, session_id: str, batch: list[Message], provenance: Provenance | None
    ) -> Written:
        """Store ``batch`` (one message at least) in one write; a message stored already
        with the same content is skipped, with other content refused (nothing stored)."""

    @abstractmethod
    async def _history(
        self,
        session_id: str,
        *,
        include_excluded: bool,
        limit: int | None,
        before: int | None,
        after: int | None,
    ) -> list[StoredMessage]:
        """One page of the session's stored messages (see :meth:`history`)."""

    @abstractmethod
    def _aiter_history(
        self,
        session_id: str,
        *,
        include_excluded: bool,
        after: int | None,
        before: int | None,
        page_size: int,
    ) -> AsyncIterator[StoredMessage]:
        """The stream of :meth:`aiter_history`; it raises only ``ChatledgerError``
        (:class:`~store.errors.SessionNotFound` at its first step) and refuses to go on
        once the store is closed."""

    @abstractmethod
    async def _retract_last(self, session_id: str) -> StoredMessage | None:
        """Take back the session's newest appended message (see :meth:`retract_last`)."""

    @abstractmethod
    async def _sessions(
        self,
        *,
        limit: int | None,
        after: str | None,
        updated_since: datetime | None,
        order: SessionOrder,
    ) -> list[SessionInfo]:
        """One page of the tenant's sessions (see :meth:`sessions`)."""

    @abstractmethod
    async def _session(self, session_id: str) -> SessionInfo:
        """The session's info (:class:`~store.errors.SessionNotFound` when absent)."""

    @abstractmethod
    async def _get_metadata(self, session_id: str) -> dict[str, JsonValue]:
        """The session's metadata (:class:`~store.errors.SessionNotFound` when absent)."""

    @abstractmethod
    async def _set_metadata(self, session_id: str, metadata: dict[str, Any]) -> None:
        """Replace the session's metadata with ``metadata`` (checked JSON), creating the
        session when absent."""

    @abstractmethod
    async def _delete_session(self, session_id: str) -> None:
        """Delete the session and everything stored for it."""

    @abstractmethod
    async def _recount(self, session_id: str) -> SessionInfo:
        """Recount the session with this store's tokenizer and policy."""

    @abstractmethod
    async def _view(self, session_id: str) -> View:
        """The session's active view (refusing a session counted with another
        tokenizer)."""

    @abstractmethod
    async def _pending_view(self, session_id: str, batch: list[Message]) -> View:
        """The session's active view with ``batch``, the run's in-flight messages,
        annotated after it (those stored already are left out); a missing session reads
        as empty. Nothing is written."""

    @abstractmethod
    async def _compact(
        self, session_id: str, strategy: CompactionStrategy, *, phase: Phase, dry_run: bool
    ) -> CompactionEvent | ChangeSet | telemetry.Unchanged:
        """Plan and apply ``strategy`` through :func:`store.rules.conflicts.plan_and_apply`
        with the backend's snapshot, apply and record, and return what it returns."""

    async def _projection_input(
        self, session_id: str, batch: list[Message]
    ) -> tuple[View, CompactionRequest | None]:
        """:meth:`_pending_view`, with the compaction asked for and not yet run (a
        backend that reads both at once overrides this)."""
        view = await self._pending_view(session_id, batch)
        return view, await self._compaction_request(session_id)

    async def _compaction_request(self, session_id: str) -> CompactionRequest | None:
        """The session's compaction asked for and not yet run (None for a backend written
        before requests, which keeps none)."""
        return None

    async def _request_compaction(self, session_id: str, request: CompactionRequest) -> None:
        """Keep ``request`` for the session's next compaction (replacing one waiting);
        :class:`~store.errors.SessionNotFound` for a session not stored. Its
        :func:`~store.rules.conflicts.plan_and_apply` snapshot reads it, and its
        ``consume`` forgets it. A backend written before requests refuses."""
        raise InvalidInput(f"{type(self).__name__} keeps no compaction requests: use now=True")

    @abstractmethod
    async def _audit(
        self,
        session_id: str | None,
        *,
        since: datetime | None,
        strategy: str | None,
        phase: Phase | None,
        limit: int | None,
        outcome: EventOutcome | None,
    ) -> list[CompactionEvent]:
        """The events :meth:`audit` returns."""

    @abstractmethod
    async def _excluded(self, session_id: str) -> list[ExcludedGroup]:
        """The session's excluded groups in projection order."""

    @abstractmethod
    async def _why(self, session_id: str, message_id: str) -> WhyResult:
        """Whether the stored message is in the context, and why."""

    @abstractmethod
    async def _stats(self, session_id: str | None) -> Stats:
        """The session's figures, or the tenant's."""

    @abstractmethod
    async def _restore(
        self, session_id: str, *, group_ids: list[str] | None, event_id: str | None
    ) -> CompactionEvent | None:
        """Restore ``group_ids``, or the event ``event_id`` (exactly one is given)."""

    @abstractmethod
    async def _set_pinned(
        self, session_id: str, group_ids: list[str], *, pinned: bool
    ) -> list[str]:
        """Pin or unpin the groups; the ids that changed."""

    @abstractmethod
    async def _import(
        self, session_id: str, batch: list[Message], source: str
    ) -> tuple[ImportResult, Written]:
        """Import ``batch`` in one write (see :meth:`import_messages`), with what it
        appended."""

    @abstractmethod
    async def _purge(self, cutoff: datetime, *, dry_run: bool) -> PurgeReport:
        """Remove (or with ``dry_run`` report) the sessions last updated before
        ``cutoff``, an aware datetime."""

    @abstractmethod
    async def _redact(
        self, session_id: str, message_ids: tuple[str, ...], *, reason: str
    ) -> RedactReport:
        """Replace the messages by tombstones (see :meth:`redact`)."""

    # Added to the contract after the first backends: not abstract, unsupported here.

    async def _fork(
        self, session_id: str, *, at: str | None, new_session_id: str | None
    ) -> SessionInfo:
        """Fork the session (see :meth:`fork`)."""
        raise self._unsupported("fork")

    async def _rewind(self, session_id: str, *, to: str | None) -> CompactionEvent | None:
        """Rewind the session (see :meth:`rewind`)."""
        raise self._unsupported("rewind")

    async def _branches(self, session_id: str) -> list[BranchInfo]:
        """The session's branches (see :meth:`branches`)."""
        raise self._unsupported("branches")

    async def _search(self, request: SearchRequest, *, session_id: str | None) -> SearchPage:
        """Search (see :meth:`search`); ``request`` is checked and parsed."""
        raise self._unsupported("search")

    async def _set_title(self, session_id: str, title: str | None) -> None:
        """Set or remove the title (see :meth:`set_title`); ``title`` is checked."""
        raise self._unsupported("set_title")

    async def _append_if(
        self, session_id: str, batch: list[Message], record: dict[str, Any], *, expected: str | None
    ) -> Written:
        """Store ``batch`` (possibly empty) and ``record`` (checked JSON with a string
        ``revision``) under :data:`RECORD_KEY` in one transaction, if the stored record's
        revision is ``expected`` (:class:`~store.errors.RecordConflict` otherwise)."""
        raise self._unsupported("append_if")

    async def _locate(self, message_id: str) -> str | None:
        """The session holding ``message_id`` (see :meth:`locate`)."""
        raise self._unsupported("locate")

    async def _record_usage(
        self,
        session_id: str,
        usage: Usage,
        *,
        message_id: str | None,
        call_id: str | None,
        sent: Sent | None,
    ) -> bool:
        """Record the call, its prefix judged against the session's previous paired
        call (:class:`~store.usage.ledger.UsageEntry`); False, recording nothing, when
        ``call_id`` is recorded already for the session."""
        raise self._unsupported("record_usage")

    async def _usage_calls(
        self, session_id: str | None, *, since: datetime | None
    ) -> list[UsageCall]:
        """The recorded calls of the session (or of the tenant), from ``since``, in the
        order they were recorded (a tenant's by session, then order). None here: a
        backend that records no usage (:meth:`_record_usage` unsupported) has recorded
        none, so ``stats``, ``usage`` and ``calibration`` keep working on it."""
        return []

    async def _paired_calls(
        self, session_id: str, *, model: str | None, limit: int
    ) -> tuple[str | None, list[tuple[int, int]]]:
        """The model (``model``, or that of the newest paired call reporting input) and
        the ``(local, input)`` counts of its newest ``limit`` paired calls that report
        input, oldest first."""
        calls = await self._usage_calls(session_id, since=None)
        return paired_points(calls, model=model, limit=limit)


def _checked_record(record: object, limits: Limits) -> dict[str, Any]:
    """A session's record as :meth:`BackendBase.append_if` stores it: checked JSON
    object holding a string ``revision``."""
    if not isinstance(record, Mapping) or not isinstance(record.get("revision"), str):
        raise InvalidInput("record must be a JSON object with a string 'revision'")
    return check_metadata(record, limits)


if TYPE_CHECKING:

    def _conforms(store: BackendBase) -> HistoryBackend:
        return store  # mypy checks that the base implements the whole contract
