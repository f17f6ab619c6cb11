"""``chatledger db upgrade | current | check`` through the real entry point."""

from __future__ import annotations

import asyncio
from pathlib import Path

from store.sql.migrations import downgrade
from store.sql.migrations.revisions import head_revisions
from tests.cli.helpers import assert_one_line_error, chatledger


def test_upgrade_creates_the_database_then_current_and_check_agree(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/new.db"
    upgraded = chatledger("db", "upgrade", "--url", url)
    assert upgraded.returncode == 0, upgraded.stderr
    assert (tmp_path / "new.db").is_file()
    for revision in head_revisions():
        assert revision in upgraded.stdout
    current = chatledger("db", "current", "--url", url, "--json")
    assert current.returncode == 0, current.stderr
    status = current.json()
    assert status["current"] == list(head_revisions())
    assert status["up_to_date"] is True
    checked = chatledger("db", "check", "--url", url)
    assert checked.returncode == 0
    assert "up to date" in checked.stdout


def test_check_fails_when_the_schema_is_behind(url: str) -> None:
    asyncio.run(downgrade(url, revision="base"))
    assert_one_line_error(chatledger("db", "check", "--url", url), contains="db upgrade")
    behind = chatledger("db", "check", "--url", url, "--json")
    assert behind.returncode == 1
    status = behind.json()
    assert status["current"] == [] and status["up_to_date"] is False
    # A read refuses a database without chatledger's tables, and creates none.
    assert_one_line_error(chatledger("sessions", "--url", url), contains="no chatledger schema")
    assert chatledger("db", "check", "--url", url).returncode == 1


def test_db_commands_take_the_url_from_the_environment(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/env.db"
    assert chatledger("db", "upgrade", env={"CHATLEDGER_URL": url}).returncode == 0
    assert (tmp_path / "env.db").is_file()
    result = chatledger("db", "check", env={"CHATLEDGER_URL": url, "CHATLEDGER_TENANT": "t"})
    assert result.returncode == 0


def test_current_on_a_missing_file_is_an_error_and_creates_nothing(tmp_path: Path) -> None:
    result = chatledger("db", "current", "--url", f"sqlite:///{tmp_path}/missing.db")
    assert_one_line_error(result, contains="no database")
    assert not (tmp_path / "missing.db").exists()


def test_an_upgrade_across_a_revision_that_is_not_backward_compatible_prints_the_deploy_order(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/old.db"
    assert chatledger("db", "upgrade", "0005", "--url", url).returncode == 0
    upgraded = chatledger("db", "upgrade", "--url", url)
    assert upgraded.returncode == 0, upgraded.stderr
    assert "revisions 0006, 0007, 0008, 0015 are not backward compatible" in upgraded.stderr
    assert "Deploy order: stop the processes of the earlier release" in upgraded.stderr
    again = chatledger("db", "upgrade", "--url", url)  # nothing applied: nothing to say
    assert again.returncode == 0 and "backward compatible" not in again.stderr
    fresh = chatledger("db", "upgrade", "--url", f"sqlite:///{tmp_path}/new.db")
    assert fresh.returncode == 0 and "backward compatible" not in fresh.stderr
