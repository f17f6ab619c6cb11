"""``@bounded``: a tool function whose return value is bounded before anyone sees it.

The wrapped function keeps its name, docstring, signature and parameter annotations
(agent frameworks build the tool's schema from them); its return annotation becomes
``str``, which is what it now returns. Plain and ``async`` functions are both
supported, and an ``async`` function stays a coroutine function.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, Protocol, cast, overload

from strategies.bounded.allowance import ToolResultAllowance
from strategies.bounded.results import bound_result, check_int
from strategies.tokenizers import Tokenizer

__all__ = ["BoundedDecorator", "bounded"]

P = ParamSpec("P")


class BoundedDecorator(Protocol):
    """What :func:`bounded` returns: turns a function into its bounded twin."""

    @overload
    def __call__(  # type: ignore[overload-overlap]  # a coroutine function is a callable too
        self, function: Callable[P, Coroutine[Any, Any, object]], /
    ) -> Callable[P, Coroutine[Any, Any, str]]: ...

    @overload
    def __call__(self, function: Callable[P, object], /) -> Callable[P, str]: ...


def _as_bounded(function: Callable[..., Any], wrapper: Callable[..., Any]) -> None:
    """Give ``wrapper`` the identity of ``function``, with ``str`` as its return type."""
    functools.update_wrapper(wrapper, function)
    signature = inspect.signature(function)
    wrapper.__signature__ = signature.replace(return_annotation=str)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {**getattr(function, "__annotations__", {}), "return": str}


def bounded(
    *,
    max_tokens: int,
    tokenizer: Tokenizer | None = None,
    allowance: ToolResultAllowance | None = None,
) -> BoundedDecorator:
    """Bound what the decorated function returns, as :func:`bound_result` does.

    With ``allowance``, every call is also charged to that shared allowance and is
    granted at most what it leaves (see :class:`ToolResultAllowance`); call
    ``allowance.new_turn(...)`` before each batch of parallel calls.
    """
    check_int(max_tokens, "max_tokens")

    def bound(value: object) -> str:
        if allowance is None:
            return bound_result(value, max_tokens=max_tokens, tokenizer=tokenizer)
        return allowance.bound(value, max_tokens=max_tokens, tokenizer=tokenizer)

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        if inspect.iscoroutinefunction(function):

            async def async_wrapper(*args: Any, **kwargs: Any) -> str:
                return bound(await function(*args, **kwargs))

            _as_bounded(function, async_wrapper)
            return async_wrapper

        def wrapper(*args: Any, **kwargs: Any) -> str:
            return bound(function(*args, **kwargs))

        _as_bounded(function, wrapper)
        return wrapper

    return cast(BoundedDecorator, decorate)
