"""The strategy contract and what every strategy shares.

A strategy has a ``name``, ``params()`` (JSON: callables by qualified name, nested
strategies by their own params) and ``async plan(view) -> ChangeSet``. It never mutates
its input and is deterministic: the same view gives the same change set, and planning
on the view that change set leaves gives an empty one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from strategies.changeset import ChangeSet
from strategies.errors import ChatledgerError
from strategies.tokenizers import Tokenizer
from strategies.view import View

__all__ = [
    "CompactionStrategy",
    "TokenizerMismatch",
    "callable_name",
    "check_tokenizer",
]

logger = logging.getLogger("chatledger.strategies")


@runtime_checkable
class CompactionStrategy(Protocol):
    """What the store and the provider call."""

    @property
    def name(self) -> str:
        """Short, stable name recorded in audit rows."""
        ...

    def params(self) -> dict[str, Any]:
        """The parameters, JSON-serializable, recorded in audit rows."""
        ...

    async def plan(self, view: View) -> ChangeSet:
        """Decide what to change on ``view``; never mutate it."""
        ...


class TokenizerMismatch(ChatledgerError, ValueError):
    """A strategy was given a tokenizer other than the one the view was counted with."""


def check_tokenizer(strategy: str, tokenizer: Tokenizer | None, view: View) -> None:
    """Raise :class:`TokenizerMismatch` naming both when ``tokenizer`` differs from the view's."""
    if tokenizer is not None and tokenizer.name != view.tokenizer_name:
        raise TokenizerMismatch(
            f"{strategy} was given tokenizer {tokenizer.name!r} but the view was counted "
            f"with {view.tokenizer_name!r}; pass the store's tokenizer or recount the session"
        )


def callable_name(fn: Callable[..., Any]) -> str:
    """A callable's qualified name, for params()."""
    module = getattr(fn, "__module__", None) or "?"
    qualname = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{module}.{qualname}"
