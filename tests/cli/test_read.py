"""``sessions``, ``show``, ``audit`` and ``stats`` through the real entry point.

Every ``--json`` output is compared with what the API returns for the same query.
"""

from __future__ import annotations

from typing import Any

from store import HistoryStore
from store.models import CompactionEvent, SessionInfo, Stats, StoredMessage
from strategies.messages import MESSAGES_ADAPTER
from strategies.sliding_window import SlidingWindowStrategy
from tests.cli.conftest import requires_compaction
from tests.cli.helpers import assert_one_line_error, chatledger, rows, run_api


def _dump(models: list[Any]) -> list[Any]:
    return [m.model_dump(mode="json") for m in models]


def test_sessions_json_is_the_api_sessions(seeded: str) -> None:
    result = chatledger("sessions", "--url", seeded, "--json")
    assert result.returncode == 0, result.stderr

    async def api(store: HistoryStore) -> list[SessionInfo]:
        return await store.sessions(order="updated")

    expected = run_api(seeded, api)
    parsed = [SessionInfo.model_validate(item) for item in result.json()]
    assert parsed == expected
    assert [s.session_id for s in parsed] == ["beta", "alpha"]  # newest first


def test_sessions_table_lists_each_session_with_its_counts(seeded: str) -> None:
    result = chatledger("sessions", "--url", seeded)
    assert result.returncode == 0, result.stderr
    by_id = {cells[0]: cells for cells in rows(result.stdout)}
    assert set(by_id) == {"alpha", "beta"}

    async def api(store: HistoryStore) -> SessionInfo:
        return await store.session("alpha")

    info = run_api(seeded, api)
    assert f"{info.stored_tokens:,}" in by_id["alpha"]
    assert by_id["alpha"][1].endswith("Z")  # times carry their zone


def test_tenant_option_and_environment_select_the_tenant(seeded: str) -> None:
    by_option = chatledger("sessions", "--url", seeded, "--tenant", "other", "--json")
    by_env = chatledger(
        "sessions", "--json", env={"CHATLEDGER_URL": seeded, "CHATLEDGER_TENANT": "other"}
    )
    for result in (by_option, by_env):
        assert result.returncode == 0, result.stderr
        assert [item["session_id"] for item in result.json()] == ["gamma"]
        assert {item["tenant"] for item in result.json()} == {"other"}


def test_option_overrides_environment(seeded: str, tmp_path: Any) -> None:
    elsewhere = f"sqlite:///{tmp_path}/missing.db"
    result = chatledger("sessions", "--url", seeded, "--json", env={"CHATLEDGER_URL": elsewhere})
    assert result.returncode == 0, result.stderr
    assert len(result.json()) == 2


def test_another_tenant_cannot_show_a_session(seeded: str) -> None:
    result = chatledger("show", "gamma", "--url", seeded)
    assert_one_line_error(result, contains="not found")


def test_show_json_is_the_api_history(seeded: str) -> None:
    result = chatledger("show", "alpha", "--url", seeded, "--json")
    assert result.returncode == 0, result.stderr

    async def api(store: HistoryStore) -> list[StoredMessage]:
        return await store.history("alpha")

    expected = run_api(seeded, api)
    assert [StoredMessage.model_validate(item) for item in result.json()] == expected
    assert len(expected) == 1 + 3 * 4


def test_show_table_has_one_row_per_message(seeded: str) -> None:
    result = chatledger("show", "beta", "--url", seeded)
    assert result.returncode == 0, result.stderr
    assert len(rows(result.stdout)) == 5
    assert "call lookup" in result.stdout and "question 1" in result.stdout
    assert "excluded" not in result.stdout


def test_show_limit_gives_the_newest_messages(seeded: str) -> None:
    result = chatledger("show", "alpha", "--url", seeded, "--limit", "2", "--json")
    assert [item["seq"] for item in result.json()] == [12, 13]


def test_show_all_and_context_together_is_a_usage_error(seeded: str) -> None:
    result = chatledger("show", "alpha", "--url", seeded, "--all", "--context")
    assert_one_line_error(result, contains="--context")
    assert result.returncode == 2


def _compact_alpha(url: str) -> CompactionEvent:
    async def compact(store: HistoryStore) -> CompactionEvent:
        event = await store.compact("alpha", SlidingWindowStrategy(keep_last_turns=1))
        assert event is not None
        return event

    return run_api(url, compact)


@requires_compaction
def test_show_all_marks_the_excluded_groups(seeded: str) -> None:
    event = _compact_alpha(seeded)
    active = chatledger("show", "alpha", "--url", seeded, "--json").json()
    everything = chatledger("show", "alpha", "--url", seeded, "--all", "--json").json()
    assert len(everything) == 13 and len(active) < len(everything)
    excluded = [m for m in everything if m["excluded"]]
    assert len(excluded) == len(everything) - len(active)
    assert {m["excluded_event_id"] for m in excluded} == {event.id}
    table = chatledger("show", "alpha", "--url", seeded, "--all")
    marked = [cells for cells in rows(table.stdout) if cells[4].startswith("excluded:")]
    assert len(marked) == len(excluded)


@requires_compaction
def test_show_context_json_is_the_api_projection(seeded: str) -> None:
    _compact_alpha(seeded)
    result = chatledger("show", "alpha", "--url", seeded, "--context", "--json")
    assert result.returncode == 0, result.stderr

    async def api(store: HistoryStore) -> list[Any]:
        return await store.context("alpha")

    expected = run_api(seeded, api)
    assert MESSAGES_ADAPTER.validate_python(result.json()) == expected
    table = chatledger("show", "alpha", "--url", seeded, "--context")
    assert f"{len(expected)} messages" in table.stdout


@requires_compaction
def test_audit_json_is_the_api_audit_and_filters_apply(seeded: str) -> None:
    event = _compact_alpha(seeded)
    result = chatledger("audit", "alpha", "--url", seeded, "--json")
    assert result.returncode == 0, result.stderr
    assert [CompactionEvent.model_validate(item) for item in result.json()] == [event]
    for args in (("alpha", "--phase", "after_run"), ("--since", "2999-01-01")):
        filtered = chatledger("audit", *args, "--url", seeded, "--json")
        assert filtered.returncode == 0, filtered.stderr
        assert filtered.json() == []
    kept = chatledger(
        "audit",
        *("--url", seeded, "--json", "--phase", "manual", "--since", "1h"),
        *("--strategy", event.strategy),
    )
    assert [item["id"] for item in kept.json()] == [event.id]
    table = chatledger("audit", "--url", seeded)
    assert "sliding-window" in table.stdout and "alpha" in table.stdout  # short names
    assert event.id in table.stdout
    assert f"{event.tokens_before:,} → {event.tokens_after:,}" in table.stdout


@requires_compaction
def test_stats_json_is_the_api_stats(seeded: str) -> None:
    _compact_alpha(seeded)

    async def api(store: HistoryStore) -> tuple[Stats, Stats]:
        return await store.stats("alpha"), await store.stats()

    one, tenant = run_api(seeded, api)
    result = chatledger("stats", "alpha", "--url", seeded, "--json")
    assert Stats.model_validate(result.json()) == one  # one object, not a list
    whole = chatledger("stats", "--url", seeded, "--json")
    assert Stats.model_validate(whole.json()) == tenant
    assert one.active_messages < one.stored_messages
    table = chatledger("stats", "alpha", "--url", seeded)
    assert f"{one.stored_tokens:,}" in table.stdout and f"{one.active_tokens:,}" in table.stdout


@requires_compaction
def test_audit_and_stats_of_an_unknown_session_fail_in_one_line(seeded: str) -> None:
    for command in ("audit", "stats"):
        assert_one_line_error(chatledger(command, "nope", "--url", seeded), contains="nope")
