"""``@bounded``: the wrapped function keeps what frameworks read and returns bounded text."""

from __future__ import annotations

import asyncio
import inspect
import json
import typing

import pytest
from pydantic import BaseModel

from strategies import ToolResultAllowance, bounded
from strategies.bounded import compact_dumps


class Filters(BaseModel):
    """A parameter type defined in this module (the hints must resolve here)."""

    tag: str | None = None


ROWS = [{"id": i, "tag": "t" if i % 2 else "u"} for i in range(2000)]


@bounded(max_tokens=300)
def search(query: str, filters: Filters | None = None, limit: int = 10) -> list[dict[str, object]]:
    """Search the rows."""
    del query
    rows = [r for r in ROWS if filters is None or filters.tag is None or r["tag"] == filters.tag]
    return rows[:limit]


@bounded(max_tokens=300)
async def asearch(query: str, limit: int = 10) -> list[dict[str, object]]:
    """Search the rows, asynchronously."""
    del query
    await asyncio.sleep(0)
    return ROWS[:limit]


@pytest.mark.parametrize("function", [search, asearch], ids=["sync", "async"])
def test_name_docstring_signature_and_hints_are_kept(function: typing.Any) -> None:
    original = function.__wrapped__
    assert function.__name__ == original.__name__
    assert function.__qualname__ == original.__qualname__
    assert function.__doc__ == original.__doc__
    assert function.__module__ == __name__
    signature = inspect.signature(function)
    assert signature.parameters == inspect.signature(original).parameters
    assert signature.return_annotation is str
    hints = typing.get_type_hints(function)
    assert hints == {**typing.get_type_hints(original), "return": str}
    assert hints["limit"] is int and hints["query"] is str
    assert original.__annotations__["return"] != "str"  # the original is left alone


def test_parameter_types_of_this_module_resolve() -> None:
    assert typing.get_type_hints(search)["filters"] == Filters | None


def test_a_coroutine_function_stays_one() -> None:
    assert inspect.iscoroutinefunction(asearch)
    assert not inspect.iscoroutinefunction(search)


async def test_results_are_bounded_compact_json() -> None:
    assert search("q", limit=2) == compact_dumps(ROWS[:2])
    assert search("q", Filters(tag="t"), limit=1) == '[{"id":1,"tag":"t"}]'
    assert await asearch("q", limit=2) == compact_dumps(ROWS[:2])
    assert json.loads(search("q", limit=2000))["outcome"] == "ResultTooLarge"
    assert json.loads(await asearch("q", limit=2000))["outcome"] == "ResultTooLarge"


def test_exceptions_pass_through() -> None:
    @bounded(max_tokens=50)
    def broken() -> str:
        raise LookupError("no index")

    with pytest.raises(LookupError):
        broken()


def test_calls_are_charged_to_the_allowance() -> None:
    allowance = ToolResultAllowance(200)

    @bounded(max_tokens=150, allowance=allowance)
    def rows(n: int) -> list[dict[str, object]]:
        return ROWS[:n]

    first = rows(5)
    assert first == compact_dumps(ROWS[:5])
    assert allowance.spent > 0 and allowance.answered_calls == 1
    rows(5)
    rows(5)
    assert allowance.spent <= 200 and allowance.answered_calls == 3


def test_the_budget_is_checked_when_decorating() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        bounded(max_tokens=0)
