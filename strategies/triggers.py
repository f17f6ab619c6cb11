"""Triggers: composable predicates over a view, deciding when a strategy acts.

``TokensExceed(n)``, ``TokensBelow(n)``, ``MessagesExceed(n)``, ``TurnsExceed(n)``,
``GroupsExceed(n)``, ``HasToolCalls()``, ``All(...)``, ``Any(...)``, and the constants
``Always`` and ``Never``. They read only the view's cached counts, never messages.
Every strategy takes ``trigger=None, target=None``; a target says when to stop and
defaults to "the trigger no longer fires".
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from strategies.view import View

Params = dict[str, typing.Any]

__all__ = [
    "All",
    "Always",
    "Any",
    "GroupsExceed",
    "HasToolCalls",
    "MessagesExceed",
    "Never",
    "Not",
    "TokensBelow",
    "TokensExceed",
    "Trigger",
    "TurnsExceed",
]


@runtime_checkable
class Trigger(Protocol):
    """A predicate over a view."""

    def __call__(self, view: View) -> bool:
        """Whether the condition holds for ``view``."""
        ...

    def params(self) -> Params:
        """JSON description, for audit rows."""
        ...


@dataclass(frozen=True, slots=True)
class TokensExceed:
    """Active tokens above ``n``."""

    n: int

    def __call__(self, view: View) -> bool:
        return view.token_count > self.n

    def params(self) -> Params:
        return {"trigger": "TokensExceed", "n": self.n}


@dataclass(frozen=True, slots=True)
class TokensBelow:
    """Active tokens below ``n`` (a natural target)."""

    n: int

    def __call__(self, view: View) -> bool:
        return view.token_count < self.n

    def params(self) -> Params:
        return {"trigger": "TokensBelow", "n": self.n}


@dataclass(frozen=True, slots=True)
class MessagesExceed:
    """Active messages above ``n``."""

    n: int

    def __call__(self, view: View) -> bool:
        return view.message_count > self.n

    def params(self) -> Params:
        return {"trigger": "MessagesExceed", "n": self.n}


@dataclass(frozen=True, slots=True)
class TurnsExceed:
    """Active user turns above ``n``."""

    n: int

    def __call__(self, view: View) -> bool:
        return view.turn_count > self.n

    def params(self) -> Params:
        return {"trigger": "TurnsExceed", "n": self.n}


@dataclass(frozen=True, slots=True)
class GroupsExceed:
    """Active groups above ``n``."""

    n: int

    def __call__(self, view: View) -> bool:
        return view.group_count > self.n

    def params(self) -> Params:
        return {"trigger": "GroupsExceed", "n": self.n}


@dataclass(frozen=True, slots=True)
class HasToolCalls:
    """At least one active tool-call group."""

    def __call__(self, view: View) -> bool:
        return view.has_tool_calls

    def params(self) -> Params:
        return {"trigger": "HasToolCalls"}


@dataclass(frozen=True, slots=True, init=False)
class All:
    """Every inner trigger fires (true when empty)."""

    triggers: tuple[Trigger, ...]

    def __init__(self, *triggers: Trigger) -> None:
        object.__setattr__(self, "triggers", triggers)

    def __call__(self, view: View) -> bool:
        return all(t(view) for t in self.triggers)

    def params(self) -> Params:
        return {"trigger": "All", "of": [t.params() for t in self.triggers]}


@dataclass(frozen=True, slots=True, init=False)
class Any:
    """At least one inner trigger fires (false when empty)."""

    triggers: tuple[Trigger, ...]

    def __init__(self, *triggers: Trigger) -> None:
        object.__setattr__(self, "triggers", triggers)

    def __call__(self, view: View) -> bool:
        return any(t(view) for t in self.triggers)

    def params(self) -> Params:
        return {"trigger": "Any", "of": [t.params() for t in self.triggers]}


@dataclass(frozen=True, slots=True)
class Not:
    """The inner trigger does not fire."""

    inner: Trigger

    def __call__(self, view: View) -> bool:
        return not self.inner(view)

    def params(self) -> Params:
        return {"trigger": "Not", "of": self.inner.params()}


@dataclass(frozen=True, slots=True)
class _Constant:
    value: bool
    label: str

    def __call__(self, view: View) -> bool:
        return self.value

    def params(self) -> Params:
        return {"trigger": self.label}


Always: Trigger = _Constant(True, "Always")
"""Fires on every view."""
Never: Trigger = _Constant(False, "Never")
"""Never fires."""
