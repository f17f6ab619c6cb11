"""``chatledger report SESSION [-o FILE]``: the page, written where asked, or next to you."""

from __future__ import annotations

from pathlib import Path

from store import HistoryStore
from tests.cli.helpers import chatledger, run_api
from tests.report.session import SESSION, demo_session


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
