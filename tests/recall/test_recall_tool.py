"""The recall tool on a store that searches: the excluded messages first, pages without
duplicates, never above the budget, refusals as text."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store.contract import HistoryBackend
from store.errors import InvalidInput
from store.integrations.recall import Recall
from store.memory import InMemoryHistoryStore, MemoryDatabase
from store.search.recall import (
    RECALL_KEY,
    RecallCursor,
    encode_recall_cursor,
    is_recall_result,
    quoted_ids,
)
from strategies.bounded import notice_tokens
from strategies.messages import Message
from strategies.tokenizers import TiktokenTokenizer, Tokenizer

NOTES = 24
KEEP = 10


def _messages(notes: int = NOTES, *, filler: int = 6) -> list[Message]:
    out: list[Message] = []
    for i in range(notes):
        words = " ".join(f"w{i}x{j}" for j in range(filler))
        out.append(Message.text_message("user", f"note {i}: the apricot code is {i * 7}. {words}"))
        out.append(Message.text_message("assistant", f"noted {i}"))
    return out


async def _session(store: HistoryBackend, session_id: str = "s", notes: int = NOTES) -> None:
    await store.append(session_id, _messages(notes))
    event = await store.compact(session_id, f"sliding-window:keep_last_groups={KEEP}")
    assert event is not None


async def _pages(recall: Recall, query: str, session_id: str = "s") -> list[dict[str, Any]]:
    pages: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        text = await recall(session_id, query, cursor)
        page = json.loads(text)
        pages.append(page)
        cursor = page.get("next_cursor")
        if cursor is None:
            return pages
        assert len(pages) < 200, "the recall does not make progress"


async def _excluded_ids(store: HistoryBackend, session_id: str = "s") -> set[str]:
    stored = await store.history(session_id, include_excluded=True)
    return {m.message.message_id for m in stored if m.excluded}


async def test_pages_hold_every_match_once_excluded_first(recall_store: HistoryBackend) -> None:
    await _session(recall_store)
    pages = await _pages(Recall(recall_store, max_tokens=400), "apricot")
    quoted = [q for page in pages for q in page[RECALL_KEY]["quotes"]]
    assert len(quoted) == len(set(quoted)) == NOTES
    excluded = await _excluded_ids(recall_store)
    flags = [q in excluded for q in quoted]
    assert flags == sorted(flags, reverse=True), "an included hit came before an excluded one"
    assert 0 < sum(flags) < NOTES
    hits = [hit for page in pages for hit in page["hits"]]
    assert [("excluded" in h) for h in hits] == flags
    assert len(pages) > 1


async def test_an_excluded_hit_says_when_why_and_by_which_event(
    recall_store: HistoryBackend,
) -> None:
    await _session(recall_store)
    [page] = await _pages(Recall(recall_store), "apricot 0")
    [hit] = page["hits"]
    why = await recall_store.why("s", page[RECALL_KEY]["quotes"][0])
    assert not why.in_context and why.event_id is not None
    [group] = [g for g in await recall_store.excluded("s") if g.group_id == why.group_id]
    assert hit["text"].startswith("note 0: the apricot code is 0.")
    assert hit["excluded"] == {"by": why.event_id, "reason": why.reason}
    assert group.excluded_at is not None
    when = group.excluded_at.isoformat(timespec="seconds").replace("+00:00", "Z")
    assert page["excluded_at"] == {why.event_id: when}
    assert "next_cursor" not in page


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    budget=st.integers(min_value=0, max_value=900),
    notes=st.integers(min_value=1, max_value=30),
    filler=st.integers(min_value=0, max_value=80),
)
async def test_a_result_never_exceeds_its_budget(budget: int, notes: int, filler: int) -> None:
    tokenizer = TiktokenTokenizer("o200k_base")
    store = InMemoryHistoryStore(MemoryDatabase(), tokenizer=tokenizer)
    await store.append("s", _messages(notes, filler=filler))
    await store.compact("s", "sliding-window:keep_last_groups=4")
    max_tokens = notice_tokens(tokenizer) + budget
    recall = Recall(store, max_tokens=max_tokens)
    cursor: str | None = None
    seen: list[str] = []
    for _ in range(notes + 1):
        text = await recall("s", "apricot", cursor)
        assert tokenizer.count_tokens(text) <= max_tokens
        if not is_recall_result(text):
            assert json.loads(text)["outcome"] == "ResultTooLarge"
            return
        seen.extend(quoted_ids(text))
        cursor = json.loads(text).get("next_cursor")
        if cursor is None:
            break
    assert cursor is None, "a page held no hit"
    assert sorted(seen) == sorted(set(seen)) and len(seen) == notes


async def test_the_default_budget_is_1500_tokens_of_the_stores_tokenizer(
    recall_store: HistoryBackend, tokenizer: Tokenizer
) -> None:
    await _session(recall_store, notes=80)
    text = await Recall(recall_store)("s", "apricot")
    assert 1_000 < tokenizer.count_tokens(text) <= 1_500
    assert json.loads(text)["next_cursor"]


@pytest.mark.parametrize(
    ("query", "cursor"),
    [
        ("apri(cot", None),
        ("", None),
        ("apricot", "garbage"),
        ("apricot", "x1.eyJhIjoxfQ.AAAA"),
        ("apricot", "r1~0000000000000000"),
    ],
)
async def test_a_bad_query_or_cursor_is_a_short_text_for_the_model(
    recall_store: HistoryBackend, query: str, cursor: str | None
) -> None:
    await _session(recall_store)
    text = await Recall(recall_store)("s", query, cursor)
    assert text.startswith("recall refused: ")
    assert "\n" not in text and len(text) < 300
    assert not is_recall_result(text)


async def test_a_cursor_is_bound_to_its_query(recall_store: HistoryBackend) -> None:
    await _session(recall_store)
    recall = Recall(recall_store, max_tokens=300)
    first = json.loads(await recall("s", "apricot"))
    text = await recall("s", "code", first["next_cursor"])
    assert text.startswith("recall refused: ")
    assert "another search" in text


async def test_a_cursor_stays_valid_in_another_process(
    recall_store: HistoryBackend, second_store: HistoryBackend
) -> None:
    await _session(recall_store)
    first = json.loads(await Recall(recall_store, max_tokens=300)("s", "apricot"))
    cursor = first["next_cursor"]
    second = json.loads(await Recall(second_store, max_tokens=300)("s", "apricot", cursor))
    assert second["hits"]
    assert not set(first[RECALL_KEY]["quotes"]) & set(second[RECALL_KEY]["quotes"])


async def test_the_rest_starts_where_the_excluded_messages_end(
    recall_store: HistoryBackend,
) -> None:
    await _session(recall_store)
    start = encode_recall_cursor(RecallCursor("rest"), "apricot")
    pages = await _pages_from(Recall(recall_store), "apricot", start)
    quoted = [q for page in pages for q in page[RECALL_KEY]["quotes"]]
    excluded = await _excluded_ids(recall_store)
    assert quoted and not set(quoted) & excluded


async def _pages_from(recall: Recall, query: str, cursor: str) -> list[dict[str, Any]]:
    pages = [json.loads(await recall("s", query, cursor))]
    while pages[-1].get("next_cursor"):
        pages.append(json.loads(await recall("s", query, pages[-1]["next_cursor"])))
    return pages


async def test_a_session_without_matches_or_messages_gives_no_hits(
    recall_store: HistoryBackend,
) -> None:
    await _session(recall_store)
    for session_id, query in (("s", "durian"), ("nobody", "apricot")):
        page = json.loads(await Recall(recall_store)(session_id, query))
        assert page == {RECALL_KEY: {"quotes": []}, "hits": []}


async def test_another_tenant_finds_nothing(
    recall_store: HistoryBackend, other_tenant_store: HistoryBackend
) -> None:
    await _session(recall_store)
    page = json.loads(await Recall(other_tenant_store)("s", "apricot"))
    assert page["hits"] == []


def test_a_budget_below_the_notice_is_refused(tokenizer: Tokenizer) -> None:
    store = InMemoryHistoryStore(MemoryDatabase(), tokenizer=tokenizer)
    with pytest.raises(InvalidInput, match="ResultTooLarge"):
        Recall(store, max_tokens=notice_tokens(tokenizer) - 1, tokenizer=tokenizer)
    with pytest.raises(ValueError, match="max_chars"):
        Recall(store, max_chars=3)


async def test_a_hit_too_long_for_a_small_budget_is_shortened(
    recall_store: HistoryBackend, tokenizer: Tokenizer
) -> None:
    await recall_store.append("s", _messages(3, filler=120))
    shortened = 0
    for budget in range(120, 320, 20):
        text = await Recall(recall_store, max_tokens=budget)("s", "apricot")
        assert tokenizer.count_tokens(text) <= budget
        if is_recall_result(text):
            [*_, last] = json.loads(text)["hits"]
            shortened += last["text"].endswith("…") and len(last["text"]) < 200
    assert shortened
