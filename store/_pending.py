"""The pending-message token cache: a message is tokenized once, even when it was pending.

:meth:`HistoryStore.context` counts the in-flight messages of a run and keeps the counts
(an LRU keyed by tenant, session and message id, checked against the content hash);
appending those messages afterwards takes the cached count and drops the entry.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from store.models import content_hash
from strategies.messages import Message

__all__ = ["PENDING_CACHE_SIZE", "PendingCounts"]

PENDING_CACHE_SIZE = 4096


@dataclass
class PendingCounts:
    """Cached token counts of pending messages."""

    count: Callable[[Message], int]
    """Counts a message with the store's tokenizer and policy."""
    size: int = PENDING_CACHE_SIZE
    _entries: OrderedDict[tuple[str, str, str], tuple[str, int]] = field(
        default_factory=OrderedDict
    )

    def counter(self, tenant: str, session_id: str, *, keep: bool) -> Callable[[Message], int]:
        """A counter for one session: ``keep`` caches (pending), else consumes (append)."""

        def counted(message: Message) -> int:
            return self.tokens(tenant, session_id, message, keep=keep)

        return counted

    def tokens(self, tenant: str, session_id: str, message: Message, *, keep: bool) -> int:
        """The count of ``message``, from the cache when its content is unchanged."""
        key = (tenant, session_id, message.message_id)
        digest = content_hash(message)
        cached = self._entries.get(key)
        if cached is not None and cached[0] == digest:
            if keep:
                self._entries.move_to_end(key)
            else:
                del self._entries[key]
            return cached[1]
        tokens = self.count(message)
        if keep:
            self._entries[key] = (digest, tokens)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return tokens

    def forget(self, tenant: str, session_id: str) -> None:
        """Drop the entries of one session (when it is deleted)."""
        for key in [k for k in self._entries if k[:2] == (tenant, session_id)]:
            del self._entries[key]
