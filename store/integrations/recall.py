"""The recall tool every adapter gives the model: :class:`Recall`.

``recall(query, cursor=None)`` searches the current session through the store's
:meth:`~store.contract.HistoryBackend.search`: its excluded messages first
(``excluded_only=True``), then the rest (``include_excluded=False``), best matches first
within each. It returns the compact JSON of :mod:`store.search.recall`: each hit's role,
when it was written, its text capped, and for an excluded message when, why and by which
audit event it was left out; the ids it quotes under the recall mark; a ``next_cursor``
when more exist. The result never has more tokens than its budget (counted with the
store's tokenizer): a page holds the hits that fit, and the cursor resumes after the
last of them. A query or cursor the store refuses comes back as one line of text for
the model (:func:`~store.search.recall.recall_error`), never as an exception.

The framework adapters build the tool from it: ``ChatledgerHistoryProvider(...,
recall=True)`` (Agent Framework), :func:`store.integrations.openai_agents.recall_tool`
(OpenAI Agents SDK), ``ChatledgerMiddleware(..., recall=True)`` (LangChain). It imports
no framework.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Protocol, runtime_checkable

from store.contract import HistoryBackend
from store.errors import InvalidInput, SessionNotFound
from store.models import ExcludedGroup, SearchPage
from store.search.query import parse_query
from store.search.recall import (
    DEFAULT_RECALL_CHARS,
    DEFAULT_RECALL_NOTE,
    DEFAULT_RECALL_TOKENS,
    RecallCursor,
    RecallEntry,
    decode_recall_cursor,
    encode_recall_cursor,
    recall_error,
    recall_hit,
    recall_result,
)
from strategies.bounded import bound_result, notice_tokens
from strategies.bounded.results import check_int
from strategies.tokenizers import Tokenizer

__all__ = ["Recall", "RecallOptions", "StoreSource", "recall_options"]

_FETCH: Final = 10
"""Hits asked of the store at a time."""
_MIN_CHARS: Final = 8
"""The shortest text a hit is cut to when even one does not fit the budget."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RecallOptions:
    """How an adapter's recall tool is set: ``recall=True`` is ``RecallOptions()``."""

    max_tokens: int = DEFAULT_RECALL_TOKENS
    """The most tokens one result may have (the store's tokenizer counts)."""
    max_chars: int = DEFAULT_RECALL_CHARS
    """The longest text of one hit, in characters."""
    note: str | None = DEFAULT_RECALL_NOTE
    """The sentence added after each summary the model is sent (None: none)."""

    def __post_init__(self) -> None:
        check_int(self.max_tokens, "max_tokens")
        check_int(self.max_chars, "max_chars", minimum=_MIN_CHARS)
        if self.note is not None and not isinstance(self.note, str):
            raise InvalidInput(f"note must be a string or None, got {type(self.note).__name__}")


def recall_options(recall: bool | RecallOptions) -> RecallOptions | None:
    """An adapter's ``recall=`` keyword as options (None: the tool is off)."""
    if isinstance(recall, RecallOptions):
        return recall
    if not isinstance(recall, bool):
        raise InvalidInput(f"recall must be a bool or RecallOptions, got {type(recall).__name__}")
    return RecallOptions() if recall else None


@runtime_checkable
class StoreSource(Protocol):
    """What hands :class:`Recall` its store on each call (an adapter's lease on it)."""

    async def get(self) -> HistoryBackend:
        """The store, opened on the first call."""
        ...


@dataclass(frozen=True, slots=True)
class _Given:
    store: HistoryBackend

    async def get(self) -> HistoryBackend:
        return self.store


@dataclass(frozen=True, slots=True)
class _Call:
    """One recall: the store, the session, the query (as given and as parsed), the
    excluded groups and the tokenizer that counts."""

    store: HistoryBackend
    session_id: str
    query: str
    parsed: str
    groups: dict[str, ExcludedGroup]
    tokenizer: Tokenizer
    max_tokens: int
    max_chars: int

    async def search(self, at: RecallCursor, limit: int) -> SearchPage:
        rest = at.phase == "rest"
        return await self.store.search(
            self.query,
            session_id=self.session_id,
            include_excluded=not rest,
            excluded_only=not rest,
            limit=limit,
            cursor=at.search_cursor,
        )

    def entries(self, page: SearchPage, max_chars: int | None = None) -> list[RecallEntry]:
        chars = self.max_chars if max_chars is None else max_chars
        return [
            recall_hit(hit, self.groups.get(hit.group_id), max_chars=chars) for hit in page.hits
        ]

    def text(self, entries: Sequence[RecallEntry], cursor: RecallCursor | None) -> str:
        following = None if cursor is None else encode_recall_cursor(cursor, self.parsed)
        return recall_result(entries, following)

    def fits(self, text: str) -> bool:
        return self.tokenizer.count_tokens(text) <= self.max_tokens


def _following(at: RecallCursor, search_cursor: str | None) -> RecallCursor | None:
    """Where the recall resumes after a page that ended with ``search_cursor``."""
    if search_cursor is not None:
        return RecallCursor(at.phase, search_cursor)
    return RecallCursor("rest") if at.phase == "excluded" else None


class Recall:
    """The recall tool over a store (see the module docstring); call it with the
    session, the model's query and its cursor."""

    def __init__(
        self,
        store: HistoryBackend | StoreSource,
        *,
        max_tokens: int = DEFAULT_RECALL_TOKENS,
        max_chars: int = DEFAULT_RECALL_CHARS,
        tokenizer: Tokenizer | None = None,
        note: str | None = DEFAULT_RECALL_NOTE,
    ) -> None:
        """Search ``store`` (or the store a :class:`StoreSource` hands out);
        each result at most ``max_tokens`` tokens counted with ``tokenizer`` (the
        store's when None), each hit's text at most ``max_chars`` characters. ``note``
        is the sentence the adapters add after each summary the model is sent (None:
        none)."""
        self.max_tokens = check_int(max_tokens, "max_tokens")
        self.max_chars = check_int(max_chars, "max_chars", minimum=_MIN_CHARS)
        self.tokenizer = tokenizer
        self.note = note
        self._source: StoreSource = _Given(store) if isinstance(store, HistoryBackend) else store
        if tokenizer is not None:
            self._check_budget(tokenizer)

    @classmethod
    def of(
        cls,
        store: HistoryBackend | StoreSource,
        options: RecallOptions,
        *,
        tokenizer: Tokenizer | None = None,
    ) -> Recall:
        """The tool ``options`` describe, over ``store``."""
        return cls(
            store,
            max_tokens=options.max_tokens,
            max_chars=options.max_chars,
            tokenizer=tokenizer,
            note=options.note,
        )

    def _check_budget(self, tokenizer: Tokenizer) -> None:
        needed = notice_tokens(tokenizer)
        if self.max_tokens < needed:
            raise InvalidInput(
                f"recall max_tokens={self.max_tokens} cannot hold even the ResultTooLarge "
                f"notice ({needed} tokens with {tokenizer.name})"
            )

    async def __call__(self, session_id: str, query: str, cursor: str | None = None) -> str:
        """The recall result for ``query`` in ``session_id`` from ``cursor`` (the first
        page without one), or one line saying why the query or cursor is refused."""
        store = await self._source.get()
        tokenizer = self.tokenizer or store.tokenizer
        self._check_budget(tokenizer)
        try:
            parsed = parse_query(query).text
            at = RecallCursor("excluded") if not cursor else decode_recall_cursor(cursor, parsed)
            try:
                groups = {g.group_id: g for g in await store.excluded(session_id)}
            except SessionNotFound:
                return recall_result([], None)
            call = _Call(
                store, session_id, query, parsed, groups, tokenizer, self.max_tokens, self.max_chars
            )
            text = await _page(call, at)
        except InvalidInput as error:
            return recall_error(str(error).rstrip("."))
        return bound_result(text, max_tokens=self.max_tokens, tokenizer=tokenizer)


async def _page(call: _Call, at: RecallCursor) -> str:
    """The hits that fit the budget from ``at``, and the cursor after the last of them."""
    taken: list[RecallEntry] = []
    while True:
        page = await call.search(at, _FETCH)
        entries = call.entries(page)
        following = _following(at, page.next_cursor)
        if not entries and following is None:
            return call.text(taken, None)
        fitting = _fitting(call, taken, entries, following)
        if fitting < len(entries):
            return await _cut(call, taken, at, fitting)
        taken.extend(entries)
        if following is None:
            return call.text(taken, None)
        at = following


def _fitting(
    call: _Call,
    taken: list[RecallEntry],
    entries: list[RecallEntry],
    following: RecallCursor | None,
) -> int:
    """How many of ``entries`` fit after ``taken``, counted with ``following`` as the
    cursor (the cursor after fewer of them is about as long; :func:`_cut` checks it)."""
    count = 0
    for end in range(1, len(entries) + 1):
        if not call.fits(call.text([*taken, *entries[:end]], following)):
            break
        count = end
    return count


async def _cut(call: _Call, taken: list[RecallEntry], at: RecallCursor, fitting: int) -> str:
    """The page that ends after the first ``fitting`` hits from ``at`` (fewer when the
    cursor after them does not fit), with its cursor."""
    for limit in range(fitting, 0, -1):
        page = await call.search(at, limit)
        text = call.text([*taken, *call.entries(page)], _following(at, page.next_cursor))
        if call.fits(text):
            return text
    if taken:
        return call.text(taken, at)  # counted with this very cursor when taken was
    return await _one(call, at)


async def _one(call: _Call, at: RecallCursor) -> str:
    """The first hit alone, its text cut shorter until it fits (else too large: the
    caller's bound turns it into a notice)."""
    page = await call.search(at, 1)
    following = _following(at, page.next_cursor)
    chars = call.max_chars
    text = call.text(call.entries(page), following)
    while chars > _MIN_CHARS and not call.fits(text):
        chars = max(_MIN_CHARS, chars // 2)
        text = call.text(call.entries(page, chars), following)
    return text
