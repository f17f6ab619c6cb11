"""``bound_result``: the same text when it fits, a counted notice when not, an error when
not even the notice fits. Counted with the real ``o200k_base`` tokenizer."""

from __future__ import annotations

import json
from typing import Any

import pytest

from strategies import ResultBudgetError, ResultTooLarge, bound_result
from strategies.bounded import compact_dumps, notice_tokens
from strategies.tokenizers import CharacterEstimatorTokenizer, CountingTokenizer, Tokenizer

ROWS = [{"id": i, "title": f"record number {i}", "tags": ["a", "b"]} for i in range(500)]


def test_a_value_that_fits_is_its_compact_json(o200k: Tokenizer) -> None:
    value = ROWS[:3]
    text = bound_result(value, max_tokens=1000)
    assert text == json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    assert o200k.count_tokens(text) <= 1000


def test_a_string_that_fits_is_returned_as_it_is() -> None:
    text = "line one\n  {not json} \t"
    assert bound_result(text, max_tokens=100) is text


def test_the_budget_is_inclusive(o200k: Tokenizer) -> None:
    text = compact_dumps(ROWS[:5])
    tokens = o200k.count_tokens(text)
    assert bound_result(ROWS[:5], max_tokens=tokens) == text
    assert bound_result(ROWS[:5], max_tokens=tokens - 1) != text


def test_an_oversized_result_is_a_valid_notice_within_the_budget(o200k: Tokenizer) -> None:
    full = o200k.count_tokens(compact_dumps(ROWS))
    text = bound_result(ROWS, max_tokens=200)
    assert o200k.count_tokens(text) <= 200
    notice = ResultTooLarge.model_validate_json(text)
    assert json.loads(text) == {"outcome": "ResultTooLarge", "items": [], "message": notice.message}
    assert notice.outcome == "ResultTooLarge" and notice.items == []
    assert str(full) in notice.message and "200" in notice.message
    assert "narrower query" in notice.message
    assert text == compact_dumps(notice)


def test_an_oversized_string_gets_the_notice_too() -> None:
    text = bound_result("word " * 5000, max_tokens=100)
    assert ResultTooLarge.model_validate_json(text).items == []


def test_a_tight_budget_gets_the_short_notice(o200k: Tokenizer) -> None:
    smallest = notice_tokens(o200k)
    text = bound_result(ROWS, max_tokens=smallest)
    assert o200k.count_tokens(text) == smallest
    assert ResultTooLarge.model_validate_json(text).message.startswith("Result too large")


def test_a_budget_below_the_notice_raises_naming_it(o200k: Tokenizer) -> None:
    smallest = notice_tokens(o200k)
    with pytest.raises(ResultBudgetError, match=f"max_tokens={smallest - 1}") as caught:
        bound_result(ROWS, max_tokens=smallest - 1)
    assert isinstance(caught.value, ValueError)
    assert caught.value.budget == smallest - 1 and caught.value.needed == smallest
    assert bound_result(ROWS[:0], max_tokens=1) == "[]"  # what fits still passes


def test_the_empty_string_counts_nothing() -> None:
    assert bound_result("", max_tokens=1, tokenizer=CharacterEstimatorTokenizer()) == ""


def test_the_tokenizer_given_is_the_one_counting() -> None:
    counting = CountingTokenizer(CharacterEstimatorTokenizer())
    text = bound_result("x" * 400, max_tokens=100, tokenizer=counting)
    assert text == "x" * 400
    assert counting.calls == 1 and counting.chars == 400
    over = bound_result("x" * 404, max_tokens=100, tokenizer=counting)
    assert len(over) // 4 <= 100 and json.loads(over)["outcome"] == "ResultTooLarge"


def test_the_default_tokenizer_is_o200k(o200k: Tokenizer) -> None:
    text = compact_dumps(ROWS[:20])
    tokens = o200k.count_tokens(text)
    assert CharacterEstimatorTokenizer().count_tokens(text) != tokens
    assert bound_result(ROWS[:20], max_tokens=tokens) == text
    assert bound_result(ROWS[:20], max_tokens=tokens - 1) != text


@pytest.mark.parametrize(
    ("budget", "error"), [(0, ValueError), (-5, ValueError), (True, TypeError), (2.5, TypeError)]
)
def test_invalid_budgets_are_refused(budget: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match="max_tokens"):
        bound_result("x", max_tokens=budget)


def test_the_notice_model_refuses_items() -> None:
    with pytest.raises(ValueError):
        ResultTooLarge(message="m", items=[1])
    assert ResultTooLarge(message="m").model_dump() == {
        "outcome": "ResultTooLarge",
        "items": [],
        "message": "m",
    }
