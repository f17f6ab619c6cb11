"""The two-phase history provider, independent of any agent framework.

:class:`TwoPhaseProvider` wraps a store (anything that satisfies
:class:`store.contract.ProviderBackend`: :class:`store.HistoryStore` and the in-memory
store do) and gives an agent framework the two phases of the design:

- :meth:`TwoPhaseProvider.load` (before each model call): the projection of the stored
  active context plus the run's in-flight messages, through the *before* strategy.
  Nothing is persisted.
- :meth:`TwoPhaseProvider.save_turn` (after a model call or a run): append what is new,
  and at the end of a user turn run the *after* strategy, whose changes are persisted
  with an audit event.

Configure it with a :class:`ContextWindow` (``window=``), or with the keywords it holds:
explicit strategies, or ``max_context_window_tokens`` and ``max_output_tokens`` (and
``reserved_tokens``), which give
:class:`~strategies.context_window.ContextWindowCompactionStrategy` for both phases, as
Agent Framework's harness does. An explicit strategy overrides the window's for its phase.
The backend is a store, or a :class:`BackendSource` that opens one on first use (a
framework adapter's hold on its store).

Replays: frameworks often hand back messages that were already stored (a whole
transcript, or the tail of the last call). :func:`new_messages` applies Agent Framework's
ordered tail-overlap rule to find them, with one difference: positional ids (``msg_N``)
and missing ids are not identities; such messages are compared by role and contents,
and only as part of an ordered overlap with the stored tail, never one by one. A
redacted message (a tombstone) is matched by its id, or at its place in such an overlap
by a message of its shape, never by its text, which is gone.

The tail a batch is matched against is what was *stored*, not what the projection
shows: the newest appended messages, excluded ones included, in their original (not
reduced) form, summaries left out (a framework never replays a summary it was not
given). Compaction of the tail therefore never hides a replay. Only as many messages as
the batch holds are read, which is all the overlap rule can use.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Literal, Protocol, runtime_checkable

from store.contract import (
    BEFORE_STRATEGY_KEY,
    CompactionRequests,
    MetadataBackend,
    ProviderBackend,
    UsageBackend,
)
from store.deferred import (
    DEFAULT_CLOSE_TIMEOUT,
    DEFAULT_MAX_PENDING,
    DeferredCompactions,
    FlushResult,
)
from store.errors import InvalidInput, SessionNotFound
from store.formats import ORIGINAL_ID_KEY
from store.models import CompactionEvent, StoredMessage
from store.rules.checks import resolve_strategy
from store.rules.erasure import tombstone
from store.rules.identity import is_tombstone
from store.usage.calibration import CalibratedStrategy
from store.usage.models import Calibration, Usage
from strategies.base import CompactionStrategy
from strategies.messages import FunctionCallContent, FunctionResultContent, Message
from strategies.specs import format_strategy
from strategies.tokenizers import Tokenizer

__all__ = [
    "BEFORE_STRATEGY_KEY",
    "WINDOW_MIN_SAVING",
    "BackendSource",
    "CompactionMode",
    "ContextWindow",
    "SaveResult",
    "TwoPhaseProvider",
    "message_identity",
    "new_messages",
    "unanswered_call_ids",
]


@dataclass(frozen=True, slots=True)
class SaveResult:
    """What :meth:`TwoPhaseProvider.save_turn` did."""

    appended: tuple[str, ...]
    """Ids of the messages appended (replayed ones are not appended again)."""
    replayed: int
    """How many of the given messages were found already stored."""
    compaction: CompactionEvent | None = None
    """The after phase's compaction event, or None when it did not run (or was deferred),
    or changed nothing."""
    deferred: bool = False
    """Whether the after phase was handed to the background queue (``compaction="deferred"``)."""


def message_identity(message: Message) -> tuple[str, ...]:
    """Identity used to recognise a replayed message.

    A message id is an identity unless the converter marked it as not authoritative
    (its source id, positional or absent, kept under
    :data:`store.formats.ORIGINAL_ID_KEY`); then the role and the contents as the model
    sees them are. Each content's ``extra`` is left out: it holds framework bookkeeping
    that can change after a save (Agent Framework gives a function call content an
    ``id`` once it runs the call, after the harness has saved the message).
    """
    if ORIGINAL_ID_KEY not in message.metadata:
        return ("id", message.message_id)
    contents = [c.model_dump(mode="json", exclude={"extra"}) for c in message.contents]
    return ("content", message.role, json.dumps(contents, sort_keys=True, ensure_ascii=False))


def _shape(message: Message) -> tuple[object, ...]:
    """What a message's tombstone keeps of it: its role and, in order, the kind and call
    id of each call and result (its texts collapse to one placeholder)."""
    kept: list[object] = [message.role]
    for content in tombstone(message, reason="-", event_id="-").contents:
        kept.append((content.type, getattr(content, "call_id", None)))
    return tuple(kept)


@dataclass(frozen=True, slots=True)
class _Keyed:
    """A message with its identity (:func:`message_identity`) and, for a tombstone, the
    shape a message replayed at its place must have."""

    key: tuple[str, ...]
    shape: tuple[object, ...] | None

    @classmethod
    def of(cls, message: Message, *, stored: bool) -> _Keyed:
        grave = stored and is_tombstone(message)
        return cls(message_identity(message), _shape(message) if grave else None)


def _matches(old: _Keyed, new: _Keyed, new_message: Message) -> bool:
    """Whether ``new_message`` replays the stored message ``old``: the same identity,
    or, for a tombstone, a message without an identity of the shape the tombstone kept
    (its text is gone: only its place tells it)."""
    if old.key == new.key:
        return True
    return old.shape is not None and new.key[0] != "id" and _shape(new_message) == old.shape


def _anchored(old: Sequence[_Keyed], new: Sequence[_Keyed], *, whole_session: bool) -> bool:
    """Whether an ordered overlap rests on more than tombstones matched by their place:
    one message matched by its identity, or the whole session replayed from its first
    message (a batch of new messages after a tail of tombstones is never a replay)."""
    return whole_session or any(o.key == n.key for o, n in zip(old, new, strict=True))


def _same(
    old: Sequence[_Keyed], new: Sequence[_Keyed], incoming: Sequence[Message], *, whole: bool
) -> bool:
    return all(_matches(o, n, m) for o, n, m in zip(old, new, incoming, strict=True)) and (
        _anchored(old, new, whole_session=whole)
    )


def _lone_unidentified_user(existing: Sequence[Message], new: _Keyed) -> bool:
    return existing[-1].role == "user" and new.key[0] != "id"


def new_messages(
    existing: Sequence[Message], incoming: Sequence[Message], *, session_start: bool = False
) -> list[Message]:
    """The messages of ``incoming`` that are not a replay of the tail of ``existing``.

    Agent Framework's rule: if ``existing`` appears as a whole inside ``incoming``, what
    follows it is new; else the longest suffix of ``existing`` that is a prefix of
    ``incoming`` is a replay. A single repeated user message without an identity is kept
    (a user may say the same thing twice).

    A redacted message (a tombstone) in ``existing`` is matched by its id, or, where the
    replayed message has no identity, by its place in the overlap: a message there of
    the shape the tombstone kept (role, calls and results) replays it. Such an overlap
    must hold a message matched by its identity too, unless ``existing`` is the whole
    session (``session_start``) and ``incoming`` replays it from its first message.
    """
    if not existing:
        return list(incoming)
    old = [_Keyed.of(m, stored=True) for m in existing]
    new = [_Keyed.of(m, stored=False) for m in incoming]
    for start in range(len(new) - len(old) + 1):
        window = slice(start, start + len(old))
        whole = session_start and start == 0 and len(new) > len(old)
        if _same(old, new[window], incoming[window], whole=whole):
            if start == 0 and len(old) == 1 and _lone_unidentified_user(existing, new[0]):
                break
            return list(incoming[start + len(old) :])
    for overlap in range(min(len(old), len(new)), 0, -1):
        if not _same(old[-overlap:], new[:overlap], incoming[:overlap], whole=False):
            continue
        if overlap == 1 and _lone_unidentified_user(existing, new[0]):
            continue
        return list(incoming[overlap:])
    return list(incoming)


def unanswered_call_ids(messages: Sequence[Message]) -> set[str]:
    """Call ids of ``messages`` that no result in ``messages`` answers."""
    calls: set[str] = set()
    results: set[str] = set()
    for message in messages:
        for content in message.contents:
            if isinstance(content, FunctionCallContent):
                calls.add(content.call_id)
            elif isinstance(content, FunctionResultContent):
                results.add(content.call_id)
    return calls - results


_AFTER_LAST_SEQ = 2**63 - 1
"""A ``before`` bound above every ``seq`` (the column is a signed 64-bit integer)."""


_FITS_KEPT = 4096
"""How many sessions' fits a calibrating provider keeps."""
_ASKED_KEPT = 4096
"""Sessions a provider without an after-run strategy remembers having asked compaction of."""

CompactionMode = Literal["inline", "deferred"]
"""When the after phase runs: in ``save_turn``, or in the provider's background queue."""

WINDOW_MIN_SAVING = 0.02
"""The window strategy's ``min_saving_tokens``, as a fraction of the input budget: a
change set that saves less is not worth its write and its audit row (over the budget,
the strategy applies it anyway)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextWindow:
    """How a session is fitted to the model's window, in both phases: the window's sizes,
    the strategies that replace the window's, and the tokenizer that counts.

    With ``max_context_window_tokens`` and ``max_output_tokens`` (and ``reserved_tokens``),
    both phases run :class:`~strategies.context_window.ContextWindowCompactionStrategy`
    on the input budget (window minus output minus reserve); ``before_strategy`` or
    ``after_strategy`` (a strategy or a spec such as ``"sliding-window:keep_last_groups=8"``)
    replaces it for its phase. Every option is checked here, when the object is made, and
    :attr:`before` and :attr:`after` hold the strategies the phases run.
    :class:`TwoPhaseProvider` and every framework adapter (``store.integrations.*``) take
    it as ``window=``, in place of the keywords it holds, and use it as it is.

    Raises:
        InvalidInput: sizes that make no window (one of the two sizes, a reserve without
            them, an output or reserve that leaves no input budget).
        InvalidInput: a strategy spec that does not parse, or an object that is no strategy.
    """

    max_context_window_tokens: int | None = None
    """The model's whole window, in tokens (give ``max_output_tokens`` too)."""
    max_output_tokens: int | None = None
    """Tokens kept free for the model's answer."""
    reserved_tokens: int = 0
    """Tokens the framework adds after the projection (instructions, tool schemas)."""
    tokenizer: Tokenizer | None = None
    """The tokenizer the window strategy counts with (the store's, when None); an adapter
    that opens its own store opens it with this one."""
    before_strategy: CompactionStrategy | str | None = None
    """The before-call strategy, in place of the window's."""
    after_strategy: CompactionStrategy | str | None = None
    """The after-run strategy, in place of the window's."""
    before: CompactionStrategy | None = field(init=False, repr=False, compare=False)
    """The strategy the before-call projection runs (None: the stored active context)."""
    after: CompactionStrategy | None = field(init=False, repr=False, compare=False)
    """The strategy the after-run compaction runs (None: no compaction)."""

    def __post_init__(self) -> None:
        window = self._window_strategy()
        before, after = self.before_strategy, self.after_strategy
        # frozen: the two resolved strategies are set once, here
        object.__setattr__(self, "before", window if before is None else resolve_strategy(before))
        object.__setattr__(self, "after", window if after is None else resolve_strategy(after))

    def _window_strategy(self) -> CompactionStrategy | None:
        """The window's own strategy, or None without sizes."""
        window, output = self.max_context_window_tokens, self.max_output_tokens
        reserved = self.reserved_tokens
        if window is None and output is None:
            if reserved:
                raise InvalidInput("reserved_tokens needs the window and output sizes")
            return None
        if window is None or output is None:
            raise InvalidInput(
                "give both max_context_window_tokens and max_output_tokens, or neither"
            )
        from strategies.context_window import ContextWindowCompactionStrategy

        budget = window - output - reserved
        return ContextWindowCompactionStrategy(
            max_context_window_tokens=window,
            max_output_tokens=output,
            reserved_tokens=reserved,
            tokenizer=self.tokenizer,
            min_saving_tokens=max(0, round(budget * WINDOW_MIN_SAVING)),
        )

    @classmethod
    def of(
        cls,
        window: ContextWindow | None = None,
        *,
        before_strategy: CompactionStrategy | str | None = None,
        after_strategy: CompactionStrategy | str | None = None,
        max_context_window_tokens: int | None = None,
        max_output_tokens: int | None = None,
        reserved_tokens: int = 0,
        tokenizer: Tokenizer | None = None,
    ) -> ContextWindow:
        """``window``, or the window the keywords make when it is None.

        Raises:
            ValueError: ``window`` and one of the keywords were both given.
        """
        if window is None:
            return cls(
                max_context_window_tokens=max_context_window_tokens,
                max_output_tokens=max_output_tokens,
                reserved_tokens=reserved_tokens,
                tokenizer=tokenizer,
                before_strategy=before_strategy,
                after_strategy=after_strategy,
            )
        options = {
            "max_context_window_tokens": max_context_window_tokens,
            "max_output_tokens": max_output_tokens,
            "reserved_tokens": reserved_tokens,
            "tokenizer": tokenizer,
            "before_strategy": before_strategy,
            "after_strategy": after_strategy,
        }
        defaults = {f.name: f.default for f in fields(cls) if f.init}
        given = [name for name, value in options.items() if value != defaults[name]]
        if given:
            raise InvalidInput(f"give window or {', '.join(given)}, not both")
        return window


@runtime_checkable
class BackendSource(Protocol):
    """What hands :class:`TwoPhaseProvider` its backend on first use, for a caller that
    opens nothing before the first call (a framework adapter's hold on its store)."""

    async def get(self) -> ProviderBackend:
        """The backend, opened on the first call."""
        ...


@dataclass(frozen=True, slots=True)
class _Given:
    """A backend given as it is, handed out as a :class:`BackendSource` would."""

    backend: ProviderBackend

    async def get(self) -> ProviderBackend:
        return self.backend


class TwoPhaseProvider:
    """Before-call projection and after-turn compaction over a
    :class:`~store.contract.ProviderBackend`."""

    def __init__(
        self,
        backend: ProviderBackend | BackendSource,
        *,
        window: ContextWindow | None = None,
        before_strategy: CompactionStrategy | str | None = None,
        after_strategy: CompactionStrategy | str | None = None,
        max_context_window_tokens: int | None = None,
        max_output_tokens: int | None = None,
        reserved_tokens: int = 0,
        tokenizer: Tokenizer | None = None,
        compaction: CompactionMode = "inline",
        max_pending: int = DEFAULT_MAX_PENDING,
        calibrate: bool = False,
    ) -> None:
        """Use ``backend`` (a store, or a :class:`BackendSource` asked for it on each call)
        with the strategies of ``window``, or of the keywords it holds
        (:class:`ContextWindow`).

        With ``calibrate=True`` both phases judge the session in the provider's tokens:
        each strategy runs as :class:`~store.usage.calibration.CalibratedStrategy` with
        the session's fit (:meth:`~store.contract.HistoryBackend.calibration`, read
        once per session and again after each call :meth:`record_usage` records), and
        the compaction event records the fit. Before a session's first paired call
        there is no fit and the strategies run as given.

        A strategy may be given as a spec (``"sliding-window:keep_last_groups=8"``, see
        :func:`strategies.parse_strategy`). With ``compaction="deferred"`` the after phase
        runs in the background (:mod:`store.deferred`): ``save_turn`` returns once the
        turn is stored, at most ``max_pending`` sessions wait, and :meth:`aclose` (or
        :meth:`flush`) waits for them, each for at most its ``timeout``.
        """
        if compaction not in ("inline", "deferred"):
            raise InvalidInput(f"compaction must be 'inline' or 'deferred', got {compaction!r}")
        self.window = ContextWindow.of(
            window,
            before_strategy=before_strategy,
            after_strategy=after_strategy,
            max_context_window_tokens=max_context_window_tokens,
            max_output_tokens=max_output_tokens,
            reserved_tokens=reserved_tokens,
            tokenizer=tokenizer,
        )
        """The options both phases run with."""
        self.backend = backend
        """The backend, or the source that hands it out."""
        self._source: BackendSource = (
            backend if isinstance(backend, BackendSource) else _Given(backend)
        )
        self.before_strategy: CompactionStrategy | None = self.window.before
        self.after_strategy: CompactionStrategy | None = self.window.after
        self._before_spec = (
            format_strategy(self.before_strategy) if self.before_strategy is not None else None
        )
        self._recorded: set[str] = set()
        """Sessions whose metadata holds this provider's before-call spec already."""
        if not isinstance(calibrate, bool):
            raise InvalidInput(f"calibrate must be True or False, got {calibrate!r}")
        self.calibrate = calibrate
        """Whether the strategies are judged in the provider's tokens (see above)."""
        self._asked: set[str] = set()
        """Sessions this provider asked compaction of, without an after-run strategy to
        run it (the end of their turn does, with the before-call strategy)."""
        self._fits: dict[str, Calibration | None] = {}
        """The fit of each session read since its last recorded call (calibrate only)."""
        self.deferred: DeferredCompactions | None = (
            DeferredCompactions(self._after_run, max_pending=max_pending)
            if compaction == "deferred"
            else None
        )
        """The background queue of the after phase (``compaction="deferred"``), else None."""

    async def load(self, session_id: str, pending: Sequence[Message] = ()) -> list[Message]:
        """The messages to send: stored active context plus ``pending``, through *before*."""
        backend = await self._source.get()
        strategy = await self._judged(backend, session_id, self.before_strategy)
        return await backend.context(session_id, strategy=strategy, pending=tuple(pending))

    async def record_usage(
        self,
        session_id: str,
        usage: Usage,
        *,
        message_id: str | None = None,
        call_id: str | None = None,
    ) -> bool:
        """Record one model call's usage on the backend
        (:meth:`~store.contract.HistoryBackend.record_usage`); False when the backend
        records no usage. With ``calibrate=True`` the session's fit is read again
        before the next phase."""
        backend = await self._source.get()
        if not isinstance(backend, UsageBackend):
            return False
        await backend.record_usage(session_id, usage, message_id=message_id, call_id=call_id)
        self._fits.pop(session_id, None)
        return True

    async def calibration(self, session_id: str) -> Calibration | None:
        """The session's fit the phases use (None: ``calibrate`` is off, the backend
        records no usage, or no call was paired yet)."""
        if not self.calibrate:
            return None
        if session_id not in self._fits:
            backend = await self._source.get()
            fitted = (
                await backend.calibration(session_id) if isinstance(backend, UsageBackend) else None
            )
            self._fits[session_id] = fitted
            while len(self._fits) > _FITS_KEPT:
                del self._fits[next(iter(self._fits))]
        return self._fits[session_id]

    async def _judged(
        self, backend: ProviderBackend, session_id: str, strategy: CompactionStrategy | None
    ) -> CompactionStrategy | None:
        """``strategy`` calibrated by the session's fit, when ``calibrate`` is on and
        there is one."""
        if strategy is None or not self.calibrate:
            return strategy
        fitted = await self.calibration(session_id)
        return strategy if fitted is None else CalibratedStrategy(strategy, fitted)

    async def stored_tail(self, session_id: str, count: int) -> list[Message]:
        """The newest ``count`` appended messages, as stored, oldest first.

        Excluded messages are included and reduced ones are in their stored form;
        summaries are left out. A session that does not exist has an empty tail.
        """
        backend = await self._source.get()
        tail: list[StoredMessage] = []
        before = _AFTER_LAST_SEQ
        while len(tail) < count:
            wanted = count - len(tail)
            try:
                page = await backend.history(
                    session_id, include_excluded=True, limit=wanted, before=before
                )
            except SessionNotFound:
                return []
            tail[:0] = [m for m in page if m.kind != "summary"]
            if len(page) < wanted:
                break
            before = page[0].seq
        return [m.message for m in tail]

    async def save_turn(
        self,
        session_id: str,
        messages: Sequence[Message],
        *,
        end_of_turn: bool,
        existing: Sequence[Message] | None = None,
    ) -> SaveResult:
        """Append what is new in ``messages``; at ``end_of_turn`` run the after phase.

        ``existing`` is what replays are matched against (when None, the stored tail:
        :meth:`stored_tail` of as many messages as ``messages`` holds). The after phase
        runs even when nothing was new, so an interrupted turn is compacted on the next
        save.
        """
        whole = False
        if existing is not None:
            tail = list(existing)
        else:
            tail = await self.stored_tail(session_id, len(messages))
            whole = len(tail) < len(messages)  # the session holds no more than this
        fresh = new_messages(tail, messages, session_start=whole)
        appended = await (await self._source.get()).append(session_id, fresh) if fresh else []
        if appended:
            await self._record_before_spec(session_id)
        event = None
        deferred = False
        if end_of_turn and self.after_strategy is not None:
            if self.deferred is not None:
                await self.deferred.request(session_id)
                deferred = True
            else:
                event = await self._after_run(session_id)
        elif end_of_turn and session_id in self._asked:
            # no after-run strategy: what was asked for is stored with the before-call one
            event = await self._run_asked(session_id)
        return SaveResult(
            appended=tuple(appended),
            replayed=len(messages) - len(fresh),
            compaction=event,
            deferred=deferred,
        )

    async def request_compaction(
        self,
        session_id: str,
        *,
        reason: str = "manual",
        focus: str | None = None,
        now: bool = False,
    ) -> CompactionEvent | None:
        """Ask the backend for compaction of the session
        (:meth:`~store.contract.HistoryBackend.request_compaction`): the next projection
        (:meth:`load`) runs the before-call strategy as asked, and the next after phase
        the after-run strategy, recording ``reason`` and ``focus`` on its event (without
        an after-run strategy, the end of the turn compacts with the before-call one, so
        a request never outlives the turn). With
        ``now=True`` the after-run strategy (else the before-call one) compacts the
        stored history at once and its event is returned."""
        backend = await self._source.get()
        if not isinstance(backend, CompactionRequests):
            raise InvalidInput(f"{type(backend).__name__} takes no compaction requests")
        if not now:
            await backend.request_compaction(session_id, reason=reason, focus=focus)
            if self.after_strategy is None:
                self._asked.add(session_id)
                while len(self._asked) > _ASKED_KEPT:
                    self._asked.pop()
            return None
        chosen = self.after_strategy or self.before_strategy
        if chosen is None:
            raise InvalidInput("this provider has no strategy to compact with now")
        strategy = await self._judged(backend, session_id, chosen)
        return await backend.request_compaction(
            session_id, reason=reason, focus=focus, now=True, strategy=strategy
        )

    async def _after_run(self, session_id: str) -> CompactionEvent | None:
        assert self.after_strategy is not None
        return await self._compact_after_run(session_id, self.after_strategy)

    async def _run_asked(self, session_id: str) -> CompactionEvent | None:
        """The after phase of a provider without an after-run strategy, for a session it
        asked compaction of: the before-call strategy compacts the stored history as
        asked, so the request ends with the turn."""
        if self.before_strategy is None:
            self._asked.discard(session_id)
            return None
        return await self._compact_after_run(session_id, self.before_strategy)

    async def _compact_after_run(
        self, session_id: str, strategy: CompactionStrategy
    ) -> CompactionEvent | None:
        """Compact the session with ``strategy`` (judged by its fit), phase ``after_run``;
        a request this provider made for it is run so."""
        self._asked.discard(session_id)
        backend = await self._source.get()
        judged = await self._judged(backend, session_id, strategy)
        assert judged is not None
        return await backend.compact(session_id, judged, phase="after_run")

    async def flush(self, *, timeout: float | None = None) -> FlushResult:  # noqa: ASYNC109
        """Wait for the deferred compactions asked for so far, for at most ``timeout``
        seconds (None: as long as they take); see :meth:`DeferredCompactions.flush`.
        Inline, there is nothing to wait for."""
        if self.deferred is None:
            return FlushResult()
        return await self.deferred.flush(timeout=timeout)

    async def aclose(self, *, timeout: float = DEFAULT_CLOSE_TIMEOUT) -> FlushResult:  # noqa: ASYNC109
        """Finish the deferred compactions within ``timeout`` seconds, cancel the rest and
        stop their tasks (the backend stays open); see :meth:`DeferredCompactions.aclose`.
        """
        if self.deferred is None:
            return FlushResult()
        return await self.deferred.aclose(timeout=timeout)

    async def _record_before_spec(self, session_id: str) -> None:
        """Record the before-call strategy's spec in the session's metadata, once per
        session and provider (a backend without metadata, or a strategy no spec can
        write, records nothing)."""
        spec = self._before_spec
        if spec is None or session_id in self._recorded:
            return
        backend = await self._source.get()
        if isinstance(backend, MetadataBackend):
            metadata = await backend.get_metadata(session_id)
            if metadata.get(BEFORE_STRATEGY_KEY) != spec:
                await backend.set_metadata(session_id, {**metadata, BEFORE_STRATEGY_KEY: spec})
        self._recorded.add(session_id)
