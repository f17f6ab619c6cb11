"""``chatledger search`` and ``chatledger db search on|off`` through the real entry
point, on SQLite and PostgreSQL: piped output (one line a hit) against ``--json``, the
filters, tenants, refused queries and the index switched off and on."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from store import HistoryStore
from tests.cli import helpers
from tests.cli.helpers import assert_one_line_error, invoke, run_api
from tests.conformance.toy_strategies import ExcludeOldest
from tests.groups.conversations import assistant, tool, user
from tests.groups.support import call, result


@pytest.fixture
def cli_url(db_url: str) -> Iterator[str]:
    """``trip`` (weather in Paris and Tokyo, its first group excluded) and ``notes``
    of tenant default; ``secret`` of tenant ``other``."""

    async def fill(store: HistoryStore) -> None:
        await store.append(
            "trip",
            [
                user("u1", "What is the météo in Paris?"),
                assistant("a1", call("c1", "weather")),
                tool("t1", result("c1", "Sunny in Paris")),
                assistant("a2", "Sunny.\tNo rain in Paris."),
                user("u2", "今日は東京の天気はどうですか"),
            ],
        )
        await store.compact("trip", ExcludeOldest(1))
        await store.append("notes", [user("n1", "Paris notes")])

    async def fill_other(store: HistoryStore) -> None:
        await store.append("secret", [user("s1", "Paris secret plans")])

    run_api(db_url, fill)
    run_api(db_url, fill_other, tenant="other")
    yield db_url


def ok(*args: str) -> helpers.Result:
    found = helpers.ok(*args)
    assert found.stderr == "", found.stderr
    return found


def test_piped_lines_are_the_json_hits(cli_url: str) -> None:
    piped = ok("search", "paris", "--url", cli_url).stdout.splitlines()
    page = json.loads(ok("search", "paris", "--url", cli_url, "--json").stdout)
    assert len(piped) == len(page["hits"]) == 4
    for line, hit in zip(piped, page["hits"], strict=True):
        session, message_id, seq, role, state, snippet = line.split("\t")
        assert (session, message_id, int(seq), role) == (
            hit["session_id"],
            hit["message_id"],
            hit["seq"],
            hit["role"],
        )
        assert state == (f"excluded by {hit['excluded_by']}" if hit["excluded"] else "active")
        assert snippet == hit["snippet"]
    assert {h["session_id"] for h in page["hits"]} == {"trip", "notes"}, "not tenant other's"


def test_filters(cli_url: str) -> None:
    def found(*args: str) -> set[str]:
        page = json.loads(ok("search", *args, "--url", cli_url, "--json").stdout)
        return {h["message_id"] for h in page["hits"]}

    assert found("paris", "--session", "trip") == {"u1", "t1", "a2"}
    assert found("paris", "--session", "tr") == {"u1", "t1", "a2"}, "a unique start"
    assert found("paris", "--excluded-only") == {"u1"}
    assert found("paris", "--role", "user") == {"u1", "n1"}
    assert found("paris", "--role", "user", "--role", "tool") == {"u1", "n1", "t1"}
    assert found("天気") == {"u2"}
    assert found("meteo") == {"u1"}
    limited = json.loads(ok("search", "paris", "--limit", "1", "--url", cli_url, "--json").stdout)
    assert len(limited["hits"]) == 1 and limited["next_cursor"]
    assert found("paris", "--tenant", "other") == {"s1"}


def test_more_hits_than_the_limit_says_so_on_stderr(cli_url: str) -> None:
    shown = helpers.ok("search", "paris", "--limit", "2", "--url", cli_url)
    assert len(shown.stdout.splitlines()) == 2
    assert "raise --limit" in shown.stderr


@pytest.mark.parametrize("query", ["a:b", '"open', "(x)", "p*", ""])
def test_a_refused_query_is_one_line(cli_url: str, query: str) -> None:
    refused = invoke("search", query, "--url", cli_url)
    assert refused.returncode == 1
    assert_one_line_error(refused, contains="invalid search query")


def test_no_match_and_an_unknown_session(cli_url: str) -> None:
    assert "no message matches" in ok("search", "zebra", "--url", cli_url).stdout
    unknown = invoke("search", "paris", "--session", "nope", "--url", cli_url)
    assert unknown.returncode == 1
    assert_one_line_error(unknown, contains="nope")


def test_search_off_then_on(cli_url: str) -> None:
    assert "search is off" in ok("db", "search", "off", "--url", cli_url).stdout
    refused = invoke("search", "paris", "--url", cli_url)
    assert refused.returncode == 1
    assert_one_line_error(refused, contains="db search on")

    async def more(store: HistoryStore) -> None:  # written while the index is off
        await store.append("later", [user("l1", "Paris again")])

    run_api(cli_url, more)
    switched = json.loads(ok("db", "search", "on", "--url", cli_url, "--json").stdout)
    assert switched == {"search": "on", "filled": 0}
    page = json.loads(ok("search", "paris", "--url", cli_url, "--json").stdout)
    assert {h["message_id"] for h in page["hits"]} == {"u1", "t1", "a2", "n1", "l1"}
