"""Bounding tool results before they enter the history.

A tool result is model input on the next call, and a search that returns hundreds of
rows can cost more context than everything else together. The place to cap it is before
the tool returns; compacting the stored history afterwards
(:class:`~strategies.reduction.ToolResultReductionStrategy`) is the second line.

* :func:`bound_result` and ``@``:func:`bounded`: a result is sent as it is when it fits
  its token budget, else replaced whole by the compact JSON of a
  :class:`ResultTooLarge` notice; :class:`ResultBudgetError` when even that does not
  fit. Never cut at an arbitrary character.
* :class:`ToolResultAllowance`: one allowance for the parallel calls of one model turn,
  ``"first_come"`` or ``"fair_share"``.
* :func:`select_fields`, :func:`cap_records`, :func:`cap_text` and :func:`paginate`
  (with signed cursors, :class:`Page`, :class:`InvalidCursor`): shrink the result where
  the tool still knows what it means.

The modules:

* :mod:`~strategies.bounded.serialization`: the rule that turns a value into the text
  counted and sent (compact JSON; datetimes, decimals and other values; NaN refused);
* :mod:`~strategies.bounded.results`: bounding one result, and the notice;
* :mod:`~strategies.bounded.allowance`: the shared allowance of a turn;
* :mod:`~strategies.bounded.decorator`: ``@bounded``;
* :mod:`~strategies.bounded.query`: the field, record and text helpers;
* :mod:`~strategies.bounded.paging`: pages and their cursors.

docs/bounded_results.md shows them together, and how Agent Framework agents use them.
Names load on first use, so that importing the sub-package costs nothing.
"""

import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:
    from strategies.bounded.allowance import AllowancePolicy, ToolResultAllowance
    from strategies.bounded.decorator import bounded
    from strategies.bounded.paging import InvalidCursor, Page, paginate
    from strategies.bounded.query import cap_records, cap_text, select_fields
    from strategies.bounded.results import (
        ResultBudgetError,
        ResultTooLarge,
        bound_result,
        notice_tokens,
    )
    from strategies.bounded.serialization import compact_dumps, result_text

_HOMES: dict[str, tuple[str, ...]] = {
    "strategies.bounded.allowance": ("AllowancePolicy", "ToolResultAllowance"),
    "strategies.bounded.decorator": ("bounded",),
    "strategies.bounded.paging": ("InvalidCursor", "Page", "paginate"),
    "strategies.bounded.query": ("cap_records", "cap_text", "select_fields"),
    "strategies.bounded.results": (
        "ResultBudgetError",
        "ResultTooLarge",
        "bound_result",
        "notice_tokens",
    ),
    "strategies.bounded.serialization": ("compact_dumps", "result_text"),
}
"""The module each public name is defined in."""
_HOME = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str) -> _typing.Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'strategies.bounded' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "AllowancePolicy",
    "InvalidCursor",
    "Page",
    "ResultBudgetError",
    "ResultTooLarge",
    "ToolResultAllowance",
    "bound_result",
    "bounded",
    "cap_records",
    "cap_text",
    "compact_dumps",
    "notice_tokens",
    "paginate",
    "result_text",
    "select_fields",
]
