"""Run a strategy on a plain list of messages, in memory.

:func:`apply_compaction` is Agent Framework's function of the same name, with one
deliberate difference: the input list is never mutated (Agent Framework's marks and
inserts messages in the list it is given). It returns the projection: the messages to
send, in order.
"""

from __future__ import annotations

from collections.abc import Sequence

from strategies.base import CompactionStrategy
from strategies.messages import Message
from strategies.tokenizers import Tokenizer
from strategies.view import View

__all__ = ["apply_compaction"]


async def apply_compaction(
    messages: Sequence[Message],
    strategy: CompactionStrategy | None,
    *,
    tokenizer: Tokenizer | None = None,
) -> list[Message]:
    """Annotate and count ``messages``, plan ``strategy``, and return the projection.

    Counts are made with ``tokenizer``, else the strategy's own ``tokenizer`` attribute
    when it has one, else the character estimator. With ``strategy=None`` the projection
    of the unchanged messages is returned. ``messages`` is not modified.
    """
    if tokenizer is None:
        own = getattr(strategy, "tokenizer", None)
        if isinstance(own, Tokenizer):
            tokenizer = own
    view = View.from_messages(list(messages), tokenizer)
    if strategy is None:
        return await view.project()
    changes = await strategy.plan(view)
    return await view.apply(changes).project()
