"""The plain (non-JSON) and refusal paths of ``redact``, ``compact``, ``db history``,
``import --compact`` and ``show``, through :func:`store.cli.main` in this process (stdout
and stderr are not terminals), on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from store import HistoryStore
from store.models import StoredMessage
from store.rules.erasure import REDACTED_TEXT
from store.sql.migrations.revisions import revision_history
from strategies.messages import (
    DataContent,
    Message,
    OtherContent,
    ReasoningContent,
    UriContent,
)
from tests.cli.helpers import (
    api,
    assert_one_line_error,
    conversation,
    invoke,
    ok,
    rows,
    run_api,
)

WINDOW = "sliding-window:keep_last_turns=1"


@pytest.fixture
def cli_url(db_url: str) -> Iterator[str]:
    """``db_url`` with session ``alpha`` (3 tool turns) of tenant default."""

    async def fill(store: HistoryStore) -> None:
        await store.append("alpha", conversation(3))

    run_api(db_url, fill)
    yield db_url


def _history(url: str, session: str) -> list[StoredMessage]:
    return list(api(url, "history", session, include_excluded=True))


def test_redact_dry_run_json_lists_the_ids_and_writes_nothing(cli_url: str) -> None:
    users = [m.message_id for m in _history(cli_url, "alpha") if m.role == "user"]
    preview = ok(
        "redact", "alpha", users[0], users[1], users[0], "--reason", "gdpr", "--dry-run",
        "--json", "--url", cli_url,
    )  # fmt: skip
    assert preview.json() == {
        "session_id": "alpha",
        "dry_run": True,
        "would_redact": [users[0], users[1]],  # duplicates dropped, order kept
    }
    assert all(m.message.text != REDACTED_TEXT for m in _history(cli_url, "alpha"))


def test_redact_without_yes_off_a_terminal_is_a_usage_error(cli_url: str) -> None:
    first = next(m.message_id for m in _history(cli_url, "alpha") if m.role == "user")
    refused = invoke("redact", "alpha", first, "--reason", "gdpr", "--url", cli_url)
    assert_one_line_error(refused, contains="not on a terminal, pass --yes to confirm")
    assert refused.returncode == 2
    assert "Redact 1 message of session alpha (tenant default) for good?" in refused.stderr
    stored = {m.message_id: m for m in _history(cli_url, "alpha")}
    assert stored[first].message.text == "question 1"


def test_redact_with_yes_and_vacuum_prints_what_it_did(cli_url: str) -> None:
    first = next(m.message_id for m in _history(cli_url, "alpha") if m.role == "user")
    done = ok("redact", "alpha", first, "--reason", "gdpr", "--yes", "--vacuum", "--url", cli_url)
    assert done.stdout.startswith("redacted 1 message and 0 ")
    assert "{" not in done.stdout  # a sentence, not the JSON report
    stored = {m.message_id: m for m in _history(cli_url, "alpha")}
    assert stored[first].message.text == REDACTED_TEXT
    [event] = api(cli_url, "audit", "alpha")
    assert event.strategy == "redact"


def test_compact_prints_the_applied_event_and_its_token_change(cli_url: str) -> None:
    before = api(cli_url, "stats", "alpha")
    done = ok("compact", "alpha", "--strategy", WINDOW, "--url", cli_url)
    [event] = api(cli_url, "audit", "alpha")
    assert event.outcome == "applied" and event.phase == "manual"
    assert event.tokens_before == before.active_tokens > event.tokens_after
    line = done.stdout.strip()
    assert line.startswith(f"event {event.id}: {len(event.excluded)} excluded")
    assert line.endswith(
        f"; tokens {event.tokens_before:,} → {event.tokens_after:,} (saved {event.tokens_saved:,})"
    )


def test_db_history_without_url_marks_no_revision(tmp_path: Path) -> None:
    shipped = revision_history()
    table = ok("db", "history")
    assert table.stdout.splitlines()[0] == "Schema revisions, oldest first"
    assert [cells[0] for cells in rows(table.stdout)] == [str(r["revision"]) for r in shipped]
    assert "*" not in table.stdout and "(* the revision" not in table.stdout
    listed = ok("db", "history", "--json").json()
    assert [r["revision"] for r in listed] == [r["revision"] for r in shipped]
    assert not any(r["current"] for r in listed)


def _chat_file(tmp_path: Path) -> Path:
    path = tmp_path / "chats.jsonl"
    messages: list[dict[str, str]] = [{"role": "system", "content": "You are terse."}]
    for turn in range(1, 4):
        messages.append({"role": "user", "content": f"question {turn} " + "word " * 40})
        messages.append({"role": "assistant", "content": f"answer {turn} " + "word " * 40})
    path.write_text(json.dumps({"id": "c1", "messages": messages}) + "\n")
    return path


def test_import_compact_refuses_a_bad_spec_before_reading(db_url: str, tmp_path: Path) -> None:
    source = _chat_file(tmp_path)
    bad = invoke("import", str(source), "--compact", "nonesuch", "--url", db_url)
    assert_one_line_error(bad, contains="invalid --compact")
    assert bad.returncode == 2
    assert api(db_url, "sessions") == []


def test_import_compact_compacts_each_imported_session(db_url: str, tmp_path: Path) -> None:
    source = _chat_file(tmp_path)
    done = ok(
        "import",
        str(source),
        "--format",
        "openai-chat",
        "--compact",
        WINDOW,
        "--create",
        "--url",
        db_url,
    )
    assert done.stdout.startswith("1 session, 7 messages")
    [session] = api(db_url, "sessions")
    [event] = api(db_url, "audit", session.session_id)
    assert event.outcome == "applied" and event.excluded
    stats = api(db_url, "stats", session.session_id)
    assert stats.active_tokens == event.tokens_after < event.tokens_before


def test_show_previews_every_kind_of_content(db_url: str) -> None:
    async def fill(store: HistoryStore) -> None:
        await store.append(
            "mixed",
            [
                Message.text_message("user", "look"),
                Message(role="assistant", contents=[ReasoningContent()]),
                Message(role="assistant", contents=[ReasoningContent(text="thinking hard")]),
                Message(
                    role="assistant", contents=[DataContent(data="aGk=", media_type="image/png")]
                ),
                Message(role="assistant", contents=[UriContent(uri="https://example.invalid/a")]),
                Message(role="assistant", contents=[OtherContent(kind="hosted_search")]),
            ],
        )

    run_api(db_url, fill)
    shown = ok("show", "mixed", "--url", db_url).stdout
    for preview in (
        "reasoning: …",
        "reasoning: thinking hard",
        "[data image/png]",
        "[uri]",
        "[hosted_search]",
    ):
        assert preview in shown, (preview, shown)
    assert "[uri ]" not in shown  # no media type: no dangling space


def test_compact_blocked_by_pins_says_nothing_changed(cli_url: str) -> None:
    async def pin_all(store: HistoryStore) -> None:
        view = await store.view("alpha")
        await store.pin("alpha", [g.group_id for g in view.groups])

    run_api(cli_url, pin_all)
    before = api(cli_url, "stats", "alpha")
    done = invoke(
        "compact", "alpha", "--strategy", "truncation:max_n=1,compact_to=1", "--url", cli_url
    )
    assert done.returncode == 0, done
    [event] = api(cli_url, "audit", "alpha")
    assert event.outcome == "blocked"
    why = "; ".join(d.message for d in event.diagnostics)
    assert "pinned" in why
    assert done.stdout == f"event {event.id}: blocked: {why}; nothing changed\n"
    after = api(cli_url, "stats", "alpha")
    assert after.active_tokens == before.active_tokens and after.events == before.events + 1
