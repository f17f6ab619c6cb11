"""The pending-message token cache: a message is tokenized once, even when it was pending.

A store's ``context`` counts the in-flight messages of a run and keeps the counts
(an LRU keyed by tenant, session and message id, checked against the content hash);
appending those messages afterwards takes the cached count and drops the entry.

A message a strategy generated (a summary) was counted when it was planned, in
:data:`strategies.view.GENERATED_COUNTS`; storing it takes that count too.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from store.rules.identity import content_hash
from strategies.messages import Message
from strategies.tokenizers import TokenCountPolicy, Tokenizer
from strategies.view import GENERATED_COUNTS

__all__ = ["PENDING_CACHE_SIZE", "PendingCounts"]

PENDING_CACHE_SIZE = 4096


@dataclass
class PendingCounts:
    """Cached token counts of pending messages."""

    count: Callable[[Message], int]
    """Counts a message with the store's tokenizer and policy."""
    counting: Callable[[], tuple[Tokenizer, TokenCountPolicy]] | None = None
    """The tokenizer and policy ``count`` uses, asked for only when a generated
    message's count may be reused (so that building the cache loads no tokenizer)."""
    size: int = PENDING_CACHE_SIZE
    _entries: OrderedDict[tuple[str, str, str], tuple[str, int]] = field(
        default_factory=OrderedDict
    )

    def _generated(self, message: Message) -> int | None:
        if self.counting is None:
            return None
        tokenizer, policy = self.counting()
        return GENERATED_COUNTS.get(message, tokenizer, policy)

    def _count(self, message: Message) -> int:
        generated = self._generated(message)
        return generated if generated is not None else self.count(message)

    def counter(self, tenant: str, session_id: str, *, keep: bool) -> Callable[[Message], int]:
        """A counter for one session: ``keep`` caches (pending), else consumes (append).

        Consuming with nothing cached (a bulk import) counts straight away.
        """
        entries, count = self._entries, self._count

        def counted(message: Message) -> int:
            if not keep and not entries:
                return count(message)
            return self.tokens(tenant, session_id, message, keep=keep)

        return counted

    def holds(self, tenant: str, session_id: str, message: Message) -> bool:
        """Whether a count of ``message`` is kept (it may still be stale: :meth:`tokens`
        checks it against the content)."""
        if (tenant, session_id, message.message_id) in self._entries:
            return True
        return self._generated(message) is not None

    def tokens(self, tenant: str, session_id: str, message: Message, *, keep: bool) -> int:
        """The count of ``message``, from the cache when its content is unchanged.

        The content hash is computed only when it is needed: to keep an entry, or to
        check one (an append of messages never seen pending hashes nothing here).
        """
        key = (tenant, session_id, message.message_id)
        cached = self._entries.get(key)
        digest = content_hash(message) if keep or cached is not None else ""
        if cached is not None and cached[0] == digest:
            if keep:
                self._entries.move_to_end(key)
            else:
                del self._entries[key]
            return cached[1]
        tokens = self._count(message)
        if keep:
            self._entries[key] = (digest, tokens)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return tokens

    def forget(self, tenant: str, session_id: str) -> None:
        """Drop the entries of one session (when it is deleted)."""
        for key in [k for k in self._entries if k[:2] == (tenant, session_id)]:
            del self._entries[key]
