"""How ``show``, ``audit``, ``why`` and ``excluded`` describe a session compacted through
the API with strategies the CLI cannot name (reduction and summarization take objects),
through :func:`store.cli.main` in this process, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from store import HistoryStore
from store.models import CompactionEvent
from strategies import SummarizationStrategy, ToolResultReductionStrategy
from strategies.summarizers import FakeSummarizer
from tests.cli.helpers import api, conversation, ok, rows, run_api


def _cut(text: str) -> str:
    return text[:12] + " [cut]"


@pytest.fixture
def cli_url(db_url: str) -> Iterator[str]:
    """``db_url`` with session ``alpha`` (4 tool turns, tool ``lookup``)."""

    async def fill(store: HistoryStore) -> None:
        await store.append("alpha", conversation(4))

    run_api(db_url, fill)
    yield db_url


def test_a_reduction_is_marked_in_show_and_counted_in_audit(cli_url: str) -> None:
    event: CompactionEvent = api(
        cli_url, "compact", "alpha", ToolResultReductionStrategy(reducers={"lookup": _cut})
    )
    assert event.outcome == "applied" and event.reduced and not event.excluded
    reduced = {m.message_id for m in api(cli_url, "history", "alpha") if m.reduced is not None}
    assert reduced
    shown = ok("show", "alpha", "--url", cli_url).stdout
    marked = [line for line in shown.splitlines()[2:] if "reduced" in line]
    assert len(marked) == len(reduced)
    assert all("tool" in line for line in marked)
    audit = ok("audit", "alpha", "--url", cli_url).stdout
    assert f"{len(event.reduced)} reduced" in audit
    assert event.id in audit


def test_a_summary_is_named_by_why_and_excluded(cli_url: str) -> None:
    strategy = SummarizationStrategy(client=FakeSummarizer(), target_count=4, threshold=0)
    event: CompactionEvent = api(cli_url, "compact", "alpha", strategy)
    assert event.outcome == "applied" and event.summarized
    [(summary_id, replaced)] = event.summarized.items()
    history = api(cli_url, "history", "alpha", include_excluded=True)
    hidden = next(m for m in history if m.group_id in replaced)
    told = ok("why", "alpha", hidden.message_id, "--url", cli_url).stdout.splitlines()
    assert told[0].startswith(f"{hidden.message_id} is not sent: ")
    assert f"summary {summary_id} replaces it" in told
    excluded = api(cli_url, "excluded", "alpha")
    by_summary = [g for g in excluded if g.summary_group_id == summary_id]
    assert {g.group_id for g in by_summary} == set(replaced)
    table = ok("excluded", "alpha", "--url", cli_url).stdout
    listed = {cells[0]: "  ".join(cells) for cells in rows(table)}
    for group in by_summary:
        assert f", by summary {summary_id}" in listed[group.group_id]
