"""Bounding one tool result: :func:`bound_result`, its notice and its error.

A result is counted as the very text the model will read (:func:`result_text`). When it
fits the budget it is returned as it is; otherwise it is replaced, whole, by the compact
JSON of a :class:`ResultTooLarge` notice, itself counted. Nothing is ever cut at an
arbitrary character: a tool that wants partial results returns a smaller page (see
:func:`~strategies.bounded.paging.paginate` and the helpers of
:mod:`~strategies.bounded.query`). When even the notice does not fit, the budget is a
configuration error and :class:`ResultBudgetError` says so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from strategies.bounded.serialization import compact_dumps, result_text
from strategies.errors import ChatledgerError
from strategies.tokenizers import TiktokenTokenizer, Tokenizer

__all__ = ["ResultBudgetError", "ResultTooLarge", "bound_result", "notice_tokens"]

OWN_LIMIT_SHORT = (
    "Result too large for this tool. Ask again with a narrower query or fewer details."
)
"""The notice's message when the detailed one does not fit the tool's own budget."""
ALLOWANCE_SPENT = (
    "This turn's tool results have used up their token allowance. Ask again with fewer "
    "calls at once or narrower queries."
)
"""The notice's message when the turn's shared allowance leaves too little for a result."""


class ResultTooLarge(BaseModel):
    """What a tool returns instead of a result that does not fit its budget.

    Its compact JSON is ``{"outcome":"ResultTooLarge","items":[],"message":"..."}``: the
    same ``items`` key as a :class:`~strategies.bounded.paging.Page`, always empty (no
    partial page, no cursor), and a message telling the model how to ask again.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    outcome: Literal["ResultTooLarge"] = "ResultTooLarge"
    """Always ``"ResultTooLarge"``: lets the model (and code) tell the notice from data."""
    items: list[Any] = Field(default_factory=list, max_length=0)
    """Always empty: none of the result is sent."""
    message: str
    """Why the result was withheld and what to ask instead (a narrower query, fewer details)."""


class ResultBudgetError(ChatledgerError, ValueError):
    """The budget cannot hold even the :class:`ResultTooLarge` notice."""

    def __init__(self, message: str, *, budget: int, needed: int) -> None:
        super().__init__(message)
        self.budget = budget
        """The tokens the result was allowed."""
        self.needed = needed
        """The tokens of the smallest notice."""


@cache
def default_tokenizer() -> Tokenizer:
    """The tokenizer used when none is given: one ``TiktokenTokenizer("o200k_base")``."""
    return TiktokenTokenizer("o200k_base")


def check_int(value: object, name: str, *, minimum: int = 1) -> int:
    """``value`` if it is an ``int`` of at least ``minimum`` (never a ``bool``), else raise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be {minimum} or more, got {value}")
    return value


def notice(message: str) -> str:
    """The compact JSON of a :class:`ResultTooLarge` with ``message``."""
    return compact_dumps(ResultTooLarge(message=message))


@dataclass(frozen=True, slots=True)
class Fitted:
    """A bounded result and its count (what an allowance charges)."""

    text: str
    tokens: int


Messages = Sequence[str | Callable[[int], str]]
"""Notice messages to try in order, each fixed or built from the result's token count."""


def fit(
    value: object, budget: int, tokenizer: Tokenizer, messages: Messages, *, what: str
) -> Fitted:
    """``value``'s text if it fits ``budget`` tokens, else the first notice of ``messages``
    that does; :class:`ResultBudgetError` (naming ``what``, the budget) when none does."""
    text = result_text(value)
    tokens = tokenizer.count_tokens(text) if text else 0
    if tokens <= budget:
        return Fitted(text, tokens)
    needed = 0
    for message in messages:
        replacement = notice(message(tokens) if callable(message) else message)
        needed = tokenizer.count_tokens(replacement)
        if needed <= budget:
            return Fitted(replacement, needed)
    raise ResultBudgetError(
        f"{what} cannot hold even the ResultTooLarge notice ({needed} tokens with "
        f"{tokenizer.name}); raise the budget",
        budget=budget,
        needed=needed,
    )


def own_limit_messages(max_tokens: int) -> Messages:
    """The notice messages for a result over the tool's own ``max_tokens``."""
    return (
        lambda tokens: (
            f"The result has {tokens} tokens, more than the {max_tokens} this tool may "
            "return. Ask again with a narrower query, fewer fields or a smaller page."
        ),
        OWN_LIMIT_SHORT,
    )


def notice_tokens(tokenizer: Tokenizer | None = None) -> int:
    """The tokens of the shortest notice: the smallest ``max_tokens`` that never raises
    :class:`ResultBudgetError` in :func:`bound_result`."""
    return (tokenizer or default_tokenizer()).count_tokens(notice(OWN_LIMIT_SHORT))


def bound_result(value: object, *, max_tokens: int, tokenizer: Tokenizer | None = None) -> str:
    """``value`` as the text the model reads, if it fits ``max_tokens``; else a notice.

    A ``str`` is taken as it is, anything else is serialized as compact JSON (the rule
    is in :mod:`strategies.bounded.serialization`). That text is counted with
    ``tokenizer`` (default ``TiktokenTokenizer("o200k_base")``) and returned when it
    has at most ``max_tokens`` tokens. Otherwise the compact JSON of a
    :class:`ResultTooLarge` is returned, and it fits ``max_tokens`` too.

    Raises:
        ResultBudgetError: ``max_tokens`` cannot hold even the notice.
        ValueError, TypeError: the value has no JSON form (NaN, unknown types).
    """
    budget = check_int(max_tokens, "max_tokens")
    counter = tokenizer or default_tokenizer()
    what = f"max_tokens={budget}"
    return fit(value, budget, counter, own_limit_messages(budget), what=what).text
