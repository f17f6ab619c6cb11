"""Every command and flag through the real entry point, on SQLite and PostgreSQL.

Commands run :func:`store.cli.main` in this process (what the console script calls,
with stdout and stderr that are not terminals); ``--json`` output is compared with what
the API returns for the same query, and tables with the same figures.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from store import HistoryStore
from store.models import CompactionEvent, ExcludedGroup, SessionInfo, Stats, WhyResult
from store.provider import BEFORE_STRATEGY_KEY
from store.sql.drivers.engine import sqlite_file
from strategies.messages import MESSAGES_ADAPTER
from tests.cli import helpers
from tests.cli.helpers import (
    Result,
    api,
    assert_one_line_error,
    conversation,
    invoke,
    rows,
    run_api,
)

WINDOW = "sliding-window:keep_last_turns=1"


@pytest.fixture
def cli_url(db_url: str) -> Iterator[str]:
    """``db_url`` with sessions ``alpha`` (3 tool turns), then ``beta`` (1 turn), tenant
    default, and ``gamma`` (1 turn) of tenant ``other``."""

    async def fill(store: HistoryStore) -> None:
        await store.append("alpha", conversation(3))
        await store.append("beta", conversation(1))

    async def fill_other(store: HistoryStore) -> None:
        await store.append("gamma", conversation(1))

    run_api(db_url, fill)
    run_api(db_url, fill_other, tenant="other")
    yield db_url


def ok(*args: str, env: dict[str, str] | None = None) -> Result:
    """Run a command that must succeed and warn at most, and return what it printed."""
    result = helpers.ok(*args, env=env)
    assert result.stderr == "" or result.stderr.startswith("chatledger: warning"), result.stderr
    return result


def compact_alpha(url: str) -> CompactionEvent:
    """Compact ``alpha`` down to its last turn through ``chatledger compact``."""
    done = ok("compact", "alpha", "--strategy", WINDOW, "--url", url, "--json")
    return CompactionEvent.model_validate(done.json())


def test_sessions_order_paging_since_and_tenants(cli_url: str) -> None:
    listed = ok("sessions", "--url", cli_url, "--json").json()
    expected = api(cli_url, "sessions", order="updated")
    assert [SessionInfo.model_validate(s) for s in listed] == expected
    assert [s["session_id"] for s in listed] == ["beta", "alpha"]
    first = ok("sessions", "--url", cli_url, "--limit", "1", "--json").json()
    assert [s["session_id"] for s in first] == ["beta"]
    page = ok("sessions", "--url", cli_url, "--limit", "1", "--after", "beta", "--json").json()
    assert [s["session_id"] for s in page] == ["alpha"]
    assert ok("sessions", "--url", cli_url, "--since", "2999-01-01", "--json").json() == []
    assert len(ok("sessions", "--url", cli_url, "--since", "1h", "--json").json()) == 2
    table = ok("sessions", "--url", cli_url)
    assert [cells[0] for cells in rows(table.stdout)] == ["beta", "alpha"]
    other = ok("sessions", "--url", cli_url, "--tenant", "other", "--json").json()
    assert [s["session_id"] for s in other] == ["gamma"]
    by_env = ok("sessions", "--json", env={"CHATLEDGER_URL": cli_url, "CHATLEDGER_TENANT": "other"})
    assert by_env.json() == other
    empty = ok("sessions", "--url", cli_url, "--tenant", "nobody")
    assert empty.stdout == "No sessions for tenant 'nobody'.\n"


def test_tenants_lists_every_tenant_for_an_administrator(cli_url: str) -> None:
    found = ok("tenants", "--url", cli_url, "--json").json()
    assert [t["tenant"] for t in found] == ["default", "other"]
    assert [t["sessions"] for t in found] == [2, 1]
    alpha, beta = api(cli_url, "session", "alpha"), api(cli_url, "session", "beta")
    assert found[0]["stored_messages"] == alpha.stored_messages + beta.stored_messages
    table = rows(ok("tenants", "--url", cli_url).stdout)
    assert [cells[:2] for cells in table] == [["default", "2"], ["other", "1"]]
    assert_one_line_error(invoke("tenants", "--url", cli_url, "--tenant", "x"), contains="--tenant")


def test_show_history_all_limit_and_json(cli_url: str) -> None:
    compact_alpha(cli_url)
    active = ok("show", "alpha", "--url", cli_url, "--json").json()
    assert [m["seq"] for m in active] == [m.seq for m in api(cli_url, "history", "alpha")]
    everything = ok("show", "alpha", "--url", cli_url, "--all", "--json").json()
    assert len(everything) == 13 > len(active)
    table = ok("show", "alpha", "--url", cli_url, "--all")
    assert "13 stored messages" in table.stdout
    marked = [line for line in table.stdout.splitlines()[2:] if "excluded: " in line]
    assert len(marked) == sum(1 for m in everything if m["excluded"])
    newest = ok("show", "alpha", "--url", cli_url, "--limit", "2", "--json").json()
    assert [m["seq"] for m in newest] == [12, 13]
    assert len(rows(ok("show", "alpha", "--url", cli_url, "--limit", "2").stdout)) == 2
    assert_one_line_error(invoke("show", "nope", "--url", cli_url), contains="'nope' not found")
    gamma = invoke("show", "gamma", "--url", cli_url)  # another tenant's session
    assert_one_line_error(gamma, contains="not found")
    for bad in (("--all", "--context"), ("--strategy", WINDOW), ("--limit", "0")):
        result = invoke("show", "alpha", "--url", cli_url, *bad)
        assert_one_line_error(result)
        assert result.returncode == 2


def test_show_context_uses_the_given_then_the_recorded_strategy(cli_url: str) -> None:
    unknown = ok("show", "alpha", "--url", cli_url, "--context")
    assert "no strategy known" in unknown.stdout
    assert f"{len(api(cli_url, 'context', 'alpha'))} messages" in unknown.stdout
    given = ok("show", "alpha", "--url", cli_url, "--context", "--strategy", WINDOW, "--json")
    expected = api(cli_url, "context", "alpha", strategy=WINDOW)
    assert MESSAGES_ADAPTER.validate_python(given.json()) == expected
    assert len(expected) < len(api(cli_url, "context", "alpha"))
    api(cli_url, "set_metadata", "alpha", {BEFORE_STRATEGY_KEY: WINDOW})
    recorded = ok("show", "alpha", "--url", cli_url, "--context")
    assert f"the provider's strategy {WINDOW}" in recorded.stdout
    assert len(rows(recorded.stdout)) == len(expected) + 1  # the rows and the closing line
    limited = ok("show", "alpha", "--url", cli_url, "--context", "--limit", "2", "--json")
    assert MESSAGES_ADAPTER.validate_python(limited.json()) == expected[-2:]
    ok("recount", "alpha", "--tokenizer", "character_estimator", "--url", cli_url)
    for named in ((), ("--tokenizer", "character_estimator")):
        recounted = ok("show", "alpha", "--url", cli_url, "--context", *named)
        assert f"{len(expected)} messages" in recounted.stdout
    mismatch = invoke("show", "alpha", "--url", cli_url, "--context", "--tokenizer", "o200k_base")
    assert_one_line_error(mismatch, contains="recount")
    bad = invoke("show", "alpha", "--url", cli_url, "--context", "--tokenizer", "nonesuch")
    assert_one_line_error(bad, contains="--tokenizer")
    assert bad.returncode == 2
    refused = invoke("show", "alpha", "--url", cli_url, "--context", "--strategy", "pipeline")
    assert_one_line_error(refused, contains="invalid --strategy: pipeline")
    assert refused.returncode == 2


def test_compact_dry_run_writes_nothing_then_compact_writes_one_event(cli_url: str) -> None:
    before = api(cli_url, "stats", "alpha")
    what_if = ok("compact", "alpha", "--strategy", WINDOW, "--dry-run", "--url", cli_url, "--json")
    shape = what_if.json()
    assert shape["strategy"] == WINDOW and shape["session_id"] == "alpha"
    assert shape["tokens_before"] == before.active_tokens > shape["tokens_after"]
    assert {g["action"].split(":")[0] for g in shape["groups"]} == {"excluded"}
    table = ok("compact", "alpha", "--strategy", WINDOW, "--dry-run", "--url", cli_url)
    assert "dry run: nothing written" in table.stdout
    for group in shape["groups"]:
        assert any(line.startswith(group["group_id"] + " ") for line in table.stdout.splitlines())
    assert api(cli_url, "stats", "alpha") == before
    event = compact_alpha(cli_url)
    assert api(cli_url, "audit", "alpha") == [event]
    assert event.tokens_after == shape["tokens_after"] and event.phase == "manual"
    again = ok("compact", "alpha", "--strategy", WINDOW, "--url", cli_url)
    assert again.stdout.startswith("Nothing to compact: sliding-window changes nothing now.")
    assert ok("compact", "alpha", "--strategy", WINDOW, "--url", cli_url, "--json").json() is None
    for bad, code in (
        (("--strategy", "nonesuch"), 2),
        (("--strategy", "truncation:x=1"), 2),
        ((), 2),
    ):
        result = invoke("compact", "alpha", "--url", cli_url, *bad)
        assert_one_line_error(result)
        assert result.returncode == code


def test_audit_excluded_and_why_explain_an_event(cli_url: str) -> None:
    assert ok("audit", "--url", cli_url).stdout == "No compaction events of tenant default.\n"
    event = compact_alpha(cli_url)
    listed = ok("audit", "alpha", "--url", cli_url, "--json").json()
    assert [CompactionEvent.model_validate(e) for e in listed] == [event]
    for filters in (
        ("--phase", "manual"),
        ("--since", "1h"),
        ("--strategy", "sliding-window"),
        ("--strategy", event.strategy),
        ("--limit", "1"),
    ):
        found = ok("audit", "alpha", "--url", cli_url, "--json", *filters).json()
        assert [e["id"] for e in found] == [event.id], filters
    for filters in (("--phase", "after_run"), ("--since", "2999-01-01"), ("--strategy", "x")):
        assert ok("audit", "--url", cli_url, "--json", *filters).json() == [], filters
    table = ok("audit", "alpha", "--url", cli_url).stdout
    assert event.id in table and "sliding-window" in table and "manual" in table
    assert f"{event.tokens_before:,} → {event.tokens_after:,}" in table
    excluded = ok("excluded", "alpha", "--url", cli_url, "--json").json()
    assert [ExcludedGroup.model_validate(g) for g in excluded] == api(cli_url, "excluded", "alpha")
    assert {g["event_id"] for g in excluded} == {event.id}
    table = ok("excluded", "alpha", "--url", cli_url).stdout
    assert [cells[0] for cells in rows(table)] == [g["group_id"] for g in excluded]
    nothing = ok("excluded", "beta", "--url", cli_url).stdout
    assert nothing == "Nothing of beta is excluded.\n"
    first = api(cli_url, "history", "alpha", include_excluded=True)[1]  # question 1
    assert first.excluded
    why = ok("why", "alpha", first.message_id, "--url", cli_url, "--json").json()
    assert WhyResult.model_validate(why) == api(cli_url, "why", "alpha", first.message_id)
    said = ok("why", "alpha", first.message_id, "--url", cli_url).stdout
    assert said.startswith(f"{first.message_id} is not sent: ")
    assert f"chatledger restore alpha --group {first.group_id}" in said
    assert_one_line_error(invoke("why", "alpha", "nope", "--url", cli_url), contains="nope")
    for command in ("audit", "excluded"):
        assert_one_line_error(invoke(command, "nope", "--url", cli_url), contains="nope")
    assert_one_line_error(invoke("audit", "--phase", "sometimes", "--url", cli_url))


def test_stats_of_a_session_is_an_object_without_a_sessions_row(cli_url: str) -> None:
    one = ok("stats", "alpha", "--url", cli_url, "--json").json()
    assert Stats.model_validate(one) == api(cli_url, "stats", "alpha")
    whole = ok("stats", "--url", cli_url, "--json").json()
    assert Stats.model_validate(whole) == api(cli_url, "stats")
    table = ok("stats", "alpha", "--url", cli_url).stdout
    labels = [line.split("  ")[0] for line in table.splitlines()[2:]]
    assert labels == ["messages", "groups", "tokens", "compaction events"]
    assert f"{one['stored_tokens']:,}" in table
    tenant = ok("stats", "--url", cli_url).stdout
    assert any(line.split()[:2] == ["sessions", "2"] for line in tenant.splitlines())
    assert_one_line_error(invoke("stats", "nope", "--url", cli_url), contains="nope")


def test_restore_pins_and_reports_the_budget_then_unpin(cli_url: str) -> None:
    event = compact_alpha(cli_url)
    neither = invoke("restore", "alpha", "--url", cli_url)
    assert_one_line_error(neither, contains="--group")
    assert neither.returncode == 2
    both = invoke("restore", "alpha", "--group", "g", "--event", event.id, "--url", cli_url)
    assert both.returncode == 2
    group = event.excluded[0]
    done = ok("restore", "alpha", "--group", group, "--url", cli_url)
    assert "1 group pinned" in done.stdout and "chatledger unpin alpha" in done.stdout
    assert "active tokens now" in done.stdout and "no compaction with a token budget" in done.stdout
    pinned = ok("show", "alpha", "--url", cli_url).stdout
    assert any("pinned" in line for line in pinned.splitlines()[2:])
    assert ok("pin", "alpha", group, "--url", cli_url).stdout == "1 already pinned\n"
    unpinned = ok("unpin", "alpha", group, "--url", cli_url, "--json").json()
    assert unpinned == {"changed": [group]}
    assert ok("pin", "alpha", group, "--url", cli_url).stdout == f"pinned {group}\n"
    assert ok("unpin", "alpha", group, "--url", cli_url).stdout == f"unpinned {group}\n"
    undo = ok("restore", "alpha", "--event", event.id, "--url", cli_url, "--json").json()
    assert CompactionEvent.model_validate(undo).phase == "restore"
    assert api(cli_url, "excluded", "alpha") == []
    nothing = ok("restore", "alpha", "--group", group, "--url", cli_url)
    assert nothing.stdout.startswith("Nothing to restore")
    assert_one_line_error(invoke("pin", "alpha", "--url", cli_url))
    assert_one_line_error(invoke("restore", "alpha", "--event", "evt_nope", "--url", cli_url))


def test_restore_warns_when_over_the_budget_of_the_last_window_compaction(cli_url: str) -> None:
    window = "context-window:max_context_window_tokens=400,max_output_tokens=50"
    event = CompactionEvent.model_validate(
        ok("compact", "alpha", "--strategy", window, "--url", cli_url, "--json").json()
    )
    done = invoke("restore", "alpha", "--event", event.id, "--url", cli_url)
    assert done.returncode == 0, done
    assert f"the budget of the last compaction (context-window, event {event.id})" in done.stdout
    assert done.stderr.startswith("warning: the context is over that budget")


def test_delete_asks_or_needs_yes(cli_url: str) -> None:
    refused = invoke("delete", "beta", "--url", cli_url)
    assert_one_line_error(refused, contains="--yes")
    assert refused.returncode == 2
    assert api(cli_url, "session", "beta").session_id == "beta"
    deleted = ok("delete", "beta", "--yes", "--url", cli_url, "--json").json()
    assert deleted == {"deleted": "beta", "messages": 5, "forks": []}
    assert [s.session_id for s in api(cli_url, "sessions")] == ["alpha"]
    said = ok("delete", "alpha", "--yes", "--url", cli_url).stdout
    assert said == "deleted session alpha (13 messages)\n"
    assert_one_line_error(invoke("delete", "alpha", "--yes", "--url", cli_url), contains="alpha")


def test_recount_changes_the_sessions_tokenizer(cli_url: str) -> None:
    before = api(cli_url, "session", "beta")
    done = ok("recount", "beta", "--tokenizer", "character_estimator", "--url", cli_url, "--json")
    after = SessionInfo.model_validate(done.json())
    assert after.tokenizer != before.tokenizer and after.stored_messages == before.stored_messages
    for read in (("show", "beta"), ("show", "beta", "--all"), ("show", "beta", "--context")):
        assert f"{before.stored_messages} " in ok(*read, "--url", cli_url).stdout  # any tokenizer
    said = ok("recount", "beta", "--tokenizer", before.tokenizer, "--url", cli_url).stdout
    assert said.startswith(f"recounted beta with {before.tokenizer} (was {after.tokenizer}): ")
    assert said.rstrip().endswith(f"→ {before.stored_tokens:,} tokens")
    bad = invoke("recount", "beta", "--tokenizer", "nonesuch", "--url", cli_url)
    assert bad.returncode == 2
    assert invoke("recount", "beta", "--url", cli_url).returncode == 2


@pytest.fixture
def blank_url(empty_db_url: str) -> str:
    """A database without chatledger's schema; on SQLite, an empty file."""
    path = sqlite_file(empty_db_url)
    if path is not None:
        Path(path).touch()
    return empty_db_url


def test_db_commands(blank_url: str) -> None:
    from store.sql.migrations.revisions import head_revisions, revision_history

    empty_db_url = blank_url

    revisions = [str(r["revision"]) for r in revision_history()]
    shipped = ok("db", "history", "--json").json()
    assert [r["revision"] for r in shipped] == revisions and not any(r["current"] for r in shipped)
    assert ok("db", "current", "--url", empty_db_url, "--json").json()["current"] == []
    assert_one_line_error(invoke("db", "check", "--url", empty_db_url), contains="not current")
    assert_one_line_error(invoke("db", "downgrade", "base", "--url", empty_db_url))
    first = ok("db", "upgrade", revisions[0], "--url", empty_db_url, "--json").json()
    assert first["current"] == [revisions[0]] and first["up_to_date"] is (len(revisions) == 1)
    marked = ok("db", "history", "--url", empty_db_url)
    assert any(line.split()[:2] == [revisions[0], "*"] for line in marked.stdout.splitlines())
    old = ok("db", "upgrade", "--revision", "head", "--url", empty_db_url)
    assert "deprecated" in old.stderr and "up to date" in old.stdout
    both = invoke("db", "upgrade", revisions[0], "--revision", "head", "--url", empty_db_url)
    assert both.returncode == 2
    state = ok("db", "check", "--url", empty_db_url, "--json").json()
    assert state["current"] == list(head_revisions()) and state["up_to_date"] is True
    down = ok("db", "downgrade", "base", "--url", empty_db_url, "--json").json()
    assert down["current"] == []
    assert ok("db", "upgrade", "--url", empty_db_url).stdout.rstrip().endswith("up to date")
    assert invoke("db", "downgrade", "--url", empty_db_url).returncode == 2  # REVISION needed


def test_demo_runs_then_refuses_its_session_a_second_time(db_url: str) -> None:
    args = ("demo", "--turns", "4", "--session", "d", "--url", db_url, "--seed", "3")
    played = ok(*args, "--window", "4096", "--output-tokens", "512")
    assert len([line for line in played.stdout.splitlines() if line.startswith("turn ")]) == 4
    assert f"chatledger show d --context --url {db_url}" in played.stdout
    again = invoke(*args)
    assert_one_line_error(again, contains="already holds")
    assert "chatledger delete d" in again.stderr
    assert f"already holds {api(db_url, 'session', 'd').stored_messages:,} messages" in again.stderr
    spec = api(db_url, "get_metadata", "d")[BEFORE_STRATEGY_KEY]
    assert spec.startswith("context-window:")
    sent = ok("show", "d", "--context", "--url", db_url)
    assert f"(projected with the provider's strategy {spec.replace(',', ', ')})" in sent.stdout
    assert f"{len(api(db_url, 'context', 'd', strategy=spec))} messages" in sent.stdout
    records = ok("demo", "--turns", "2", "--url", db_url, "--json").json()
    assert [r["turn"] for r in records] == [1, 2]
    assert {s.session_id for s in api(db_url, "sessions")} - {"d"}  # a new demo-<hex> session


def test_version_and_help() -> None:
    from importlib.metadata import version

    for flag in ("--version", "-V"):
        assert ok(flag).stdout == f"chatledger {version('chatledger')}\n"
    assert ok("version").stdout == f"chatledger {version('chatledger')}\n"
    for flag in ("-h", "--help"):
        helped = ok(flag).stdout
        assert helped.startswith("Usage: chatledger")
        assert "<bool>" not in helped and "<str>" not in helped
    for command in ("sessions", "show", "compact", "db", "db upgrade"):
        text = ok(*command.split(), "-h").stdout
        assert text.startswith(f"Usage: chatledger {command}"), text
        assert "<bool>" not in text and "<str>" not in text and "TEXT" not in text


def test_tenant_option_reaches_every_session_command(cli_url: str) -> None:
    other = ("--url", cli_url, "--tenant", "other")
    first = api(cli_url, "history", "gamma", tenant="other")[1]
    for args in (
        ("show", "gamma"),
        ("show", "gamma", "--context"),
        ("audit", "gamma"),
        ("excluded", "gamma"),
        ("why", "gamma", first.message_id),
        ("stats", "gamma"),
        ("compact", "gamma", "--strategy", WINDOW, "--dry-run"),
        ("pin", "gamma", first.group_id),
        ("unpin", "gamma", first.group_id),
        ("recount", "gamma", "--tokenizer", "o200k_base"),
    ):
        assert invoke(*args, *other).returncode == 0, args
        assert_one_line_error(invoke(*args, "--url", cli_url), contains="'gamma' not found")
    assert ok("stats", *other, "--json").json()["sessions"] == 1
    assert ok("delete", "gamma", "--yes", *other).stdout.startswith("deleted session gamma")
    played = ok("demo", "--turns", "1", "--session", "t", *other)
    assert "chatledger audit t --url " in played.stdout and "--tenant other" in played.stdout
    assert [s.session_id for s in api(cli_url, "sessions", tenant="other")] == ["t"]
