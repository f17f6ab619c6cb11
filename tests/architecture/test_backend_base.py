"""A third-party backend written on :class:`store.BackendBase` gets the whole front:
argument checks before any primitive runs, the closed-store guard, the spans, and a
strategy's errors translated, without writing any of it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from typing import Any

import pytest

from store import BackendBase, HistoryBackend
from store.contract import (
    Written,
    is_admin_backend,
    is_bulk_import_backend,
    is_upkeep_backend,
)
from store.errors import InvalidInput, StoreClosed
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
from store.telemetry import Unchanged, names
from store.usage import Usage
from strategies import TruncationStrategy
from strategies.base import CompactionStrategy
from strategies.changeset import ChangeSet
from strategies.messages import Message
from strategies.specs import InvalidStrategySpec
from strategies.tokenizers import CharacterEstimatorTokenizer, TiktokenTokenizer
from strategies.view import View
from tests.telemetry.conftest import Collected, collected

__all__ = ["collected"]


class ListBackend(BackendBase):
    """A third party's backend: a list of messages a session, the contract's front
    inherited, every primitive it runs recorded in :attr:`calls`. What it does not
    support is refused as a later contract method is by default."""

    def __init__(self, *, tenant: str = "default") -> None:
        super().__init__(tenant=tenant, tokenizer=CharacterEstimatorTokenizer())
        self.stored: dict[str, list[Message]] = {}
        self.calls: list[str] = []
        self.released = 0
        self.fail_with: Exception | None = None

    async def _release(self) -> None:
        self.released += 1

    def _ran(self, name: str) -> None:
        self.calls.append(name)
        if self.fail_with is not None:
            raise self.fail_with

    async def _append(
        self, session_id: str, batch: list[Message], provenance: Provenance | None
    ) -> Written:
        self._ran("_append")
        stored = self.stored.setdefault(session_id, [])
        known = {m.message_id for m in stored}
        fresh = [m for m in batch if m.message_id not in known]
        stored.extend(fresh)
        return Written(len(fresh), sum(map(self.count_tokens, fresh)))

    async def _pending_view(self, session_id: str, batch: list[Message]) -> View:
        self._ran("_pending_view")
        return self._built(session_id, batch)

    async def _view(self, session_id: str) -> View:
        self._ran("_view")
        return self._built(session_id, [])

    def _built(self, session_id: str, batch: list[Message]) -> View:
        stored = self.stored.get(session_id, [])
        return View.from_messages([*stored, *batch], self.tokenizer, policy=self.policy)

    async def _compact(
        self, session_id: str, strategy: CompactionStrategy, *, phase: Phase, dry_run: bool
    ) -> CompactionEvent | ChangeSet | Unchanged:
        self._ran("_compact")
        return await strategy.plan(self._built(session_id, []))  # plans, never applies

    def _aiter_history(
        self,
        session_id: str,
        *,
        include_excluded: bool,
        after: int | None,
        before: int | None,
        page_size: int,
    ) -> AsyncIterator[StoredMessage]:
        raise self._unsupported("aiter_history")

    async def _history(
        self,
        session_id: str,
        *,
        include_excluded: bool,
        limit: int | None,
        before: int | None,
        after: int | None,
    ) -> list[StoredMessage]:
        raise self._unsupported("history")

    async def _retract_last(self, session_id: str) -> StoredMessage | None:
        raise self._unsupported("retract_last")

    async def _sessions(
        self,
        *,
        limit: int | None,
        after: str | None,
        updated_since: datetime | None,
        order: SessionOrder,
    ) -> list[SessionInfo]:
        raise self._unsupported("sessions")

    async def _session(self, session_id: str) -> SessionInfo:
        raise self._unsupported("session")

    async def _get_metadata(self, session_id: str) -> dict[str, Any]:
        raise self._unsupported("get_metadata")

    async def _set_metadata(self, session_id: str, metadata: dict[str, Any]) -> None:
        raise self._unsupported("set_metadata")

    async def _delete_session(self, session_id: str) -> None:
        raise self._unsupported("delete_session")

    async def _recount(self, session_id: str) -> SessionInfo:
        raise self._unsupported("recount")

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
        raise self._unsupported("audit")

    async def _excluded(self, session_id: str) -> list[ExcludedGroup]:
        raise self._unsupported("excluded")

    async def _why(self, session_id: str, message_id: str) -> WhyResult:
        raise self._unsupported("why")

    async def _stats(self, session_id: str | None) -> Stats:
        raise self._unsupported("stats")

    async def _restore(
        self, session_id: str, *, group_ids: list[str] | None, event_id: str | None
    ) -> CompactionEvent | None:
        raise self._unsupported("restore")

    async def _set_pinned(
        self, session_id: str, group_ids: list[str], *, pinned: bool
    ) -> list[str]:
        raise self._unsupported("pin" if pinned else "unpin")

    async def _import(
        self, session_id: str, batch: list[Message], source: str
    ) -> tuple[ImportResult, Written]:
        raise self._unsupported("import_messages")

    async def _purge(self, cutoff: datetime, *, dry_run: bool) -> PurgeReport:
        raise self._unsupported("purge")

    async def _redact(
        self, session_id: str, message_ids: tuple[str, ...], *, reason: str
    ) -> RedactReport:
        raise self._unsupported("redact")


def _hi(message_id: str = "m1") -> Message:
    return Message.text_message("user", "hello there", message_id=message_id)


async def _drain(store: HistoryBackend) -> None:
    async for _ in store.aiter_history("s"):
        pass


Call = Callable[[HistoryBackend], Awaitable[object]]

EVERY_METHOD: list[tuple[str, Call]] = [
    ("append", lambda s: s.append("s", [_hi()])),
    ("history", lambda s: s.history("s")),
    ("aiter_history", _drain),
    ("retract_last", lambda s: s.retract_last("s")),
    ("sessions", lambda s: s.sessions()),
    ("session", lambda s: s.session("s")),
    ("get_metadata", lambda s: s.get_metadata("s")),
    ("set_metadata", lambda s: s.set_metadata("s", {"k": 1})),
    ("delete_session", lambda s: s.delete_session("s")),
    ("recount", lambda s: s.recount("s")),
    ("view", lambda s: s.view("s")),
    ("context", lambda s: s.context("s")),
    ("compact", lambda s: s.compact("s", "sliding_window:keep_last_groups=1")),
    ("audit", lambda s: s.audit("s")),
    ("excluded", lambda s: s.excluded("s")),
    ("why", lambda s: s.why("s", "m1")),
    ("stats", lambda s: s.stats("s")),
    ("restore", lambda s: s.restore("s", group_ids=["g"])),
    ("pin", lambda s: s.pin("s", ["g"])),
    ("unpin", lambda s: s.unpin("s", ["g"])),
    ("import_messages", lambda s: s.import_messages("s", [_hi()])),
    ("purge", lambda s: s.purge(older_than=datetime(2000, 1, 1).astimezone())),
    ("redact", lambda s: s.redact("s", ["m1"], reason="asked")),
    ("search", lambda s: s.search("hello")),
    ("append_if", lambda s: s.append_if("s", [_hi()], record={"revision": "r"}, expected=None)),
    ("locate", lambda s: s.locate("m1")),
]

BAD_ARGUMENTS: list[tuple[str, Call]] = [
    ("append: empty session id", lambda s: s.append("", [_hi()])),
    ("append: a string as messages", lambda s: s.append("s", "hello")),  # type: ignore[arg-type]
    ("append: provenance as text", lambda s: s.append("s", _hi(), provenance="x")),  # type: ignore[arg-type]
    ("history: limit as text", lambda s: s.history("s", limit="5")),  # type: ignore[arg-type]
    ("aiter_history: page size 0", lambda s: _first(s.aiter_history("s", page_size=0))),
    ("sessions: unknown order", lambda s: s.sessions(order="size")),  # type: ignore[arg-type]
    ("set_metadata: a list", lambda s: s.set_metadata("s", [1])),  # type: ignore[arg-type]
    ("context: a number as strategy", lambda s: s.context("s", strategy=5)),  # type: ignore[arg-type]
    ("context: a bad spec", lambda s: s.context("s", strategy="truncation:max_n=x")),
    ("compact: unknown phase", lambda s: s.compact("s", "truncation:max_n=4", phase="x")),  # type: ignore[call-overload]
    ("audit: since as text", lambda s: s.audit(since="yesterday")),  # type: ignore[arg-type]
    ("why: message id None", lambda s: s.why("s", None)),  # type: ignore[arg-type]
    ("restore: both targets", lambda s: s.restore("s", group_ids=["g"], event_id="e")),
    ("pin: one string as ids", lambda s: s.pin("s", "g")),
    ("import: source None", lambda s: s.import_messages("s", [_hi()], source=None)),  # type: ignore[arg-type]
    (
        "purge: dry_run as text",
        lambda s: s.purge(older_than=datetime.now().astimezone(), dry_run="y"),  # type: ignore[arg-type]
    ),
    ("redact: no reason", lambda s: s.redact("s", ["m1"], reason="")),
    ("append_if: no revision", lambda s: s.append_if("s", [], record={}, expected=None)),
    ("append_if: expected 1", lambda s: s.append_if("s", [], record={"revision": "r"}, expected=1)),  # type: ignore[arg-type]
    ("locate: id None", lambda s: s.locate(None)),  # type: ignore[arg-type]
]


async def _first(messages: AsyncIterator[object]) -> None:
    async for _ in messages:
        return


def test_it_conforms_to_the_contract_and_has_no_optional_ability() -> None:
    backend = ListBackend()
    assert isinstance(backend, HistoryBackend)
    assert not is_bulk_import_backend(backend)
    assert not is_admin_backend(backend)
    assert not is_upkeep_backend(backend)


def test_a_backend_missing_a_primitive_cannot_be_made() -> None:
    class Incomplete(BackendBase):
        async def _append(
            self, session_id: str, batch: list[Message], provenance: Provenance | None
        ) -> Written:
            return Written(0, 0)

    with pytest.raises(TypeError, match="_pending_view"):
        Incomplete()  # type: ignore[abstract]


def test_the_constructor_checks_the_tenant() -> None:
    with pytest.raises(InvalidInput, match="tenant"):
        ListBackend(tenant="a\x00b")


@pytest.mark.parametrize(("name", "call"), BAD_ARGUMENTS, ids=[n for n, _ in BAD_ARGUMENTS])
async def test_bad_arguments_are_refused_before_any_primitive_runs(name: str, call: Call) -> None:
    backend = ListBackend()
    with pytest.raises(InvalidInput):
        await call(backend)
    assert backend.calls == []


@pytest.mark.parametrize(("name", "call"), EVERY_METHOD, ids=[n for n, _ in EVERY_METHOD])
async def test_every_method_is_refused_once_closed(name: str, call: Call) -> None:
    backend = ListBackend()
    await backend.aclose()
    await backend.aclose()  # closing twice releases once
    with pytest.raises(StoreClosed, match="closed"):
        await call(backend)
    assert backend.calls == [] and backend.released == 1


async def test_a_method_the_backend_lacks_names_itself_and_the_backend() -> None:
    with pytest.raises(InvalidInput, match=r"^recount is not supported by ListBackend$"):
        await ListBackend().recount("s")


async def test_a_backend_written_before_append_if_and_locate_refuses_them_by_name() -> None:
    backend = ListBackend()
    with pytest.raises(InvalidInput, match=r"^append_if is not supported by ListBackend$"):
        await backend.append_if("s", [_hi()], record={"revision": "r"}, expected=None)
    with pytest.raises(InvalidInput, match=r"^locate is not supported by ListBackend$"):
        await backend.locate("m1")


class CountingBackend(ListBackend):
    """A backend written before usage: it has stats, and no usage primitive."""

    async def _stats(self, session_id: str | None) -> Stats:
        return Stats(
            tenant=self.tenant,
            session_id=session_id,
            sessions=1,
            stored_messages=0,
            stored_groups=0,
            stored_tokens=0,
            active_messages=0,
            active_groups=0,
            active_tokens=0,
            events=0,
        )


async def test_a_backend_without_usage_keeps_its_stats_and_has_no_calls() -> None:
    backend = CountingBackend()
    stats = await backend.stats("s")
    assert (stats.sessions, stats.usage_calls, stats.cache_breaks) == (1, 0, 0)
    assert await backend.usage_calls("s") == []
    assert (await backend.usage()).total.calls == 0
    assert await backend.calibration("s") is None
    with pytest.raises(InvalidInput, match="record_usage is not supported by CountingBackend"):
        await backend.record_usage("s", Usage(input_tokens=1))


async def test_a_strategys_errors_become_invalid_input() -> None:
    backend = ListBackend()
    await backend.append("s", [_hi("m1"), _hi("m2")])
    counted_otherwise = TruncationStrategy(max_n=1, compact_to=1, tokenizer=TiktokenTokenizer())
    with pytest.raises(InvalidInput, match="tokenizer") as raised:
        await backend.context("s", strategy=counted_otherwise)
    assert type(raised.value) is InvalidInput
    with pytest.raises(InvalidInput, match="tokenizer"):
        await backend.compact("s", counted_otherwise, dry_run=True)
    backend.fail_with = InvalidStrategySpec("a spec the backend could not read")
    with pytest.raises(InvalidInput, match="could not read"):
        await backend.context("s")
    assert backend.calls == ["_append", "_pending_view", "_compact", "_pending_view"]


async def test_its_operations_are_traced_as_the_stores_are(collected: Collected) -> None:
    backend = ListBackend(tenant="acme")
    assert await backend.append("s", [_hi("m1"), _hi("m2")]) == ["m1", "m2"]
    sent = await backend.context("s", pending=[_hi("m3")])
    changes = await backend.compact("s", TruncationStrategy(max_n=1, compact_to=1), dry_run=True)
    assert isinstance(changes, ChangeSet)
    [append] = collected.spans(names.SPAN_APPEND)
    assert dict(append.attributes or {})[names.TENANT] == "acme"
    assert dict(append.attributes or {})[names.MESSAGES_AFTER] == 2
    [context] = collected.spans(names.SPAN_CONTEXT)
    assert dict(context.attributes or {})[names.MESSAGES_AFTER] == len(sent) == 3
    [compact] = collected.spans(names.SPAN_COMPACT)
    assert dict(compact.attributes or {})[names.OUTCOME] == "dry_run"
    assert collected.total(names.TOKENS_STORED) == sum(map(backend.count_tokens, sent[:2]))
