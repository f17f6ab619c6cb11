"""A family of branches comes home through the ``jsonl`` format: a parent, its fork and a
fork of the fork, exported and imported into a fresh store, are a family again that
shares its rows (a fork stores only its own messages). On SQLite and PostgreSQL: the
family is built under another tenant of the test's database, and imported into the
default tenant, which holds nothing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from store import HistoryStore
from store.contract import HistoryBackend
from store.errors import InvalidSource
from store.exporting import export_sessions
from store.importing import import_sources
from strategies.messages import Message
from strategies.tokenizers import CharacterEstimatorTokenizer
from tests.groups.support import assistant, call, result, tool, user

FAMILY = ["p", "f", "g"]
"""The parent, its fork at ``a2``, and the fork's fork at ``u3f``."""


@pytest.fixture
async def source(db_url: str) -> AsyncIterator[HistoryStore]:
    """The family, under the tenant ``source`` of the test's database."""
    async with HistoryStore.open(
        db_url, tenant="source", tokenizer=CharacterEstimatorTokenizer()
    ) as opened:
        await opened.append(
            "p",
            [
                user("u1", "look it up"),
                assistant("a1", call("c1")),
                tool("t1", result("c1", "found")),
                assistant("a2", "here it is"),
                user("u3", "thanks"),
                assistant("a3", "welcome"),
            ],
        )
        await opened.fork("p", at="a2", new_session_id="f")
        await opened.append("f", [user("u3f", "and the other one?"), assistant("a3f", "this")])
        await opened.fork("f", at="u3f", new_session_id="g")
        await opened.append("g", [assistant("a3g", "that one")])
        yield opened


async def export(store: HistoryStore, ids: list[str], path: Path) -> Path:
    with path.open("w", encoding="utf-8") as out:
        async for chunk in export_sessions(store, ids, format="jsonl"):
            out.write(chunk)
    return path


async def histories(store: HistoryBackend, ids: list[str]) -> dict[str, list[Message]]:
    return {s: [row.message for row in await store.history(s, include_excluded=True)] for s in ids}


async def stored_rows(store: HistoryStore) -> int:
    """The rows of ``chatledger_messages`` under the store's tenant."""
    statement = text("SELECT count(*) FROM chatledger_messages WHERE tenant = :tenant")
    async with store.engine.connect() as conn:
        return int((await conn.execute(statement, {"tenant": "default"})).scalar_one())


async def assert_family(store: HistoryStore, expected: dict[str, list[Message]]) -> None:
    assert await histories(store, FAMILY) == expected
    f, g = await store.session("f"), await store.session("g")
    assert (f.parent_session_id, f.fork_message_id) == ("p", "a2")
    assert (g.parent_session_id, g.fork_message_id) == ("f", "u3f")
    assert [(b.session_id, b.relation, b.fork_message_id) for b in await store.branches("p")] == [
        ("f", "fork", "a2")
    ]
    assert [(b.session_id, b.relation) for b in await store.branches("f")] == [
        ("p", "parent"),
        ("g", "fork"),
    ]
    # the parent's rows, then each fork's own: not the sum of their histories
    assert await stored_rows(store) == 6 + 2 + 1
    assert (await store.doctor()).healthy


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


async def test_the_first_line_of_a_fork_names_its_parent_and_fork_message(
    source: HistoryStore, tmp_path: Path
) -> None:
    path = await export(source, FAMILY, tmp_path / "family.jsonl")
    first: dict[str, dict[str, Any]] = {}
    for line in lines(path):
        first.setdefault(line["session_id"], line)
        if line is not first[line["session_id"]]:
            assert "fork" not in line
    assert "fork" not in first["p"]
    assert first["f"]["fork"] == {"parent_session_id": "p", "fork_message_id": "a2"}
    assert first["g"]["fork"] == {"parent_session_id": "f", "fork_message_id": "u3f"}


@pytest.mark.parametrize("order", [FAMILY, ["g", "f", "p"], ["f", "p", "g"]])
async def test_a_family_comes_home_a_family_in_any_order(
    source: HistoryStore, store: HistoryStore, tmp_path: Path, order: list[str]
) -> None:
    expected = await histories(source, FAMILY)
    path = await export(source, order, tmp_path / "family.jsonl")
    report = await import_sources(store, [path])
    assert report.warnings == []
    assert sorted(report.session_ids) == sorted(FAMILY)
    assert (report.new, report.already_stored) == (sum(map(len, expected.values())), 0)
    await assert_family(store, expected)
    again = await import_sources(store, [path])
    assert (again.new, again.already_stored) == (0, report.new)
    assert again.warnings == []
    await assert_family(store, expected)


async def test_a_family_across_files_forks_first(
    source: HistoryStore, store: HistoryStore, tmp_path: Path
) -> None:
    expected = await histories(source, FAMILY)
    files = [await export(source, [s], tmp_path / f"{s}.jsonl") for s in ["g", "f", "p"]]
    report = await import_sources(store, files)
    assert report.warnings == []
    await assert_family(store, expected)
    again = await import_sources(store, list(reversed(files)))
    assert again.new == 0
    await assert_family(store, expected)


async def test_a_fork_of_a_stored_parent_shares_its_rows(
    source: HistoryStore, store: HistoryStore, tmp_path: Path
) -> None:
    expected = await histories(source, FAMILY)
    parent = await export(source, ["p"], tmp_path / "p.jsonl")
    forks = await export(source, ["f", "g"], tmp_path / "forks.jsonl")
    await import_sources(store, [parent])
    report = await import_sources(store, [forks])
    assert report.warnings == []
    assert report.new == len(expected["f"]) + len(expected["g"])
    await assert_family(store, expected)


async def test_a_fork_without_its_parent_is_a_root_said_in_one_line(
    source: HistoryStore, store: HistoryStore, tmp_path: Path
) -> None:
    expected = await histories(source, ["f"])
    path = await export(source, ["f"], tmp_path / "f.jsonl")
    report = await import_sources(store, [path])
    assert len(report.warnings) == 1
    assert (
        "session 'f' is a fork of 'p' which is neither imported nor stored" in (report.warnings[0])
    )
    assert "imported as a root" in report.warnings[0]
    assert "\n" not in report.warnings[0]
    assert await histories(store, ["f"]) == expected
    assert (await store.session("f")).parent_session_id is None
    assert await stored_rows(store) == len(expected["f"])
    again = await import_sources(store, [path])
    assert (again.new, again.warnings) == (0, [])


async def test_a_fork_whose_parent_differs_before_the_cut_is_a_root(
    source: HistoryStore, store: HistoryStore, tmp_path: Path
) -> None:
    expected = await histories(source, ["f"])
    await store.append("p", [user("u1", "another conversation"), assistant("a2", "here")])
    path = await export(source, ["f"], tmp_path / "f.jsonl")
    report = await import_sources(store, [path])
    assert len(report.warnings) == 1
    assert "whose conversation up to 'a2' is not the fork's" in report.warnings[0]
    assert await histories(store, ["f"]) == expected
    assert (await store.session("f")).parent_session_id is None


async def test_a_parent_rewound_since_the_fork_holds_no_fork_point(
    source: HistoryStore, store: HistoryStore, tmp_path: Path
) -> None:
    # the fork's prefix went to the parent's tail, which is not exported: the fork comes
    # home a root, whole
    await source.rewind("p", to="u1")
    await source.append("p", [assistant("a2", "something else")])
    expected = await histories(source, ["p", "f"])
    path = await export(source, ["p", "f"], tmp_path / "family.jsonl")
    report = await import_sources(store, [path])
    assert len(report.warnings) == 1
    assert "is not the fork's" in report.warnings[0]
    assert await histories(store, ["p", "f"]) == expected
    assert await stored_rows(store) == len(expected["p"]) + len(expected["f"])


async def test_old_files_without_forks_still_import(
    source: HistoryStore, store: HistoryStore, tmp_path: Path
) -> None:
    expected = await histories(source, FAMILY)
    path = await export(source, FAMILY, tmp_path / "family.jsonl")
    old = tmp_path / "old.jsonl"
    with old.open("w", encoding="utf-8") as out:
        for line in lines(path):
            line.pop("fork", None)
            out.write(json.dumps(line) + "\n")
    report = await import_sources(store, [old])
    assert report.warnings == []
    assert await histories(store, FAMILY) == expected
    assert (await store.session("f")).parent_session_id is None
    assert await stored_rows(store) == sum(map(len, expected.values()))


async def test_a_fork_key_on_a_later_line_must_agree(
    source: HistoryStore, store: HistoryStore, tmp_path: Path
) -> None:
    path = await export(source, ["f"], tmp_path / "f.jsonl")
    edited = lines(path)
    edited[1]["fork"] = {"parent_session_id": "other", "fork_message_id": "a2"}
    path.write_text("".join(json.dumps(line) + "\n" for line in edited), encoding="utf-8")
    with pytest.raises(InvalidSource, match="line 2: fork differs"):
        await import_sources(store, [path])
    assert await stored_rows(store) == 0


async def test_a_dry_run_says_what_a_fork_would_be(
    source: HistoryStore, store: HistoryStore, tmp_path: Path
) -> None:
    path = await export(source, ["g"], tmp_path / "g.jsonl")
    report = await import_sources(store, [path], dry_run=True)
    assert len(report.warnings) == 1 and "session 'g' is a fork of 'f'" in report.warnings[0]
    assert await stored_rows(store) == 0


async def test_a_long_fork_cut_past_the_first_run_of_lines(
    source: HistoryStore, store: HistoryStore, tmp_path: Path
) -> None:
    # the reader hands a session on 1,000 lines at a time and the writer appends 2,000
    # messages a transaction: the cut and the fork's own messages span both
    turns = [m for i in range(700) for m in (user(f"lu{i}", "q"), assistant(f"la{i}", "a"))]
    await source.append("long", turns)
    await source.fork("long", at="la600", new_session_id="long-f")
    own = [m for i in range(600) for m in (user(f"fu{i}", "q"), assistant(f"fa{i}", "a"))]
    await source.append("long-f", own)
    expected = await histories(source, ["long", "long-f"])
    path = await export(source, ["long-f", "long"], tmp_path / "long.jsonl")
    report = await import_sources(store, [path])
    assert report.warnings == []
    assert await histories(store, ["long", "long-f"]) == expected
    assert (await store.session("long-f")).fork_message_id == "la600"
    assert await stored_rows(store) == len(turns) + len(own)
    assert (await import_sources(store, [path])).new == 0


async def test_a_fork_of_an_empty_session_is_a_root(
    source: HistoryStore, store: HistoryStore, tmp_path: Path
) -> None:
    await source.set_metadata("e", {"k": 1})
    await source.fork("e", new_session_id="e-f")
    await source.append("e-f", [user("eu1", "hello")])
    path = await export(source, ["e-f"], tmp_path / "e.jsonl")
    assert lines(path)[0]["fork"] == {"parent_session_id": "e", "fork_message_id": None}
    report = await import_sources(store, [path])
    assert len(report.warnings) == 1 and "forked when 'e' held no message" in report.warnings[0]
    assert await histories(store, ["e-f"]) == {"e-f": [user("eu1", "hello")]}


@pytest.mark.parametrize(
    "given", [[], {"fork_message_id": "a2"}, {"parent_session_id": "p", "fork_message_id": 3}]
)
async def test_a_malformed_fork_key_is_refused_naming_its_line(
    source: HistoryStore, store: HistoryStore, tmp_path: Path, given: Any
) -> None:
    path = await export(source, ["f"], tmp_path / "f.jsonl")
    edited = lines(path)
    edited[0]["fork"] = given
    path.write_text("".join(json.dumps(line) + "\n" for line in edited), encoding="utf-8")
    with pytest.raises(InvalidSource, match="line 1: fork must be an object"):
        await import_sources(store, [path])
    assert await stored_rows(store) == 0


async def test_an_import_interrupted_after_a_fork_was_made_finishes_it_a_fork(
    source: HistoryStore, store: HistoryStore, tmp_path: Path
) -> None:
    expected = await histories(source, FAMILY)
    path = await export(source, FAMILY, tmp_path / "family.jsonl")
    await import_sources(store, [await export(source, ["p"], tmp_path / "p.jsonl")])
    await store.fork("p", at="a2", new_session_id="f")  # then the import was interrupted
    report = await import_sources(store, [path])
    assert report.warnings == []
    await assert_family(store, expected)


async def test_a_fork_stored_already_as_another_session_is_read_on_said_in_one_line(
    source: HistoryStore, store: HistoryStore, tmp_path: Path
) -> None:
    expected = await histories(source, FAMILY)
    await store.set_metadata("g", {"k": 1})  # a session 'g' that holds nothing
    report = await import_sources(store, [await export(source, FAMILY, tmp_path / "f.jsonl")])
    assert len(report.warnings) == 1
    assert "session 'g' is a fork of 'f', but the store holds it already" in report.warnings[0]
    assert await histories(store, FAMILY) == expected
    assert (await store.session("g")).parent_session_id is None


async def test_forks_in_a_circle_are_roots(store: HistoryStore, tmp_path: Path) -> None:
    message = user("x1", "hello").model_dump(mode="json")
    path = tmp_path / "circle.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for session, parent in (("a", "b"), ("b", "a")):
            line = {"format": "chatledger", "version": 1, "session_id": session, "seq": 1}
            line |= {"message": message, "source_system": None, "source_id": None}
            line["fork"] = {"parent_session_id": parent, "fork_message_id": "x1"}
            out.write(json.dumps(line) + "\n")
    report = await import_sources(store, [path])
    assert sorted(w.split(": ", 1)[1] for w in report.warnings) == [
        "session 'a' is a fork of 'b', in a circle of forks: imported as a root, with its "
        "whole conversation",
        "session 'b' is a fork of 'a', in a circle of forks: imported as a root, with its "
        "whole conversation",
    ]
    assert await stored_rows(store) == 2


async def test_a_fork_read_twice_in_one_import_is_a_root_said_once(
    source: HistoryStore, store: HistoryStore, tmp_path: Path
) -> None:
    expected = await histories(source, FAMILY)
    path = await export(source, ["p", "f"], tmp_path / "pf.jsonl")
    report = await import_sources(store, [path, path])
    assert len(report.warnings) == 1
    assert "session 'f' is a fork of 'p', read more than once" in report.warnings[0]
    assert await histories(store, ["p", "f"]) == {s: expected[s] for s in ["p", "f"]}
