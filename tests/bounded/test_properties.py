"""Properties, over random nested values and budgets, with the real ``o200k_base`` tokenizer:
what is returned never exceeds the budget, a notice is valid JSON, what fits is unchanged,
a turn never spends more than its allowance, and paging loses and repeats nothing."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strategies import (
    ResultBudgetError,
    ResultTooLarge,
    ToolResultAllowance,
    bound_result,
    bounded,
    paginate,
)
from strategies.bounded import compact_dumps, notice_tokens
from strategies.tokenizers import TiktokenTokenizer

TOKENIZER = TiktokenTokenizer("o200k_base")
SMALLEST = notice_tokens(TOKENIZER)
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
)
values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=8) | st.dictionaries(st.text(max_size=10), children, max_size=8)
    ),
    max_leaves=120,
)
budgets = st.integers(min_value=1, max_value=400)


@SETTINGS
@given(value=values | st.text(max_size=600), budget=budgets)
def test_the_result_never_exceeds_the_budget(value: Any, budget: int) -> None:
    try:
        text = bound_result(value, max_tokens=budget, tokenizer=TOKENIZER)
    except ResultBudgetError as error:
        assert budget < SMALLEST and error.budget == budget
        return
    assert (TOKENIZER.count_tokens(text) if text else 0) <= budget
    full = value if isinstance(value, str) else compact_dumps(value)
    fits = not full or TOKENIZER.count_tokens(full) <= budget
    if fits:
        assert text == full
    else:
        assert ResultTooLarge.model_validate_json(text).items == []
    if not isinstance(value, str):
        json.loads(text)  # valid JSON either way


@SETTINGS
@given(value=values, budget=st.integers(min_value=SMALLEST, max_value=400))
def test_a_budget_that_holds_the_notice_never_raises(value: Any, budget: int) -> None:
    text = bound_result(value, max_tokens=budget, tokenizer=TOKENIZER)
    assert TOKENIZER.count_tokens(text) <= budget


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    results=st.lists(values, min_size=1, max_size=6),
    delays=st.lists(st.integers(min_value=0, max_value=5), min_size=6, max_size=6),
    total=st.integers(min_value=1, max_value=600),
    max_tokens=st.integers(min_value=1, max_value=300),
    policy=st.sampled_from(["first_come", "fair_share"]),
)
def test_a_turn_never_spends_more_than_its_allowance(
    results: list[Any], delays: list[int], total: int, max_tokens: int, policy: Any
) -> None:
    allowance = ToolResultAllowance(total, policy=policy)
    allowance.new_turn(expected_calls=len(results))

    @bounded(max_tokens=max_tokens, tokenizer=TOKENIZER, allowance=allowance)
    async def tool(index: int) -> Any:
        for _ in range(delays[index]):
            await asyncio.sleep(0)
        return results[index]

    async def turn() -> list[str | BaseException]:
        calls = (tool(i) for i in range(len(results)))
        return await asyncio.gather(*calls, return_exceptions=True)

    outcomes = asyncio.run(turn())
    texts = [o for o in outcomes if isinstance(o, str)]
    assert all(isinstance(o, str | ResultBudgetError) for o in outcomes)
    counts = [TOKENIZER.count_tokens(t) if t else 0 for t in texts]
    assert sum(counts) <= total
    assert all(c <= max_tokens for c in counts)
    if policy == "fair_share":
        assert all(c <= total // len(results) for c in counts)
    if total >= len(results) * (SMALLEST + 30) and max_tokens >= SMALLEST:
        assert len(texts) == len(results)  # with room for every notice, nobody fails


@SETTINGS
@given(records=st.lists(values, max_size=40), page_size=st.integers(min_value=1, max_value=12))
def test_paging_loses_and_repeats_nothing(records: list[Any], page_size: int) -> None:
    seen: list[Any] = []
    page = paginate(records, page_size=page_size)
    seen.extend(page.items)
    while page.has_more:
        page = paginate(records, page_size=page_size, cursor=page.next_cursor)
        seen.extend(page.items)
    assert seen == records
