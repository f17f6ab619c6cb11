"""One token allowance shared by the parallel tool calls of a model turn.

Each result of a turn fitting its own budget is not enough: a model that makes five
calls at once gets five results in its next request. A :class:`ToolResultAllowance`
bounds their sum. Every result bounded under it (:meth:`ToolResultAllowance.bound`,
or ``@bounded(..., allowance=...)``) gets a budget that is the smaller of its own
``max_tokens`` and what the allowance grants it, and is charged what it returned
(data or notice), so the results of one turn never add up to more than
``total_tokens``.

What a result is granted depends on the policy:

* ``"first_come"``: what is left, in the order the results are bounded (the order in
  which the calls complete, which under ``asyncio.gather`` is not deterministic). When
  the turn's calls are announced (``new_turn(expected_calls=n)``), room for a
  :class:`~strategies.bounded.results.ResultTooLarge` notice is kept for each call not
  yet answered, so that a late call is always told the allowance is spent.
* ``"fair_share"``: ``total_tokens // n`` to each of the ``n`` calls announced with
  ``new_turn(expected_calls=n)``, whatever the order (a share left unused is not handed
  on, so the outcome does not depend on timing). A call beyond the ``n`` announced gets
  what the others left.

A result that finds too little left gets a ``ResultTooLarge`` saying the allowance is
spent. Counting and charging happen under a lock, so results bounded from worker
threads are safe too.
"""

from __future__ import annotations

import threading
from typing import Final, Literal, get_args

from strategies.bounded.results import (
    ALLOWANCE_SPENT,
    Messages,
    check_int,
    default_tokenizer,
    fit,
    notice,
    own_limit_messages,
)
from strategies.tokenizers import Tokenizer

__all__ = ["POLICIES", "AllowancePolicy", "ToolResultAllowance"]

AllowancePolicy = Literal["first_come", "fair_share"]
"""How a :class:`ToolResultAllowance` divides its tokens among a turn's results."""
POLICIES: Final[tuple[str, ...]] = get_args(AllowancePolicy)


class ToolResultAllowance:
    """A token allowance for the results of one model turn (see the module docstring)."""

    def __init__(self, total_tokens: int, *, policy: AllowancePolicy = "first_come") -> None:
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(POLICIES)}, got {policy!r}")
        self._total = check_int(total_tokens, "total_tokens")
        self._policy: AllowancePolicy = policy
        self._lock = threading.Lock()
        self._spent = 0
        self._answered = 0
        self._expected: int | None = None

    @property
    def total_tokens(self) -> int:
        """The tokens all results of a turn may use together."""
        return self._total

    @property
    def policy(self) -> AllowancePolicy:
        """``"first_come"`` or ``"fair_share"``."""
        return self._policy

    @property
    def spent(self) -> int:
        """The tokens charged in this turn so far."""
        return self._spent

    @property
    def remaining(self) -> int:
        """``total_tokens`` minus what this turn spent."""
        return self._total - self._spent

    @property
    def expected_calls(self) -> int | None:
        """The calls announced for this turn, or None."""
        return self._expected

    @property
    def answered_calls(self) -> int:
        """The results bounded in this turn so far."""
        return self._answered

    def new_turn(self, *, expected_calls: int | None = None) -> None:
        """Start a turn: nothing spent, ``expected_calls`` calls announced.

        ``fair_share`` needs ``expected_calls``; ``first_come`` uses it, when given, to
        keep room for the notices of the calls not answered yet.
        """
        if expected_calls is not None:
            check_int(expected_calls, "expected_calls")
        elif self._policy == "fair_share":
            raise ValueError("a fair_share allowance needs new_turn(expected_calls=n)")
        with self._lock:
            self._spent = 0
            self._answered = 0
            self._expected = expected_calls

    def bound(
        self,
        value: object,
        *,
        max_tokens: int | None = None,
        tokenizer: Tokenizer | None = None,
    ) -> str:
        """Bound ``value`` by ``max_tokens`` (when given) and by this allowance; charge it.

        The same rule as :func:`~strategies.bounded.results.bound_result`, with the
        budget lowered to what the policy grants.

        Raises:
            ResultBudgetError: the budget cannot hold even the notice (too small a
                ``max_tokens``, share or remainder).
            ValueError: a ``fair_share`` allowance was given no ``expected_calls``.
        """
        if max_tokens is not None:
            check_int(max_tokens, "max_tokens")
        counter = tokenizer or default_tokenizer()
        with self._lock:
            room = self._room(counter)
            if max_tokens is not None and max_tokens <= room:
                budget, messages = max_tokens, own_limit_messages(max_tokens)
                what = f"max_tokens={max_tokens}"
            else:
                budget, messages = room, self._turn_messages(room)
                what = f"the {room} tokens left of the turn's allowance of {self._total}"
            try:
                fitted = fit(value, budget, counter, messages, what=what)
            finally:
                self._answered += 1
            self._spent += fitted.tokens
            return fitted.text

    def _room(self, tokenizer: Tokenizer) -> int:
        """What the next result is granted (the lock is held)."""
        remaining = self._total - self._spent
        expected = self._expected
        if self._policy == "fair_share":
            if expected is None:
                raise ValueError("a fair_share allowance needs new_turn(expected_calls=n)")
            if self._answered < expected:
                return min(self._total // expected, remaining)
            return remaining
        others = 0 if expected is None else max(0, expected - self._answered - 1)
        if others == 0:
            return remaining
        reserve = tokenizer.count_tokens(notice(ALLOWANCE_SPENT))
        return max(0, remaining - others * reserve)

    def _turn_messages(self, room: int) -> Messages:
        total, expected = self._total, self._expected
        shared = self._policy == "fair_share" and expected is not None
        if shared and self._answered < (expected or 0):
            limit = f"more than this call's share, {room} of the turn's {total} tokens"
        else:
            limit = f"more than the {room} left of the turn's {total} tokens"
        return (
            lambda tokens: (
                f"The result has {tokens} tokens, {limit} for tool results. Ask again "
                "with a narrower query, fewer fields or fewer calls at once."
            ),
            ALLOWANCE_SPENT,
        )

    def __repr__(self) -> str:
        return (
            f"ToolResultAllowance({self._total}, policy={self._policy!r}, spent={self._spent}, "
            f"answered={self._answered}, expected={self._expected})"
        )
