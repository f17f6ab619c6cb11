"""``chatledger report SESSION [-o FILE]``: the page, written where asked, or next to you."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from store import HistoryStore
from tests.cli.helpers import chatledger, run_api
from tests.report.session import SESSION, USAGE_SESSION, demo_session, usage_session


def _seed(url: str) -> None:
    async def fill(store: HistoryStore) -> None:
        await demo_session(store, turns=4)

    run_api(url, fill)


def test_report_writes_the_page_to_the_file_given(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/r.db"
    _seed(url)
    target = tmp_path / "audit.html"
    done = chatledger("report", SESSION, "-o", str(target), "--url", url)
    assert done.returncode == 0, done.stderr
    assert str(target) in done.stdout
    page = target.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and f"chatledger audit: {SESSION}" in page


def test_report_defaults_to_session_report_html(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/r.db"
    _seed(url)
    done = chatledger("report", SESSION, "--url", url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / f"{SESSION}.report.html").is_file()


def test_report_errors_are_one_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/r.db"
    _seed(url)
    unknown = chatledger("report", "nobody", "--url", url, cwd=tmp_path)
    assert unknown.returncode != 0 and len(unknown.stderr.strip().splitlines()) == 1
    assert "nobody" in unknown.stderr
    nowhere = chatledger("report", SESSION, "-o", str(tmp_path / "no" / "x.html"), "--url", url)
    assert nowhere.returncode != 0 and len(nowhere.stderr.strip().splitlines()) == 1
    assert "no folder" in nowhere.stderr
    assert not list(tmp_path.glob("*.html"))


def test_report_prices_each_turns_calls(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/r.db"
    run_api(url, usage_session)
    prices = tmp_path / "prices.toml"
    prices.write_text('["gpt-4.1"]\ninput = 2.0\noutput = 8.0\ncache_read = 0.5\n')
    target = tmp_path / "usage.html"
    done = chatledger(
        "report", USAGE_SESSION, "--prices", str(prices), "-o", str(target), "--url", url
    )
    assert done.returncode == 0, done.stderr
    page = target.read_text(encoding="utf-8")
    assert '<table id="usage">' in page and '<td class="num cost">' in page
    cost_two = ((1200 - 900) * 2 + 900 * 0.5 + 60 * 8) / 1e6  # turn 2, by hand
    row = re.search(r'data-turn="2">.*?<td class="num cost">([^<]*)</td>', page)
    assert row is not None and float(row[1]) == pytest.approx(cost_two, abs=1e-4)
    plain = chatledger("report", USAGE_SESSION, "-o", str(target), "--url", url)
    assert plain.returncode == 0, plain.stderr
    assert '<th class="num">cost</th>' not in target.read_text(encoding="utf-8")


def test_report_refuses_bad_prices_in_one_line_and_writes_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/r.db"
    run_api(url, usage_session)
    broken = tmp_path / "prices.json"
    broken.write_text('{"gpt-4.1": {"input": "cheap"}}')
    for prices in (broken, tmp_path / "missing.toml"):
        done = chatledger(
            "report", USAGE_SESSION, "--prices", str(prices), "--url", url, cwd=tmp_path
        )
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done
        assert (
            done.stderr.startswith("chatledger: error: invalid --prices")
            and str(prices) in done.stderr
        )
    assert not list(tmp_path.glob("*.html"))
