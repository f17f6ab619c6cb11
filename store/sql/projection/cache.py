"""An in-process cache of sessions' active views, checked against the session row.

A turn reads the same active groups and messages several times: the after-run
compaction plans on them and the next projection sends them. The store keeps, per
session, the active group rows and the parsed messages of the groups it loaded, under
the *key* of the session row they were read at: its ``incarnation`` and ``revision``.
Every write bumps ``revision``, and a deleted and recreated session draws a new
``incarnation`` (a random token: unlike ``created_at``, it cannot repeat within a clock
tick), so a key equal to the session row's means nothing changed since. Every view
reads the session row first and uses the cache only on a match; what a read adds to the
cache is added only if the session row read after it still has the entry's key. A
session row without an incarnation (created by a release that predates it) is never
cached.

Writes made through the same store advance the key instead of discarding the entry: an
append knows which groups it touched, so those groups' messages are dropped and the
others stay (the group rows are read again); a compaction hands over the rows it wrote
(:meth:`SessionCache.write_rows`), so nothing is read again. A write from anywhere else
shows as a key that does not match, and the entry is replaced. When the session row says
every write since the entry's rows were read was of its write chain (appends and
compactions without reductions, which change no group's messages without changing its
row: see ``chain_since`` in :mod:`store.sql.schema`), the entry is caught up
(:meth:`SessionCache.catch_up`): every such write sets the rows it writes'
``written_revision``, so the rows written since are read with the session row in one
statement and put in place, and the messages of the other groups are kept. Writers
sharing a session read the groups the others wrote, not the whole view, at each turn;
and once a view found the session moved (:meth:`SessionCache.moving`), the next one
reads them with the session row first, not after a read that finds it moved again.
When the chain does not reach that far back but does reach the entry's revision, the
new entry carries the old one's messages, and keeps those of each group whose row, read
again, is unchanged.

Bounded: at most ``max_messages`` parsed messages over all sessions; the least recently
used sessions are dropped first. ``max_messages=0`` turns the cache off.
"""

from __future__ import annotations

from bisect import insort
from collections import OrderedDict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from store.sql.schema import GROUPS, SESSIONS
from store.sql.sessions import KEYS
from strategies.messages import Message
from strategies.view import GroupLinks, GroupView, Totals

if TYPE_CHECKING:
    from store.sql.compaction.mirror import Written

__all__ = ["DEFAULT_CACHE_MESSAGES", "CachedView", "Key", "SessionCache", "read_key", "session_key"]

DEFAULT_CACHE_MESSAGES = 20_000
"""Parsed messages a store keeps by default (a few tens of MB at about 1 kB each)."""
MOVING_SESSIONS = 1_024
"""Sessions a cache remembers other writers moving (see :meth:`SessionCache.moving`)."""

Key = tuple[str | None, int]
"""A session row's ``(incarnation, revision)``."""

Pairs = tuple[tuple[int, Message], ...]
"""A group's ``(seq, message)`` pairs in ``seq`` order."""


def session_key(row: RowMapping | Mapping[str, Any]) -> Key:
    """The cache key of a session row."""
    return (row["incarnation"], row["revision"])


_READ_KEY = select(SESSIONS.c.incarnation, SESSIONS.c.revision).where(*KEYS)


async def read_key(conn: AsyncConnection, tenant: str, session_id: str) -> Key | None:
    """The session row's key as it is now (None when the session is gone)."""
    params = {"tenant": tenant, "session_id": session_id}
    row = (await conn.execute(_READ_KEY, params)).first()
    return None if row is None else (row[0], row[1])


@dataclass(slots=True)
class CachedView:
    """What is known of one session at ``key``."""

    key: Key
    rows: Sequence[Mapping[Any, Any]] | None = None
    """The active group rows in projection order (None: read them again)."""
    views: Sequence[GroupView] | None = None
    """The strategies' view of each of :attr:`rows`."""
    dirty: frozenset[str] = frozenset()
    """Groups whose rows this store's own write changed: read these again."""
    excluded: Totals | None = None
    messages: dict[str, Pairs] = field(default_factory=dict)
    """Loaded groups' messages, reductions applied, by group id."""
    shown: dict[str, tuple[Message, ...]] = field(default_factory=dict)
    """The messages alone of each group of :attr:`messages`."""
    links: dict[str, GroupLinks] = field(default_factory=dict)
    """How the messages of groups of :attr:`shown` pair (made when first projected)."""
    size: int = 0
    """Messages held in :attr:`messages`."""
    carried: CachedView | None = None
    """The entry this one replaced, at an earlier revision of the session's write chain:
    its messages are kept for each group whose row :meth:`SessionCache.set_rows` finds
    unchanged (until then, none of them is used)."""
    session: Mapping[Any, Any] | None = None
    """The session row at :attr:`key`, as a view read it or this store's append wrote it
    (None: not known at this key).
    An append plans from it without reading the row again
    (:func:`~store.sql.append.one_statement.append_in_one_statement`)."""
    rows_at: int | None = None
    """The session's revision as of which :attr:`rows` hold every active group's row,
    except the :attr:`dirty` ones (each written after it): every group row written
    since carries a later ``written_revision`` (see :meth:`SessionCache.catch_up`).
    None: not known."""


_GROUP_VALUES = itemgetter(*(column.key for column in GROUPS.c))
"""A group row's values of its table's columns (a read may add others, such as the
session's key it saw)."""


def _same_group_row(old: Mapping[Any, Any], new: Mapping[Any, Any]) -> bool:
    """Whether two reads of a group found its row the same."""
    try:
        return bool(_GROUP_VALUES(old) == _GROUP_VALUES(new))
    except KeyError:  # a partial row: not known to be the same
        return False


def order_of(pair: tuple[Mapping[Any, Any], GroupView]) -> tuple[int, int]:
    """Where a (row, view) pair sits in the projection."""
    return pair[1].order_key


def place(
    pairs: list[tuple[Mapping[Any, Any], GroupView]],
    fresh: list[tuple[Mapping[Any, Any], GroupView]],
) -> None:
    """Put ``fresh`` pairs into ``pairs`` (in projection order) where they belong; new
    groups usually go at the end, others by bisection."""
    for pair in sorted(fresh, key=order_of):
        if not pairs or order_of(pairs[-1]) < order_of(pair):
            pairs.append(pair)
        else:
            insort(pairs, pair, key=order_of)


def replaced(
    rows: Sequence[Mapping[Any, Any]],
    views: Sequence[GroupView],
    gone: Collection[str],
    fresh: list[tuple[Mapping[Any, Any], GroupView]],
) -> tuple[tuple[Mapping[Any, Any], ...], tuple[GroupView, ...]]:
    """``rows`` and their ``views`` without the groups ``gone``, with the ``fresh`` pairs
    placed (see :func:`place`), in projection order."""
    pairs = [(r, v) for r, v in zip(rows, views, strict=True) if v.group_id not in gone]
    place(pairs, fresh)
    if not pairs:
        return (), ()
    placed_rows, placed_views = zip(*pairs, strict=True)
    return placed_rows, placed_views


class SessionCache:
    """Cached views by session id, for one store (one tenant)."""

    def __init__(self, max_messages: int = DEFAULT_CACHE_MESSAGES) -> None:
        """Keep at most ``max_messages`` parsed messages (0: cache nothing)."""
        self._max = max(0, max_messages)
        self._entries: OrderedDict[str, CachedView] = OrderedDict()
        self._size = 0
        self._moving: OrderedDict[str, None] = OrderedDict()
        """Sessions the last view of found moved by another writer (most recent last)."""

    @property
    def size(self) -> int:
        """Messages held over all sessions."""
        return self._size

    def note_moved(self, session_id: str, moved: bool) -> None:
        """Record whether a view of the session found it moved by another writer since
        this store last read or wrote it (at most :data:`MOVING_SESSIONS` are kept)."""
        if not moved:
            self._moving.pop(session_id, None)
            return
        self._moving[session_id] = None
        self._moving.move_to_end(session_id)
        if len(self._moving) > MOVING_SESSIONS:
            self._moving.popitem(last=False)

    def moving(self, session_id: str) -> bool:
        """Whether the last view of the session found it moved: other writers share it,
        and the next view likely finds it moved too."""
        return session_id in self._moving

    def note_session(self, session_id: str, session: Mapping[Any, Any]) -> None:
        """Keep the ``session`` row a view read, with the entry at its key."""
        entry = self._entries.get(session_id)
        if entry is not None and entry.key == session_key(session):
            entry.session = session

    def session_row(self, session_id: str) -> Mapping[Any, Any] | None:
        """The session row last read at the key the session's entry holds (None: not
        read at it, or no entry)."""
        entry = self._entries.get(session_id)
        return None if entry is None else entry.session

    def peek(self, session_id: str) -> CachedView | None:
        """The session's entry at whatever key it holds (not checked, not refreshed)."""
        return self._entries.get(session_id)

    def entry(self, session_id: str, key: Key, *, since: int | None = None) -> CachedView | None:
        """The session's entry at ``key``, started empty when absent or at another key
        (None: not cached, when the cache is off or the row has no incarnation).

        ``since``: the session row's write chain reaches ``key`` from that revision on
        (None: it does not). A new entry then carries the one it replaces, when that one
        is of the same incarnation at a revision of the chain and knows its rows.
        """
        if self._max == 0 or key[0] is None:
            self.discard(session_id)
            return None
        entry = self._entries.get(session_id)
        if entry is not None and entry.key == key:
            self._entries.move_to_end(session_id)
            return entry
        self.discard(session_id)
        fresh = self._entries[session_id] = CachedView(key)
        # an entry whose rows were never read (the session moved on during the read)
        # passes on what it carried
        base = entry if entry is None or entry.rows is not None else entry.carried
        if (
            base is not None
            and since is not None
            and base.rows is not None
            and base.key[0] == key[0]
            and since <= base.key[1] < key[1]
        ):
            base.carried = None
            fresh.carried = base
        return fresh

    def _current(self, session_id: str, entry: CachedView) -> bool:
        return self._entries.get(session_id) is entry

    def set_rows(
        self,
        session_id: str,
        entry: CachedView,
        rows: Sequence[Mapping[Any, Any]],
        views: Sequence[GroupView],
        excluded: Totals,
    ) -> None:
        """Record the active group rows read at ``entry.key``; forget other groups."""
        if not self._current(session_id, entry):
            return
        entry.rows, entry.views, entry.excluded = tuple(rows), tuple(views), excluded
        entry.dirty, entry.rows_at = frozenset(), entry.key[1]
        active = {v.group_id for v in entry.views}
        for group_id in [g for g in entry.messages if g not in active]:
            self._drop_group(entry, group_id)
        carried, entry.carried = entry.carried, None
        if carried is not None:
            self._adopt(session_id, entry, carried)

    def _adopt(self, session_id: str, entry: CachedView, carried: CachedView) -> None:
        """Keep ``carried``'s messages of each group whose row ``entry`` holds unchanged."""
        held = carried.messages
        before = {row["group_id"]: row for row in carried.rows or () if row["group_id"] in held}
        for row in entry.rows or ():
            group_id = row["group_id"]
            old = before.get(group_id)
            if old is None or group_id in entry.messages or not _same_group_row(old, row):
                continue
            pairs = held[group_id]
            entry.messages[group_id] = pairs
            entry.shown[group_id] = carried.shown[group_id]
            if group_id in carried.links:
                entry.links[group_id] = carried.links[group_id]
            entry.size += len(pairs)
            self._size += len(pairs)
        self._evict(keep=session_id)
        if self._size > self._max:
            self.discard(session_id)

    def catch_up(
        self,
        session_id: str,
        held: CachedView,
        key: Key,
        written: Sequence[tuple[Mapping[Any, Any], GroupView]],
        excluded: Totals,
    ) -> CachedView:
        """The session's entry at ``key``, made from ``held`` (an entry whose rows are
        known as of :attr:`CachedView.rows_at`) and ``written``: every group row written
        since then, with its view (excluded ones too), read in one statement with the
        session row at ``key`` (other group rows read with them may come too: they are
        as current). Only when the session's write chain reaches ``key`` from
        ``held.rows_at``: every write since changed a group's messages only with its
        row, so the messages of the groups not written stay ``held``'s."""
        assert held.rows is not None and held.views is not None
        changed = {row["group_id"] for row, _ in written}
        active_written = [(r, v) for r, v in written if not r["excluded"]]
        rows, views = replaced(held.rows, held.views, changed, active_written)
        active = {v.group_id for v in views}
        kept = {g: p for g, p in held.messages.items() if g not in changed and g in active}
        self.discard(session_id)  # whichever entry is there now (``held`` or its successor)
        caught = CachedView(
            key,
            rows=rows,
            views=views,
            excluded=excluded,
            messages=kept,
            shown={g: held.shown[g] for g in kept},
            links={g: v for g, v in held.links.items() if g in kept},
            size=sum(len(p) for p in kept.values()),
            rows_at=key[1],
        )
        self._entries[session_id] = caught
        self._size += caught.size
        self._evict(keep=session_id)
        if self._size > self._max:
            self.discard(session_id)
        return caught

    def add_messages(self, session_id: str, entry: CachedView, loaded: Mapping[str, Pairs]) -> None:
        """Record groups' messages read at ``entry.key``, within the bound."""
        if not self._current(session_id, entry):
            return
        for group_id, pairs in loaded.items():
            if group_id in entry.messages:
                continue
            entry.messages[group_id] = pairs
            entry.shown[group_id] = tuple(pair[1] for pair in pairs)
            entry.size += len(pairs)
            self._size += len(pairs)
        self._evict(keep=session_id)
        if self._size > self._max:  # this session alone is over the bound
            self.discard(session_id)

    def advance(
        self,
        session_id: str,
        before: Key,
        after: Key,
        touched: Collection[str] | None,
        *,
        rows_touched: bool = False,
    ) -> None:
        """This store wrote ``before`` -> ``after``, changing ``touched`` groups (None: any).

        With ``rows_touched``, only the ``touched`` groups' rows changed (an append): the
        others are kept and those are read again. Otherwise every row is read again.
        When the entry is not at ``before`` (another writer wrote since), it stays at its
        key without the ``touched`` groups' messages, for the next read to catch up
        with when the session's write chain allows (see :meth:`entry`).
        """
        entry = self._entries.get(session_id)
        if entry is None:
            return
        if entry.key != before and touched is not None:
            # another writer wrote since the entry: it stays at its key, less the groups
            # this write touched, for a later read to catch up with (see :meth:`entry`)
            for group_id in [g for g in entry.messages if g in touched]:
                self._drop_group(entry, group_id)
            return
        self.discard(session_id)
        if entry.key != before or touched is None:
            return
        kept = {g: p for g, p in entry.messages.items() if g not in touched}
        shown = {g: entry.shown[g] for g in kept}
        links = {g: v for g, v in entry.links.items() if g in kept}
        size = sum(len(p) for p in kept.values())
        advanced = CachedView(after, messages=kept, shown=shown, links=links, size=size)
        if rows_touched and entry.rows is not None and entry.views is not None:
            advanced.rows, advanced.views = entry.rows, entry.views
            advanced.dirty = entry.dirty | frozenset(touched)
            advanced.rows_at = entry.rows_at
        self._entries[session_id] = advanced
        self._size += size

    def write_appended(
        self,
        session_id: str,
        before: Key,
        after: Key,
        session: Mapping[str, Any],
        added: Sequence[tuple[Mapping[Any, Any], GroupView]],
        excluded: Totals,
    ) -> bool:
        """This store's append wrote ``before`` -> ``after`` and returned the ``session``
        row and the ``added`` groups' rows (with their views), every group it wrote: the
        entry moves to ``after`` with them in place, whole. False, having changed
        nothing, when the entry is not whole at ``before`` or holds one of those groups
        (then :meth:`advance`)."""
        entry = self._entries.get(session_id)
        if (
            entry is None
            or entry.key != before
            or entry.rows is None
            or entry.views is None
            or entry.excluded is None
            or entry.dirty
        ):
            return False
        new = {view.group_id for _, view in added}
        if any(view.group_id in new for view in entry.views) or new & entry.messages.keys():
            return False
        self.discard(session_id)
        rows, views = replaced(entry.rows, entry.views, (), list(added))
        advanced = CachedView(
            after,
            rows=rows,
            views=views,
            excluded=excluded,
            messages=dict(entry.messages),
            shown=dict(entry.shown),
            links=dict(entry.links),
            size=entry.size,
            rows_at=after[1],
            session=session,
        )
        self._entries[session_id] = advanced
        self._size += advanced.size
        return True

    def write_rows(
        self,
        session_id: str,
        before: Key,
        after: Key,
        touched: Collection[str],
        written: Written,
        views: Mapping[str, GroupView],
    ) -> None:
        """This store's compaction wrote ``before`` -> ``after`` and knows the new rows.

        ``written`` holds the row after the write of every group the write loaded or
        inserted (``views``: the view of each active one) and the inserted summaries'
        messages. The entry moves to ``after`` with those rows in place, and without
        the messages of ``touched`` groups (reductions change them); when the entry was
        not complete at ``before``, or a touched group is missing from ``written``, this
        is :meth:`advance`.
        """
        entry = self._entries.get(session_id)
        changed = written.groups
        if (
            entry is None
            or entry.key != before
            or entry.rows is None
            or entry.views is None
            or any(g not in changed for g in touched)
        ):
            self.advance(session_id, before, after, touched, rows_touched=True)
            return
        self.discard(session_id)
        rows, kept = replaced(
            entry.rows, entry.views, changed, [(changed[g], v) for g, v in views.items()]
        )
        # copies of the entry's dicts without the touched groups (and, for the links,
        # the inserted summaries'), then the inserted summaries' messages
        messages, shown, links = dict(entry.messages), dict(entry.shown), dict(entry.links)
        size = entry.size
        for group_id in set(touched):
            size -= len(messages.pop(group_id, ()))
            shown.pop(group_id, None)
            links.pop(group_id, None)
        for group_id, inserted in written.messages.items():
            size += len(inserted) - len(messages.get(group_id, ()))
            messages[group_id] = inserted
            shown[group_id] = tuple(p[1] for p in inserted)
            links.pop(group_id, None)
        dirty = entry.dirty - changed.keys()
        advanced = CachedView(
            after,
            rows=rows,
            views=kept,
            dirty=dirty,
            rows_at=entry.rows_at if dirty else after[1],
            excluded=written.excluded,
            messages=messages,
            shown=shown,
            links=links,
            size=size,
        )
        self._entries[session_id] = advanced
        self._size += advanced.size
        self._evict(keep=session_id)
        if self._size > self._max:
            self.discard(session_id)

    def clear(self) -> None:
        """Forget every session."""
        self._entries.clear()
        self._size = 0

    def discard(self, session_id: str) -> None:
        """Forget the session."""
        entry = self._entries.pop(session_id, None)
        if entry is not None:
            self._size -= entry.size

    def _drop_group(self, entry: CachedView, group_id: str) -> None:
        pairs = entry.messages.pop(group_id)
        del entry.shown[group_id]
        entry.links.pop(group_id, None)
        entry.size -= len(pairs)
        self._size -= len(pairs)

    def _evict(self, *, keep: str) -> None:
        for session_id in list(self._entries):
            if self._size <= self._max:
                return
            if session_id != keep:
                self.discard(session_id)
