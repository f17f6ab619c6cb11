"""Forks in an import: which reads pass two makes forks of their parents again.

A session of chatledger's ``jsonl`` may say it is a fork (its
:class:`~store.importing.source.ForkOrigin`). After pass one, such a read of a session
the store does not hold yet is made a fork again (a
:class:`~store.importing.ledger.Refork`) when its parent is imported too, or stored
already, and the parent's conversation up to the fork message is the read's, message for
message (the same ids with the same content): pass two then forks the parent there and
appends only the read's own messages, so that the fork shares its parent's rows.
Otherwise the read is imported as a root with its whole conversation, and the report
says why in one warning line.

To compare the two, the sources that hold such reads or their parents are read once
more, each conversation hashed message by message up to the fork messages wanted of it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from store.contract import HistoryBackend
from store.errors import SessionNotFound
from store.importing.ledger import Ledger, Refork
from store.importing.reads import Plan, chunks, identified
from store.importing.source import ForkOrigin
from store.rules.identity import content_hash
from strategies.messages import Message

__all__ = ["Lineage"]


class _Prefix:
    """A conversation hashed message by message (ids and content), in order."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()
        self.position = 0

    def add(self, message: Message) -> str:
        """Take the next message; the hash of the conversation up to it, it included."""
        self._hash.update(f"{message.message_id}\x00{content_hash(message)}\n".encode())
        self.position += 1
        return self._hash.hexdigest()


class Lineage:
    """The forks among the reads of ``ledger``: pass one's last step."""

    def __init__(
        self,
        store: HistoryBackend,
        plans: list[Plan],
        ledger: Ledger,
        *,
        prefix: Callable[[Plan], str],
        table: str | None,
    ) -> None:
        self.store = store
        self.plans = plans
        self.ledger = ledger
        self.prefix = prefix
        self.table = table
        self._said: set[str] = set()
        """The sessions a warning was given for (once a session)."""

    async def run(self, failed: set[str]) -> None:
        """Decide every read that says it is a fork (``failed``: the sources not read to
        their end)."""
        candidates = await self._candidates()
        if not candidates:
            return
        wanted: dict[str, set[str]] = {}
        for origin in candidates.values():
            if origin.fork_message_id is not None:
                wanted.setdefault(origin.parent_session_id, set()).add(origin.fork_message_id)
        imported = set(self.ledger.imported())
        forks, parents = self._hash_reads(candidates, wanted, imported, failed)
        for read, origin in candidates.items():
            at = origin.fork_message_id
            if at is None:
                continue
            if read not in forks:
                self._root(read, origin, f", but its fork message {at!r} is not among its messages")
                continue
            digest, cut = forks[read]
            parent = origin.parent_session_id
            if parent in imported:
                theirs = parents.get((parent, at))
            elif await self._exists(parent):
                theirs = await self._stored_prefix(parent, at)
            else:
                self._root(read, origin, " which is neither imported nor stored")
                continue
            if theirs != digest:
                self._root(read, origin, f" whose conversation up to {at!r} is not the fork's")
                continue
            self.ledger.forks[read] = Refork(parent, at, cut)
        self._order()

    async def _candidates(self) -> dict[int, ForkOrigin]:
        """The accepted reads that say they are forks, of sessions the store does not
        have yet (a session it has is read on as it is, a fork or not); those that
        cannot be made forks are imported as roots, said in a warning."""
        found: dict[int, ForkOrigin] = {}
        for read, origin in self.ledger.origins.items():
            session_id = self.ledger.session_of(read)
            if session_id is None or not self.ledger.accepted(read):
                continue
            stored = await self._stored_parent(session_id)
            if stored is not None:
                if stored != origin.parent_session_id and self.ledger.row(read).new:
                    self._root(read, origin, ", but the store holds it already, not as that fork")
                continue
            if session_id in self.ledger.recurring:
                self._root(read, origin, ", read more than once in this import")
            elif origin.parent_session_id == session_id:
                self._root(read, origin, ", its own parent")
            elif origin.fork_message_id is None:
                self._root(
                    read, origin, f", forked when {origin.parent_session_id!r} held no message"
                )
            else:
                found[read] = origin
        return found

    def _hash_reads(
        self,
        candidates: dict[int, ForkOrigin],
        wanted: dict[str, set[str]],
        imported: set[str],
        failed: set[str],
    ) -> tuple[dict[int, tuple[str, int]], dict[tuple[str, str], str]]:
        """Read the sources again: each candidate's hash up to its fork message, with the
        message's position in the read; and each imported parent's hash up to each fork
        message wanted of it (from the first read that holds it)."""
        forks: dict[int, tuple[str, int]] = {}
        parents: dict[tuple[str, str], str] = {}
        for plan in self.plans:
            if plan.source in failed:
                continue
            hashed: _Prefix | None = None
            reading = chunks(plan, self.prefix(plan), self.table)
            try:
                for chunk in reading:
                    read = chunk.read
                    session_id = self.ledger.session_of(read)
                    if session_id is None or not self.ledger.accepted(read):
                        continue
                    is_fork = read in candidates
                    targets = wanted.get(session_id, set()) if session_id in imported else set()
                    if not is_fork and not targets:
                        continue
                    if chunk.begins or hashed is None:
                        hashed = _Prefix()
                    legacy = read in self.ledger.legacy
                    for located in identified(plan.fmt, chunk, session_id, legacy=legacy):
                        message = located.message
                        digest = hashed.add(message)
                        if message.message_id in targets:
                            parents.setdefault((session_id, message.message_id), digest)
                        at = candidates[read].fork_message_id if is_fork else None
                        if message.message_id == at and read not in forks:
                            forks[read] = (digest, hashed.position - 1)
            finally:
                reading.close()
        return forks, parents

    async def _stored_parent(self, session_id: str) -> str | None:
        """The parent of the stored session (``""`` for a root); None: not stored."""
        try:
            info = await self.store.session(session_id)
        except SessionNotFound:
            return None
        return info.parent_session_id or ""

    async def _exists(self, session_id: str) -> bool:
        try:
            await self.store.session(session_id)
        except SessionNotFound:
            return False
        return True

    async def _stored_prefix(self, session_id: str, at: str) -> str | None:
        """The hash of the stored session's conversation up to ``at`` (None: it holds no
        ``at``)."""
        hashed = _Prefix()
        async for row in self.store.aiter_history(session_id, include_excluded=True):
            digest = hashed.add(row.message)
            if row.message.message_id == at:
                return digest
        return None

    def _order(self) -> None:
        """Give each fork its level (its parent written before it); forks that are
        their own ancestors are imported as roots."""
        forks = self.ledger.forks
        by_session = {self.ledger.session_of(read): read for read in forks}
        pending = dict(forks)
        level = 0
        while pending:
            ready = [
                read
                for read, fork in pending.items()
                if by_session.get(fork.parent_session_id) not in pending
            ]
            if not ready:
                for read in pending:
                    del forks[read]
                    self._root(read, self.ledger.origins[read], ", in a circle of forks")
                return
            for read in ready:
                fork = pending.pop(read)
                forks[read] = Refork(fork.parent_session_id, fork.fork_message_id, fork.cut, level)
            level += 1

    def _root(self, read: int, origin: ForkOrigin, why: str) -> None:
        session_id = self.ledger.session_of(read) or ""
        if session_id in self._said:
            return
        self._said.add(session_id)
        source = self.ledger.source_of(self.plans, read)
        self.ledger.warnings.append(
            f"{source}: session {session_id!r} is a fork of "
            f"{origin.parent_session_id!r}{why}: imported as a root, with its whole "
            "conversation"
        )
