"""``ToolResultAllowance``: results that fit alone must also fit together.

Parallel calls run under ``asyncio.gather`` (and worker threads); what each call returns
and what the turn spends are checked with the real ``o200k_base`` tokenizer.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from strategies import ResultBudgetError, ResultTooLarge, ToolResultAllowance, bounded
from strategies.bounded import compact_dumps
from strategies.bounded.results import ALLOWANCE_SPENT, notice
from strategies.tokenizers import Tokenizer

ROWS = [{"id": i, "name": f"item {i}", "score": i / 7} for i in range(400)]


def _tokens(texts: list[str], tokenizer: Tokenizer) -> list[int]:
    return [tokenizer.count_tokens(t) for t in texts]


def _is_notice(text: str) -> bool:
    return text.startswith('{"outcome":"ResultTooLarge"')


async def _gather(allowance: ToolResultAllowance, sizes: list[int], delays: list[int]) -> list[str]:
    """Call a bounded async tool once per size; call ``i`` yields ``delays[i]`` times first."""

    @bounded(max_tokens=600, allowance=allowance)
    async def search(size: int, delay: int) -> list[dict[str, object]]:
        for _ in range(delay):
            await asyncio.sleep(0)
        return ROWS[:size]

    return await asyncio.gather(*(search(s, d) for s, d in zip(sizes, delays, strict=True)))


@pytest.mark.parametrize("order", list(itertools.permutations(range(4))))
async def test_first_come_gives_what_is_left_in_completion_order(
    order: tuple[int, ...], o200k: Tokenizer
) -> None:
    one = o200k.count_tokens(compact_dumps(ROWS[:10]))
    spent_notice = o200k.count_tokens(notice(ALLOWANCE_SPENT))
    total = 3 * one + spent_notice + 1  # three results, and room for the fourth's notice
    allowance = ToolResultAllowance(total)
    allowance.new_turn(expected_calls=4)
    results = await _gather(allowance, [10, 10, 10, 10], list(order))
    counts = _tokens(results, o200k)
    assert sum(counts) == allowance.spent <= total
    finished = sorted(range(4), key=lambda i: order[i])
    assert [_is_notice(results[i]) for i in finished] == [False, False, False, True]
    assert json.loads(results[finished[-1]])["message"] == ALLOWANCE_SPENT


async def test_first_come_tells_late_calls_the_allowance_is_spent(o200k: Tokenizer) -> None:
    allowance = ToolResultAllowance(400)
    allowance.new_turn(expected_calls=4)
    results = await _gather(allowance, [10, 10, 10, 10], [0, 1, 2, 3])
    counts = _tokens(results, o200k)
    assert sum(counts) <= 400
    assert results[0] == compact_dumps(ROWS[:10])
    late = [ResultTooLarge.model_validate_json(r) for r in results if _is_notice(r)]
    assert late, results
    assert any("allowance" in n.message or "left of the turn's 400" in n.message for n in late)


async def test_first_come_without_an_announcement_raises_once_nothing_is_left(
    o200k: Tokenizer,
) -> None:
    spent_notice = o200k.count_tokens(notice(ALLOWANCE_SPENT))
    allowance = ToolResultAllowance(spent_notice + 5)  # room for one notice, not two
    text = allowance.bound(ROWS, max_tokens=600, tokenizer=o200k)
    assert _is_notice(text) and o200k.count_tokens(text) <= allowance.total_tokens
    with pytest.raises(ResultBudgetError, match="left of the turn's allowance"):
        allowance.bound(ROWS, max_tokens=600, tokenizer=o200k)
    assert allowance.bound("", tokenizer=o200k) == ""  # what fits still passes


@pytest.mark.parametrize("order", [(0, 1, 2), (2, 1, 0), (1, 2, 0)])
async def test_fair_share_gives_each_call_its_share(
    order: tuple[int, ...], o200k: Tokenizer
) -> None:
    allowance = ToolResultAllowance(900, policy="fair_share")
    allowance.new_turn(expected_calls=3)
    results = await _gather(allowance, [2, 10, 60], list(order))
    counts = _tokens(results, o200k)
    assert all(c <= 300 for c in counts) and sum(counts) <= 900
    assert results[:2] == [compact_dumps(ROWS[:2]), compact_dumps(ROWS[:10])]
    notice_text = ResultTooLarge.model_validate_json(results[2]).message
    assert "this call's share, 300 of the turn's 900 tokens" in notice_text


async def test_fair_share_outcomes_do_not_depend_on_timing() -> None:
    outcomes = set()
    for order in itertools.permutations(range(3)):
        allowance = ToolResultAllowance(900, policy="fair_share")
        allowance.new_turn(expected_calls=3)
        outcomes.add(tuple(await _gather(allowance, [2, 10, 60], list(order))))
    assert len(outcomes) == 1


def test_fair_share_needs_the_calls_announced() -> None:
    allowance = ToolResultAllowance(100, policy="fair_share")
    with pytest.raises(ValueError, match="expected_calls"):
        allowance.bound("x")
    with pytest.raises(ValueError, match="expected_calls"):
        allowance.new_turn()


def test_a_call_beyond_the_announced_gets_what_is_left(o200k: Tokenizer) -> None:
    allowance = ToolResultAllowance(600, policy="fair_share")
    allowance.new_turn(expected_calls=2)
    small = compact_dumps(ROWS[:2])
    assert allowance.bound(ROWS[:2], tokenizer=o200k) == small
    assert allowance.bound(ROWS[:2], tokenizer=o200k) == small
    big = ROWS[:25]  # more than a share of 300, less than what is left
    assert o200k.count_tokens(compact_dumps(big)) > 300
    assert allowance.bound(big, tokenizer=o200k) == compact_dumps(big)
    assert allowance.spent <= 600


def test_new_turn_starts_over() -> None:
    allowance = ToolResultAllowance(100)
    allowance.bound("word " * 50)
    assert allowance.spent > 0 and allowance.answered_calls == 1
    allowance.new_turn(expected_calls=2)
    assert (allowance.spent, allowance.answered_calls, allowance.expected_calls) == (0, 0, 2)
    assert allowance.remaining == 100


def test_the_own_budget_still_applies(o200k: Tokenizer) -> None:
    allowance = ToolResultAllowance(10_000)
    text = allowance.bound(ROWS[:50], max_tokens=100, tokenizer=o200k)
    assert "more than the 100 this tool may return" in json.loads(text)["message"]
    assert allowance.spent == o200k.count_tokens(text)


def test_worker_threads_share_the_allowance(o200k: Tokenizer) -> None:
    allowance = ToolResultAllowance(1000)
    allowance.new_turn(expected_calls=16)

    @bounded(max_tokens=400, allowance=allowance)
    def search(size: int) -> list[dict[str, object]]:
        return ROWS[:size]

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(search, [8] * 16))
    assert sum(_tokens(results, o200k)) <= 1000
    assert allowance.answered_calls == 16


@pytest.mark.parametrize(
    ("total", "policy", "error"),
    [(0, "first_come", ValueError), (10, "random", ValueError), (1.5, "first_come", TypeError)],
)
def test_invalid_allowances_are_refused(total: object, policy: str, error: type[Exception]) -> None:
    with pytest.raises(error):
        ToolResultAllowance(total, policy=policy)  # type: ignore[arg-type]
