"""Search (``docs/search.md``), on every backend: what matches, ranking, scoping, the
excluded filters, paging, the query language's refusals, branches, and erasure (no hit
after a redaction or a purge; on SQLite, no bytes of the erased words in the files)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from store.contract import HistoryBackend
from store.errors import InvalidInput, SessionNotFound
from store.search import normalize
from strategies import SummarizationStrategy
from strategies.messages import FunctionCallContent
from strategies.summarizers import FakeSummarizer
from tests.conformance.conftest import Stores
from tests.conformance.toy_strategies import ExcludeOldest, ReduceResults
from tests.conftest import ALL_BACKENDS
from tests.groups.conversations import assistant, call, reasoning, result, tool, user


@pytest.fixture(params=ALL_BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The backends without encryption: an encrypted tenant keeps nothing searchable
    (its refusal is tested in ``tests/encryption/``)."""
    return str(request.param)


def _ids(page: object) -> list[tuple[str, str]]:
    return [(h.session_id, h.message_id) for h in page.hits]  # type: ignore[attr-defined]


@pytest.fixture
async def chats(store: HistoryBackend) -> HistoryBackend:
    await store.append(
        "trip",
        [
            user("u1", "What is the météo in Paris tomorrow?"),
            assistant(
                "a1",
                FunctionCallContent(
                    call_id="c1", name="weather_lookup", arguments='{"city": "Paris"}'
                ),
            ),
            tool("t1", result("c1", "Sunny, 21 degrees in Paris")),
            assistant("a2", "It will be sunny in Paris."),
            user("u2", "今日は東京の天気はどうですか"),
            assistant("a3", reasoning("the user asks about Tokyo weather"), "東京は晴れです"),
        ],
    )
    await store.append(
        "other",
        [
            user("o1", "Paris Paris Paris, a city of lights"),
            assistant("o2", "Lights everywhere"),
        ],
    )
    return store


async def test_every_hit_matches_and_best_matches_come_first(chats: HistoryBackend) -> None:
    page = await chats.search("paris")
    assert {h.message_id for h in page.hits} == {"u1", "a1", "t1", "a2", "o1"}
    for hit in page.hits:
        assert "paris" in normalize(hit.snippet)
        assert hit.highlights and all(
            normalize(hit.snippet[a:b]) == "paris" for a, b in hit.highlights
        )
    scores = [h.score for h in page.hits]
    assert scores == sorted(scores, reverse=True)
    assert page.hits[0].message_id == "o1", "three matches in a short message rank first"
    assert page.next_cursor is None


async def test_all_words_must_match(chats: HistoryBackend) -> None:
    assert _ids(await chats.search("paris sunny")) == _ids(await chats.search("sunny paris"))
    assert {m for _, m in _ids(await chats.search("paris sunny"))} == {"t1", "a2"}
    assert _ids(await chats.search("paris tokyo")) == []


async def test_diacritics_case_and_calls(chats: HistoryBackend) -> None:
    assert _ids(await chats.search("meteo")) == [("trip", "u1")]
    assert _ids(await chats.search("MÉTÉO")) == [("trip", "u1")]
    assert _ids(await chats.search("weather_lookup")) == [("trip", "a1")]
    assert _ids(await chats.search("degrees")) == [("trip", "t1")]
    assert _ids(await chats.search("tokyo")) == [("trip", "a3")], "reasoning is indexed"


async def test_japanese_and_chinese_without_spaces(chats: HistoryBackend) -> None:
    assert _ids(await chats.search("東京")) == [("trip", "u2"), ("trip", "a3")] or _ids(
        await chats.search("東京")
    ) == [("trip", "a3"), ("trip", "u2")]
    assert _ids(await chats.search("天気")) == [("trip", "u2")]
    hit = (await chats.search("天気")).hits[0]
    assert [hit.snippet[a:b] for a, b in hit.highlights] == ["天気"]
    await chats.append("zh", [user("z1", "明天北京的天气怎么样")])
    assert _ids(await chats.search("北京")) == [("zh", "z1")]
    assert _ids(await chats.search("京的天")) == [("zh", "z1")]


async def test_phrases_and_prefixes(chats: HistoryBackend) -> None:
    assert _ids(await chats.search('"sunny in paris"')) == [("trip", "a2")]
    assert _ids(await chats.search('"paris in sunny"')) == []
    assert {m for _, m in _ids(await chats.search("light*"))} == {"o1", "o2"}
    assert _ids(await chats.search("tomorr*")) == [("trip", "u1")]


@pytest.mark.parametrize(
    "query",
    [
        "",
        "   ",
        '"unbalanced',
        "a:b",
        "(paris)",
        "-paris",
        "*",
        "p*",
        "paris AND tokyo",
        "x" * 1001,
    ],
)
async def test_refused_syntax_is_one_line_of_invalid_input(
    chats: HistoryBackend, query: str
) -> None:
    with pytest.raises(InvalidInput) as raised:
        await chats.search(query)
    assert "\n" not in str(raised.value)


async def test_quoted_syntax_is_searched_as_text(chats: HistoryBackend) -> None:
    await chats.append("ops", [user("x1", "run it with a:b then (stop) -now")])
    assert _ids(await chats.search('"a:b"')) == [("ops", "x1")]
    assert _ids(await chats.search('"(stop)" "-now"')) == [("ops", "x1")]


async def test_arguments_are_checked(chats: HistoryBackend) -> None:
    for bad in (
        chats.search("paris", limit=0),
        chats.search("paris", limit=True),  # type: ignore[arg-type]
        chats.search("paris", roles="user"),
        chats.search("paris", include_excluded=False, excluded_only=True),
        chats.search("paris", cursor="not-a-cursor"),
        chats.search(5),  # type: ignore[arg-type]
    ):
        with pytest.raises(InvalidInput):
            await bad
    with pytest.raises(SessionNotFound):
        await chats.search("paris", session_id="nobody")


async def test_scope_and_roles(chats: HistoryBackend) -> None:
    assert {s for s, _ in _ids(await chats.search("paris", session_id="trip"))} == {"trip"}
    assert _ids(await chats.search("paris", session_id="other")) == [("other", "o1")]
    users = await chats.search("paris", roles=["user"])
    assert {h.role for h in users.hits} == {"user"}
    assert {m for _, m in _ids(users)} == {"u1", "o1"}


async def test_the_excluded_filters(chats: HistoryBackend) -> None:
    event = await chats.compact("trip", ExcludeOldest(1))
    assert event is not None
    everything = await chats.search("paris", session_id="trip")
    excluded = {h.message_id: h for h in everything.hits if h.excluded}
    assert set(excluded) == {"u1"}
    assert excluded["u1"].excluded_by == event.id
    assert all(h.excluded_by is None for h in everything.hits if not h.excluded)
    only = await chats.search("paris", session_id="trip", excluded_only=True)
    assert _ids(only) == [("trip", "u1")]
    active = await chats.search("paris", session_id="trip", include_excluded=False)
    assert {m for _, m in _ids(active)} == {"a1", "t1", "a2"}


async def test_paging_has_no_duplicates_and_keeps_the_order(store: HistoryBackend) -> None:
    await store.append("s", [user(f"m{i}", f"needle number {i} " + "hay " * i) for i in range(23)])
    whole = await store.search("needle", limit=100)
    seen: list[str] = []
    cursor: str | None = None
    while True:
        page = await store.search("needle", limit=5, cursor=cursor)
        assert len(page.hits) <= 5
        seen += [h.message_id for h in page.hits]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == [h.message_id for h in whole.hits]
    assert len(seen) == len(set(seen)) == 23
    first = await store.search("needle", limit=5)
    assert first.next_cursor is not None
    with pytest.raises(InvalidInput, match="another search"):
        await store.search("hay", limit=5, cursor=first.next_cursor)
    with pytest.raises(InvalidInput, match="another search"):
        await store.search("needle", limit=5, cursor=first.next_cursor, roles=["user"])
    tampered = first.next_cursor[:-2] + ("AA" if first.next_cursor[-2:] != "AA" else "BB")
    with pytest.raises(InvalidInput):
        await store.search("needle", limit=5, cursor=tampered)


async def test_ties_come_newest_first(store: HistoryBackend) -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    await store.append(
        "s",
        [
            user(f"m{i}", "same words here").model_copy(
                update={"created_at": start + timedelta(minutes=i)}
            )
            for i in range(4)
        ],
    )
    page = await store.search("words")
    assert [h.message_id for h in page.hits] == ["m3", "m2", "m1", "m0"]


async def test_redaction_and_purge_leave_no_hit(chats: HistoryBackend) -> None:
    await chats.redact("trip", ["t1"], reason="asked")
    assert _ids(await chats.search("degrees")) == []
    assert {m for _, m in _ids(await chats.search("paris"))} == {"u1", "a1", "a2", "o1"}
    report = await chats.purge(older_than=datetime.now(UTC) + timedelta(seconds=5))
    assert set(report.sessions) == {"trip", "other"}
    assert _ids(await chats.search("paris")) == []


async def test_deleting_a_session_leaves_no_hit(chats: HistoryBackend) -> None:
    await chats.delete_session("other")
    assert {s for s, _ in _ids(await chats.search("paris"))} == {"trip"}


async def test_tenants_never_see_each_other(stores: Stores) -> None:
    acme = await stores.open(tenant="acme")
    globex = await stores.open(tenant="globex")
    await acme.append("s", [user("m1", "the acme launch codes")])
    await globex.append("s", [user("m1", "the globex launch plan")])
    assert [h.snippet for h in (await acme.search("launch")).hits] == ["the acme launch codes"]
    assert _ids(await globex.search("acme")) == []
    assert _ids(await globex.search("codes", session_id="s")) == []
    page = await acme.search("launch", limit=1)
    await acme.append("t", [user("m2", "launch again")])
    cursor = (await acme.search("launch", limit=1)).next_cursor
    assert cursor is not None and page.hits
    with pytest.raises(InvalidInput):  # a cursor of another database or tenant's key
        await globex.search("launch", limit=1, cursor=cursor + "x")


async def test_a_shared_message_is_one_hit_tenant_wide_and_each_branch_its_own(
    chats: HistoryBackend,
) -> None:
    await chats.fork("trip", at="a2", new_session_id="f")
    await chats.append("f", [user("f1", "and Lyon, not Paris?")])
    wide = await chats.search("paris")
    assert sorted(_ids(wide)).count(("trip", "u1")) == 1
    assert not any(s == "f" and m == "u1" for s, m in _ids(wide))
    assert ("f", "f1") in _ids(wide)
    assert {m for _, m in _ids(await chats.search("paris", session_id="f"))} == {
        "u1",
        "a1",
        "t1",
        "a2",
        "f1",
    }
    event = await chats.compact("f", ExcludeOldest(1))
    assert event is not None
    in_fork = {h.message_id: h.excluded for h in (await chats.search("paris", session_id="f")).hits}
    in_trip = {
        h.message_id: h.excluded for h in (await chats.search("paris", session_id="trip")).hits
    }
    assert in_fork["u1"] is True and in_trip["u1"] is False


async def test_a_rewound_tail_is_searched_under_its_id(chats: HistoryBackend) -> None:
    event = await chats.rewind("trip", to="a2")
    assert event is not None
    tail = event.params["tail_session_id"]
    assert _ids(await chats.search("天気", session_id="trip")) == []
    assert _ids(await chats.search("天気", session_id=tail)) == [(tail, "u2")]
    assert _ids(await chats.search("天気")) == [(tail, "u2")]


def _holding(path: Path, word: bytes) -> list[str]:
    return sorted(p.name for p in path.parent.glob(f"{path.name}*") if word in p.read_bytes())


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_redacted_words_leave_the_sqlite_file(store: HistoryBackend, db_url: str) -> None:
    path = Path(db_url.removeprefix("sqlite:///"))
    await store.append("s", [user(f"f{i}", f"filler words {i} " * 20) for i in range(50)])
    await store.append("s", [user("secret", "codeword zqxjvwkpfa for the vault")])
    assert _ids(await store.search("zqxjvwkpfa")) == [("s", "secret")]
    assert _holding(path, b"zqxjvwkpfa")
    await store.redact("s", ["secret"], reason="asked")
    assert _ids(await store.search("zqxjvwkpfa")) == []
    assert _holding(path, b"zqxjvwkpfa") == []


async def test_a_recall_result_is_not_indexed_and_goes_with_what_it_quotes(
    chats: HistoryBackend,
) -> None:
    quoted = '{"chatledger_recall":{"quotes":["u1"]},"hits":[{"text":"the météo in Paris"}]}'
    await chats.append(
        "trip",
        [
            assistant("a9", call("c9", "recall")),
            tool("t9", result("c9", quoted)),
        ],
    )
    assert ("trip", "t9") not in _ids(await chats.search("paris"))
    report = await chats.redact("trip", ["u1"], reason="asked")
    assert set(report.redacted) == {"u1", "t9"}
    stored = {m.message_id: m for m in await chats.history("trip", include_excluded=True)}
    assert "Paris" not in stored["t9"].message.text


async def test_a_root_rewound_past_a_summary_it_keeps_finds_only_its_conversation(
    store: HistoryBackend,
) -> None:
    await store.append("r", [user(f"m{i}", f"word{i} filler text number {i}") for i in range(8)])
    summarizing = SummarizationStrategy(client=FakeSummarizer(), target_count=4)
    assert await store.compact("r", summarizing) is not None
    event = await store.rewind("r", to="m5")  # the summary, stored last, stays with r
    assert event is not None
    tail = event.params["tail_session_id"]
    assert _ids(await store.search("word7", session_id="r")) == []
    assert _ids(await store.search("word7", session_id=tail)) == [(tail, "m7")]
    found = _ids(await store.search("word1", session_id="r"))
    assert ("r", "m1") in found and len(found) == 2  # and the summary that covers it


async def test_a_reduced_result_is_found_and_shown_as_it_was_stored(
    store: HistoryBackend,
) -> None:
    await store.append(
        "r",
        [
            user("u1", "fetch the quarterly numbers"),
            assistant("a1", call("c1", "fetch")),
            tool("t1", result("c1", "the quarterly forecast is ninety units")),
            assistant("a2", "done"),
        ],
    )
    assert await store.compact("r", ReduceResults()) is not None
    [hit] = (await store.search("forecast", session_id="r")).hits
    assert hit.message_id == "t1"
    assert "quarterly forecast is ninety units" in hit.snippet
    assert "[reduced]" not in hit.snippet
