"""The names and signatures that code outside this repository calls, pinned."""

from __future__ import annotations

import importlib
import inspect
from types import ModuleType

import pytest
from pydantic import BaseModel

import strategies
from strategies.bounded import ToolResultAllowance

CONTRACT = (
    "InvalidCursor",
    "Page",
    "ResultBudgetError",
    "ResultTooLarge",
    "ToolResultAllowance",
    "bound_result",
    "bounded",
    "cap_records",
    "cap_text",
    "paginate",
    "select_fields",
)


@pytest.mark.parametrize("name", CONTRACT)
def test_exported_from_both_places(name: str) -> None:
    module = importlib.import_module("strategies.bounded")
    assert name in strategies.__all__ and name in module.__all__
    assert getattr(strategies, name) is getattr(module, name)


def _shape(function: object) -> list[tuple[str, object, object]]:
    signature = inspect.signature(function)  # type: ignore[arg-type]
    return [(p.name, p.kind, p.default) for p in signature.parameters.values()]


def test_signatures() -> None:
    k, p, e = (
        inspect.Parameter.KEYWORD_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.empty,
    )
    assert _shape(strategies.bound_result) == [
        ("value", p, e),
        ("max_tokens", k, e),
        ("tokenizer", k, None),
    ]
    assert _shape(strategies.bounded) == [
        ("max_tokens", k, e),
        ("tokenizer", k, None),
        ("allowance", k, None),
    ]
    assert _shape(strategies.select_fields) == [("records", p, e), ("fields", p, e)]
    assert _shape(strategies.cap_records) == [("records", p, e), ("limit", p, e)]
    assert _shape(strategies.cap_text) == [
        ("text", p, e),
        ("max_chars", p, e),
        ("marker", k, "…[truncated]"),
    ]
    assert _shape(strategies.paginate) == [
        ("records", p, e),
        ("page_size", k, e),
        ("cursor", k, None),
        ("key", k, None),
    ]
    assert _shape(ToolResultAllowance) == [("total_tokens", p, e), ("policy", k, "first_come")]
    assert _shape(ToolResultAllowance.new_turn) == [("self", p, e), ("expected_calls", k, None)]


def test_types() -> None:
    assert issubclass(strategies.ResultBudgetError, ValueError)
    assert issubclass(strategies.InvalidCursor, ValueError)
    assert issubclass(strategies.ResultTooLarge, BaseModel)
    notice = strategies.ResultTooLarge(message="m")
    assert (notice.outcome, notice.items) == ("ResultTooLarge", [])
    page = strategies.Page(items=[1], has_more=False)
    assert (page.items, page.has_more, page.next_cursor) == ([1], False, None)


def test_the_decorator_shadows_the_module_attribute_not_the_module() -> None:
    """``strategies.bounded`` is the decorator; ``from strategies.bounded import ...`` and
    ``importlib`` still reach the module."""
    module = importlib.import_module("strategies.bounded")
    assert isinstance(module, ModuleType) and module.bounded is strategies.bounded
