"""``chatledger usage [SESSION] [--since WHEN] [--by model|session|day] [--prices FILE]``
and the usage rows of ``chatledger stats``, on a database seeded through the API: calls
paired with a projection (``context`` before them), one after a compaction (a
cache-prefix break), one that names no model and one of a session that stores no
message. Every expected number below is worked out by hand from the seeded calls."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from store import HistoryStore
from store.cli._model_usage import GROUPINGS
from store.cli._output import render
from store.cli._render import usage_table
from store.cli._width import width
from store.usage import USAGE_GROUPINGS, Usage, UsageReport
from tests.cli.helpers import (
    assert_one_line_error,
    conversation,
    invoke,
    rows,
    run_api,
    tool_turn,
)
from tests.cli.pseudo_terminal import on_terminal

NOW = datetime.now(UTC).replace(microsecond=0)
AT = {
    "old": NOW - timedelta(days=30),
    "yesterday": NOW - timedelta(days=1),
    "compacted": NOW - timedelta(hours=2),
    "beta": NOW - timedelta(hours=1),
}
"""When each seeded call was made: one older than a week, three within it."""
GPT = "gpt-4.1"
CLAUDE = "claude-sonnet-4-5-20250929"

PRICES_TOML = f"""
["{GPT}"]
input = 2.0
output = 8.0
cache_read = 0.5
cache_write = 2.5

["{CLAUDE}"]
input = 3.0
output = 15.0
"""
PRICES = {
    GPT: {"input": 2.0, "output": 8.0, "cache_read": 0.5, "cache_write": 2.5},
    CLAUDE: {"input": 3.0, "output": 15.0},
}
# The cost of each priced call, by the formula of docs/cli.md:
# (uncached input x input + cache reads x cache_read + cache writes x cache_write
#  + output x output) / 1e6, uncached input = input - cache reads - cache writes.
COST_OLD = ((1200 - 1000 - 0) * 2.0 + 1000 * 0.5 + 0 * 2.5 + 80 * 8.0) / 1e6  # 0.00154
COST_YESTERDAY = ((1500 - 1100) * 2.0 + 1100 * 0.5 + 120 * 8.0) / 1e6  # 0.00231
# claude's cache_read and cache_write default to its input price (3.0)
COST_COMPACTED = ((700 - 0 - 650) * 3.0 + 0 * 3.0 + 650 * 3.0 + 60 * 15.0) / 1e6  # 0.003


@pytest.fixture
def seeded(url: str) -> tuple[str, list[int]]:
    """``url`` with ``alpha`` (three calls, each after a projection: two of gpt-4.1, then
    one of claude after a compaction, a cache-prefix break), ``beta`` (no message, one
    call naming no model, not paired), ``gamma`` (messages, no call); and the local
    counts of alpha's three calls."""

    async def fill(store: HistoryStore) -> list[int]:
        await store.append("alpha", conversation(2))
        await store.context("alpha")
        usage = Usage(
            model=GPT,
            input_tokens=1200,
            output_tokens=80,
            cache_read_tokens=1000,
            cache_write_tokens=0,
            at=AT["old"],
        )
        await store.record_usage("alpha", usage, call_id="c1")
        await store.record_usage("alpha", usage, call_id="c1")  # a repeat records nothing
        await store.append("alpha", tool_turn(3, 40))
        await store.context("alpha")
        await store.record_usage(
            "alpha",
            Usage(
                model=GPT,
                input_tokens=1500,
                output_tokens=120,
                cache_read_tokens=1100,
                reasoning_tokens=40,
                at=AT["yesterday"],
            ),
        )
        event = await store.compact("alpha", "sliding-window:keep_last_turns=1")
        assert event is not None and event.outcome == "applied"
        await store.context("alpha")
        await store.record_usage(
            "alpha",
            Usage(
                model=CLAUDE,
                input_tokens=700,
                output_tokens=60,
                cache_read_tokens=0,
                cache_write_tokens=650,
                at=AT["compacted"],
            ),
        )
        await store.record_usage("beta", Usage(input_tokens=5000, output_tokens=100, at=AT["beta"]))
        await store.append("gamma", conversation(1))
        calls = await store.usage_calls("alpha")
        assert [c.prefix_kept for c in calls] == [None, True, False]  # the seed is as said
        assert all(c.local_tokens for c in calls)
        return [c.local_tokens or 0 for c in calls]

    return url, run_api(url, fill)


def _json(*args: str) -> Any:
    result = invoke("usage", *args, "--json")
    assert result.returncode == 0, result
    return result.json()


def _row(report: dict[str, Any], key: str) -> dict[str, Any]:
    return next(r for r in report["rows"] if r["key"] == key)


def _lanes(row: dict[str, Any]) -> tuple[Any, ...]:
    return (
        row["calls"],
        row["input_tokens"],
        row["cache_read_tokens"],
        row["cache_write_tokens"],
        row["output_tokens"],
        row["reasoning_tokens"],
    )


def test_the_groupings_are_the_stores() -> None:
    assert GROUPINGS == USAGE_GROUPINGS


def test_json_by_model_field_by_field(seeded: tuple[str, list[int]]) -> None:
    url, local = seeded
    report = _json("--url", url)
    UsageReport.model_validate(report)  # the API's model, as documented
    assert report["tenant"] == "default" and report["session_id"] is None
    assert (report["by"], report["since"], report["priced"]) == ("model", None, False)
    assert [r["key"] for r in report["rows"]] == [CLAUDE, GPT, "unknown"]
    gpt, claude, unknown = _row(report, GPT), _row(report, CLAUDE), _row(report, "unknown")
    # gpt: 0 + no report of cache writes is 0; one call reported reasoning
    assert _lanes(gpt) == (2, 1200 + 1500, 1000 + 1100, 0, 80 + 120, 40)
    assert (gpt["local_sent_tokens"], gpt["projected_calls"], gpt["cache_breaks"]) == (
        local[0] + local[1],
        2,
        0,
    )
    assert _lanes(claude) == (1, 700, 0, 650, 60, None)
    assert (claude["local_sent_tokens"], claude["projected_calls"]) == (local[2], 1)
    assert claude["cache_breaks"] == 1  # its context began after a compaction
    assert _lanes(unknown) == (1, 5000, None, None, 100, None)  # lanes not reported: null
    assert (unknown["local_sent_tokens"], unknown["projected_calls"]) == (None, 0)
    total = report["total"]
    assert total["key"] == "total"
    assert _lanes(total) == (4, 1200 + 1500 + 700 + 5000, 2100, 650, 360, 40)
    assert (total["local_sent_tokens"], total["cache_breaks"]) == (sum(local), 1)
    for row in [*report["rows"], total]:
        assert (row["cost"], row["unpriced_calls"]) == (None, 0)


def test_by_session_and_one_session(seeded: tuple[str, list[int]]) -> None:
    url, local = seeded
    report = _json("--by", "session", "--url", url)
    assert report["by"] == "session"
    assert [r["key"] for r in report["rows"]] == ["alpha", "beta"]  # gamma made no call
    assert _lanes(_row(report, "alpha")) == (3, 3400, 2100, 650, 260, 40)
    assert _lanes(_row(report, "beta")) == (1, 5000, None, None, 100, None)
    alpha = _json("alpha", "--url", url)
    assert alpha["session_id"] == "alpha"
    assert [r["key"] for r in alpha["rows"]] == [CLAUDE, GPT]
    assert _lanes(alpha["total"]) == (3, 3400, 2100, 650, 260, 40)
    assert alpha["total"]["local_sent_tokens"] == sum(local)
    # a unique start of the id is the session, as in every command
    assert _json("alp", "--url", url) == alpha


def test_by_day_oldest_first(seeded: tuple[str, list[int]]) -> None:
    url, _ = seeded
    report = _json("--by", "day", "--url", url)
    days: dict[str, list[str]] = {}
    for name, moment in AT.items():
        days.setdefault(moment.date().isoformat(), []).append(name)
    assert [r["key"] for r in report["rows"]] == sorted(days)
    old = _row(report, AT["old"].date().isoformat())
    assert _lanes(old) == (1, 1200, 1000, 0, 80, None)
    assert sum(r["calls"] for r in report["rows"]) == report["total"]["calls"] == 4


def test_since_leaves_out_older_calls(seeded: tuple[str, list[int]]) -> None:
    url, local = seeded
    week = _json("--since", "7d", "--url", url)
    assert week["since"] is not None
    since = datetime.fromisoformat(week["since"])
    assert AT["old"] < since < AT["yesterday"]
    gpt = _row(week, GPT)
    assert _lanes(gpt) == (1, 1500, 1100, None, 120, 40)  # the 30-day-old call left out
    assert gpt["local_sent_tokens"] == local[1]
    assert week["total"]["calls"] == 3
    iso = _json("alpha", "--since", AT["compacted"].isoformat(), "--url", url)
    assert [r["key"] for r in iso["rows"]] == [CLAUDE]
    none = _json("alpha", "--since", (NOW + timedelta(days=1)).date().isoformat(), "--url", url)
    assert none["rows"] == [] and none["total"]["calls"] == 0


def _prices_file(tmp_path: Path, suffix: str) -> Path:
    path = tmp_path / f"prices{suffix}"
    path.write_text(PRICES_TOML if suffix == ".toml" else json.dumps(PRICES), encoding="utf-8")
    return path


@pytest.mark.parametrize("suffix", [".toml", ".json"])
def test_prices_give_the_cost_by_the_documented_formula(
    seeded: tuple[str, list[int]], tmp_path: Path, suffix: str
) -> None:
    url, _ = seeded
    prices = _prices_file(tmp_path, suffix)
    result = invoke("usage", "--prices", str(prices), "--url", url, "--json")
    assert result.returncode == 0, result
    report = result.json()
    assert report["priced"] is True
    assert _row(report, GPT)["cost"] == pytest.approx(COST_OLD + COST_YESTERDAY)
    assert _row(report, CLAUDE)["cost"] == pytest.approx(COST_COMPACTED)
    unknown = _row(report, "unknown")
    assert (unknown["cost"], unknown["unpriced_calls"]) == (None, 1)
    total = report["total"]
    assert total["cost"] == pytest.approx(COST_OLD + COST_YESTERDAY + COST_COMPACTED)
    assert total["unpriced_calls"] == 1
    # stdout is the JSON alone; stderr says, in one line, which calls are left out
    assert result.stderr.strip().splitlines() == [
        f"1 call left out of cost: {prices} has no price for unknown"
    ]
    by_day = _json("--by", "day", "--prices", str(prices), "--url", url)
    old = _row(by_day, AT["old"].date().isoformat())
    assert old["cost"] == pytest.approx(COST_OLD)


def test_the_table_has_a_row_per_key_a_total_and_the_cost(
    seeded: tuple[str, list[int]], tmp_path: Path
) -> None:
    url, local = seeded
    prices = _prices_file(tmp_path, ".toml")
    result = invoke("usage", "--prices", str(prices), "--url", url)
    assert result.returncode == 0, result
    lines = result.stdout.splitlines()
    assert lines[0] == "Model calls of tenant default, by model"
    assert lines[1].split() == [
        "model",
        "calls",
        "input",
        "cache",
        "read",
        "cache",
        "write",
        "output",
        "reasoning",
        "sent",
        "(local)",
        "breaks",
        "cost",
    ]
    table = {cells[0]: cells[1:] for cells in rows(result.stdout)}
    assert list(table) == [CLAUDE, GPT, "unknown", "total"]
    gpt = table[GPT]
    assert gpt[:8] == ["2", "2,700", "2,100", "0", "200", "40", f"{local[0] + local[1]:,}", "0"]
    assert float(gpt[8]) == pytest.approx(COST_OLD + COST_YESTERDAY, abs=1e-4)
    assert table["unknown"] == ["1", "5,000", "-", "-", "100", "-", "-", "0", "-"]
    assert table["total"][:2] == ["4", "8,400"] and table["total"][7] == "1"
    assert "left out of cost" in result.stderr


def test_prices_that_name_no_model_of_the_calls_leave_every_call_unpriced(
    seeded: tuple[str, list[int]], tmp_path: Path
) -> None:
    url, _ = seeded
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"some-other-model": {"input": 1, "output": 2}}))
    result = invoke("usage", "--prices", str(other), "--url", url, "--json")
    assert result.returncode == 0, result
    report = result.json()
    assert report["priced"] is True
    assert all(r["cost"] is None for r in [*report["rows"], report["total"]])
    assert report["total"]["unpriced_calls"] == 4
    [line] = result.stderr.strip().splitlines()
    assert line == f"4 calls left out of cost: {other} has no price for {CLAUDE}, {GPT}, unknown"


def test_a_session_without_calls_is_an_empty_report_an_unknown_one_an_error(
    seeded: tuple[str, list[int]],
) -> None:
    url, _ = seeded
    empty = invoke("usage", "gamma", "--url", url)
    assert (empty.returncode, empty.stdout, empty.stderr) == (
        0,
        "No model calls of session gamma.\n",
        "",
    )
    report = _json("gamma", "--url", url)
    assert report["rows"] == [] and report["total"]["calls"] == 0
    assert report["total"]["input_tokens"] is None
    # beta stores no message, but its call is recorded: it is reported
    beta = _json("beta", "--url", url)
    assert beta["total"]["calls"] == 1
    assert_one_line_error(invoke("usage", "nobody", "--url", url), contains="'nobody' not found")
    assert invoke("usage", "nobody", "--url", url).returncode == 1


def _bad_prices(tmp_path: Path) -> dict[str, Path]:
    files = {
        "missing": tmp_path / "missing.toml",
        "not toml": tmp_path / "broken.toml",
        "not json": tmp_path / "broken.json",
        "a list": tmp_path / "list.json",
        "no output price": tmp_path / "partial.toml",
        "negative": tmp_path / "negative.json",
        "a number for a model": tmp_path / "number.json",
    }
    files["not toml"].write_text("[gpt\ninput = ")
    files["not json"].write_text("{gpt: 1")
    files["a list"].write_text("[1, 2]")
    files["no output price"].write_text('["gpt-4.1"]\ninput = 2.0\n')
    files["negative"].write_text(json.dumps({"m": {"input": -1, "output": 1}}))
    files["a number for a model"].write_text(json.dumps({"m": 3}))
    return files


def test_bad_input_is_one_line_and_a_non_zero_exit(
    seeded: tuple[str, list[int]], tmp_path: Path
) -> None:
    url, _ = seeded
    for name, path in _bad_prices(tmp_path).items():
        result = invoke("usage", "--prices", str(path), "--url", url)
        assert_one_line_error(result, contains="invalid --prices")
        assert result.returncode == 2, name
        assert str(path) in result.stderr, name
    by = invoke("usage", "--by", "week", "--url", url)
    assert_one_line_error(by, contains="--by")
    assert by.returncode == 2
    since = invoke("usage", "--since", "last tuesday", "--url", url)
    assert_one_line_error(since, contains="invalid --since")
    assert since.returncode == 2
    nowhere = invoke("usage", "--url", str(tmp_path / "none.db"))
    assert_one_line_error(nowhere, contains="no database")


def test_prices_are_read_before_the_database_is_opened(tmp_path: Path) -> None:
    database = tmp_path / "nowhere.db"
    result = invoke("usage", "--prices", str(tmp_path / "gone.json"), "--url", str(database))
    assert_one_line_error(result, contains="invalid --prices")  # not "no database"
    assert not database.exists()


def test_stats_shows_the_calls_cache_reads_and_breaks(seeded: tuple[str, list[int]]) -> None:
    url, _ = seeded
    stats = invoke("stats", "--url", url)
    assert stats.returncode == 0, stats
    table = {cells[0]: cells[1:] for cells in rows(stats.stdout)}
    assert table["model calls"] == ["4"]
    assert table["cache reads"] == ["2,100"]
    assert table["cache breaks"] == ["1"]
    as_json = invoke("stats", "alpha", "--url", url, "--json").json()
    assert (as_json["usage_calls"], as_json["cache_read_tokens"], as_json["cache_breaks"]) == (
        3,
        2100,
        1,
    )
    gamma = invoke("stats", "gamma", "--url", url)
    assert "model calls" not in gamma.stdout  # no call: the rows stay out


def _reports(url: str) -> list[UsageReport]:
    async def read(store: HistoryStore) -> list[UsageReport]:
        from store.usage import load_prices

        prices = load_prices(_write_prices(Path(url.removeprefix("sqlite:///")).parent))
        return [
            await store.usage(by=by, prices=chosen)
            for by in USAGE_GROUPINGS
            for chosen in (None, prices)
        ]

    return run_api(url, read)


def _write_prices(folder: Path) -> Path:
    path = folder / "prices.toml"
    path.write_text(PRICES_TOML)
    return path


@pytest.mark.parametrize("limit", [60, 80, 120])
def test_on_a_terminal_every_row_fits_and_keeps_its_numbers_whole(
    seeded: tuple[str, list[int]], limit: int
) -> None:
    url, _ = seeded
    for report in _reports(url):
        table = usage_table(report, f"Model calls of tenant default, by {report.by}")
        title, lines = render(table, limit)
        assert width(title) <= limit
        assert len(lines) == 1 + len(table.rows)
        header = lines[0]
        for name in ("calls", "input", "cache read", "output"):
            assert name in header, (limit, header)  # never dropped
        if report.priced:
            assert header.endswith("cost")
        for cells, line in zip(table.rows, lines[1:], strict=True):
            assert width(line) <= limit, line
            words = line.split()
            for column, cell in zip(table.columns[1:4], cells[1:4], strict=True):
                assert cell in words, (column.header, cell, line)


def test_a_real_80_column_terminal(seeded: tuple[str, list[int]], tmp_path: Path) -> None:
    url, _ = seeded
    prices = _write_prices(tmp_path)
    for args in (("usage",), ("usage", "--by", "session"), ("usage", "alpha", "--by", "day")):
        screen = on_terminal(*args, "--prices", str(prices), "--url", url, columns=80)
        assert screen.returncode == 0, screen.text
        # a path is never split: one longer than the terminal has a line of its own
        assert all(width(line) <= 80 or len(line.split()) == 1 for line in screen.lines), (
            screen.text
        )
        assert screen.lines[1].split()[-1] == "cost", screen.text
        assert "5,000" in screen.text or args[1] == "alpha"


def test_a_model_name_is_shown_never_obeyed(url: str, tmp_path: Path) -> None:
    evil = "evil\x1b]0;pwned\x07\u202e"

    async def fill(store: HistoryStore) -> None:
        await store.record_usage("s", Usage(model=evil, input_tokens=10, output_tokens=1))

    run_api(url, fill)
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"other": {"input": 1, "output": 1}}))
    table = invoke("usage", "--prices", str(prices), "--url", url)
    assert table.returncode == 0, table
    for text in (table.stdout, table.stderr):
        assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
        assert "evil\\x1b]0;pwned\\x07\\u202e" in text
    report = _json("--url", url)
    assert report["rows"][0]["key"] == evil  # JSON gives the exact name back
