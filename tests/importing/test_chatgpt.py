"""The ``chatgpt`` format: ChatGPT's data export (``conversations.json``, its folder or
its ``.zip``), built from the export's documented and observed shapes
(``fixtures/chatgpt/conversations.json``; ``docs/importing.md`` says where each shape
comes from), imported into SQLite and PostgreSQL: the current path with its roles,
texts, calls paired by adjacency, results with their error flags, ids and times; the
other branches as forks at their branching message (or roots, linked); idempotence;
damaged exports that write nothing; the command line; and the stream that reads one
conversation at a time."""

from __future__ import annotations

import json
import tracemalloc
import zipfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from store import HistoryStore
from store.errors import InvalidSource
from store.formats import ATTACHMENTS_KEY
from store.formats.chatgpt import CHATGPT_BRANCH_KEY, CHATGPT_CONTENT_KEY, CHATGPT_MESSAGE_KEY
from store.importing import detect_format, import_sources
from store.importing.readers import chatgpt
from store.importing.source import Reading, read_with
from strategies.messages import (
    FunctionCallContent,
    FunctionResultContent,
    Message,
    OtherContent,
    ReasoningContent,
    TextContent,
    UriContent,
)
from tests.cli.helpers import assert_one_line_error, chatledger

FIXTURE = Path(__file__).parent / "fixtures" / "chatgpt" / "conversations.json"
ROOT = Path(__file__).resolve().parents[2]
MATH = "6751a1f0-1c2d-8000-9a3b-0c1d2e3f4a51"
CAT = "6751b2e1-2d3e-8000-9b4c-1d2e3f4a5b62"


def _node(n: int) -> str:
    """The fixture's node ids: ``...-00000000000N`` in hex."""
    prefixes = {
        3: "d7a3f2c4", 4: "e8b4a3d5", 5: "f9c5b4e6", 6: "0ad6c5f7", 7: "1be7d6a8",
        8: "2cf8e7b9", 9: "3da9f8ca", 10: "4eba09db", 11: "5fcb1aec", 12: "60dc2bfd",
        13: "71ed3c0e", 14: "82fe4d1f", 15: "930f5e20", 16: "a4106f31", 17: "b5217042",
        18: "c6328153", 19: "d7439264", 0x22: "f9651486", 0x23: "0a762597",
        0x24: "1b8736a8", 0x25: "2c9847b9", 0x26: "3da958ca", 0x27: "4eba69db",
        0x28: "5fcb7aec",
    }  # fmt: skip
    return f"{prefixes[n]}-0000-4000-8000-{n:012x}"


def _source() -> list[dict[str, Any]]:
    loaded: list[dict[str, Any]] = json.loads(FIXTURE.read_text())
    return loaded


def _time(conversation: dict[str, Any], n: int) -> datetime:
    seconds = conversation["mapping"][_node(n)]["message"]["create_time"]
    return datetime.fromtimestamp(seconds, UTC)


async def _messages(store: HistoryStore, session: str) -> list[Message]:
    return [row.message for row in await store.history(session, include_excluded=True)]


async def test_the_current_path_imports_exactly(store: HistoryStore) -> None:
    assert detect_format(FIXTURE) == "chatgpt"
    report = await import_sources(store, [FIXTURE])
    assert report.session_ids[0] == MATH
    messages = await _messages(store, MATH)
    # the root without a message, the hidden system prompt and the hidden custom
    # instructions are left out; the current path runs through the edited question and
    # the regenerated answer
    assert [m.message_id for m in messages] == [
        _node(n) for n in range(5, 20) if n not in (6, 7, 8, 9)
    ]
    assert [m.role for m in messages] == [
        "user", "assistant", "assistant", "assistant", "tool", "assistant", "tool",
        "assistant", "user", "tool", "assistant",
    ]  # fmt: skip
    math = _source()[0]
    assert [m.created_at for m in messages] == [
        _time(math, n) for n in range(5, 20) if n not in (6, 7, 8, 9)
    ]
    question, thoughts, recap, run, ran, fail, failed, answer, picture, orphan, last = messages
    assert question.text == "What is 21 times 2, and 1 / 0? Data attached."
    assert question.metadata[ATTACHMENTS_KEY] == [
        {
            "name": "numbers.csv",
            "media_type": "text/csv",
            "size": 2438,
            "reference": "file-4Rk2bXw9ZpQ1",
        }
    ]
    reasoning = thoughts.contents[0]
    assert isinstance(reasoning, ReasoningContent)
    assert reasoning.text == "Run both in Python to be exact."
    assert reasoning.extra["summary"] == "Planning the computation"
    assert thoughts.metadata[CHATGPT_CONTENT_KEY] == {
        "content_type": "thoughts",
        "source_analysis_msg_id": "5b3c0e2a-0000-4000-8000-0000000000aa",
    }
    assert recap.contents == [
        OtherContent(kind="reasoning_recap", payload={"content": "Thought for 3 seconds"})
    ]
    calls = [run.contents[0], fail.contents[0]]
    assert all(isinstance(c, FunctionCallContent) for c in calls)
    assert [(c.call_id, c.name, c.arguments) for c in calls] == [  # type: ignore[union-attr]
        (_node(12), "python", "print(21 * 2)"),
        (_node(14), "python", "1 / 0"),
    ]
    assert run.metadata[CHATGPT_CONTENT_KEY] == {
        "content_type": "code",
        "language": "python",
        "response_format_name": None,
    }
    results = [ran.contents[0], failed.contents[0], orphan.contents[0]]
    assert all(isinstance(r, FunctionResultContent) for r in results)
    assert [(r.call_id, r.result, r.is_error) for r in results] == [  # type: ignore[union-attr]
        (_node(12), "42\n", False),
        (_node(14), "ZeroDivisionError: division by zero", True),
        (  # a tool message after no call: a result of its own, an orphan
            _node(18),
            "All the files uploaded by the user have been fully loaded. Searching won't "
            "provide additional information.",
            False,
        ),
    ]
    assert [ran.author_name, orphan.author_name] == ["python", "file_search"]
    assert answer.text == "21 \u00d7 2 = 42; 1 / 0 raises ZeroDivisionError."
    image, words = picture.contents
    assert isinstance(image, UriContent)
    assert image.uri == "sediment://file_00000000d9d871f4a1b2c3d4e5f60718"
    assert image.extra["size_bytes"] == 48029
    assert words == TextContent(text="What is in this picture?")
    assert picture.metadata[CHATGPT_CONTENT_KEY] == {"content_type": "multimodal_text"}
    assert picture.metadata[ATTACHMENTS_KEY] == [
        {
            "name": "cat.png",
            "media_type": "image/png",
            "size": 48029,
            "reference": "file_00000000d9d871f4a1b2c3d4e5f60718",
        }
    ]
    assert last.text == "A cat on a windowsill."
    kept = last.metadata[CHATGPT_MESSAGE_KEY]
    assert isinstance(kept, dict)
    assert kept["metadata"] == math["mapping"][_node(19)]["message"]["metadata"]
    assert kept["recipient"] == "all"
    rows = await store.history(MATH, include_excluded=True)
    assert {row.source_system for row in rows} == {"chatgpt"}
    assert any(f"node {_node(18)}" in w and "orphan" in w for w in report.warnings)


async def test_tool_calls_pair_by_adjacency_and_system_errors_are_errors(
    store: HistoryStore,
) -> None:
    await import_sources(store, [FIXTURE])
    messages = await _messages(store, CAT)
    assert [(m.message_id, m.role) for m in messages] == [
        (_node(0x22), "user"),
        (_node(0x23), "assistant"),
        (_node(0x24), "tool"),
        (_node(0x25), "tool"),
        (_node(0x26), "assistant"),
        (_node(0x27), "tool"),
        (_node(0x28), "assistant"),
    ]
    draw, browse = messages[1].contents[0], messages[4].contents[0]
    assert isinstance(draw, FunctionCallContent) and isinstance(browse, FunctionCallContent)
    assert (draw.call_id, draw.name, draw.arguments) == (
        _node(0x23),
        "dalle.text2im",
        '{"prompt": "a cat on a windowsill", "size": "1024x1024"}',
    )
    assert (browse.call_id, browse.name, browse.arguments) == (
        _node(0x26),
        "browser",
        'search("weather today")',
    )
    image, note, error = (messages[i].contents[0] for i in (2, 3, 5))
    assert isinstance(image, FunctionResultContent)
    assert image.call_id == _node(0x23)  # the tool message right after the call
    assert isinstance(image.result, dict)
    assert image.result["content_type"] == "multimodal_text"
    assert isinstance(note, FunctionResultContent)
    assert note.call_id == _node(0x25)  # the second one follows no call: an orphan
    assert isinstance(error, FunctionResultContent)
    assert (error.call_id, error.result, error.is_error) == (
        _node(0x26),
        "Error: the browsing service timed out",
        True,
    )
    assert messages[5].metadata[CHATGPT_CONTENT_KEY] == {
        "content_type": "system_error",
        "name": "tool_error",
    }


async def test_other_branches_are_forks_at_their_branching_message(store: HistoryStore) -> None:
    report = await import_sources(store, [FIXTURE])
    regenerated = f"{MATH}~{_node(6)}"
    nested = f"{MATH}~{_node(8)}"
    edited = f"{MATH}~{_node(3)}"
    assert sorted(report.session_ids) == sorted([MATH, edited, regenerated, nested, CAT])
    first = await store.session(regenerated)
    assert (first.parent_session_id, first.fork_message_id) == (MATH, _node(5))
    assert [(m.message_id, m.text) for m in await _messages(store, regenerated)] == [
        (_node(5), "What is 21 times 2, and 1 / 0? Data attached."),
        (_node(6), "42, and 1 / 0 is undefined."),
        (_node(7), "Thanks"),
        (_node(9), "Any time!"),  # the newest child goes on the branch
    ]
    inner = await store.session(nested)
    assert (inner.parent_session_id, inner.fork_message_id) == (regenerated, _node(7))
    assert [m.text for m in await _messages(store, nested)][-1] == "You're welcome."
    # the first question as first written leaves from the hidden root: no imported
    # message is shared, so it is a root of its own, linked by its first message
    root = await store.session(edited)
    assert root.parent_session_id is None
    written = await _messages(store, edited)
    assert [(m.message_id, m.role, m.text) for m in written] == [
        (_node(3), "user", "Whats 21 times 2, and 1 / 0?"),
        (_node(4), "assistant", "Did you mean 21 \u00d7 2?"),
    ]
    assert written[0].metadata[CHATGPT_BRANCH_KEY] == {
        "of": MATH,
        "at": "c6f2e1b3-0000-4000-8000-000000000002",
    }
    fork_first = (await _messages(store, regenerated))[1]
    assert fork_first.metadata[CHATGPT_BRANCH_KEY] == {"of": MATH, "at": _node(5)}
    assert not any("imported as a root" in w for w in report.warnings)


async def test_titles_go_with_every_session_of_a_conversation() -> None:
    found = [(c.source_session, c.title) for c in chatgpt.read(FIXTURE, str(FIXTURE))]
    assert found == [
        (MATH, "Arithmetic in Python"),
        (f"{MATH}~{_node(3)}", "Arithmetic in Python"),
        (f"{MATH}~{_node(6)}", "Arithmetic in Python"),
        (f"{MATH}~{_node(8)}", "Arithmetic in Python"),
        (CAT, "Cat picture"),
    ]


async def test_a_second_import_of_the_zip_or_folder_stores_nothing(
    store: HistoryStore, tmp_path: Path
) -> None:
    archive = tmp_path / "chatgpt-export.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as packed:
        packed.writestr("user.json", '{"id": "user-1"}')
        packed.write(FIXTURE, "conversations.json")
        packed.writestr("file-4Rk2bXw9ZpQ1-numbers.csv", "21,2\n")
    assert detect_format(archive) == "chatgpt"
    first = await import_sources(store, [archive])
    assert first.new == first.messages == 28  # forks count the messages they share
    folder = tmp_path / "unpacked"
    folder.mkdir()
    (folder / "conversations.json").write_bytes(FIXTURE.read_bytes())
    (folder / "user.json").write_text('{"id": "user-1"}')
    assert detect_format(folder) == "chatgpt"
    for again in (archive, FIXTURE, folder):
        report = await import_sources(store, [again])
        assert (report.new, report.already_stored) == (0, 28)
    assert len(await store.sessions()) == 5


@pytest.mark.parametrize(
    ("damage", "place", "reason"),
    [
        (
            lambda c: c[1]["mapping"][_node(0x22)]["message"]["author"].__setitem__("role", "bot"),
            f"conversation 2 node {_node(0x22)}",
            "unknown role 'bot'",
        ),
        (
            lambda c: c[0]["mapping"][_node(12)]["message"]["content"].pop("content_type"),
            f"conversation 1 node {_node(12)}",
            "content_type",
        ),
        (
            lambda c: c[0]["mapping"][_node(19)].__setitem__("parent", "missing-node"),
            "conversation 1",
            "missing",
        ),
        (
            lambda c: c[1]["mapping"][_node(0x24)]["message"].__setitem__("create_time", "noon"),
            f"conversation 2 node {_node(0x24)}",
            "create_time",
        ),
    ],
)
async def test_a_damaged_conversation_is_refused_naming_its_place_and_nothing_is_written(
    store: HistoryStore, tmp_path: Path, damage: Any, place: str, reason: str
) -> None:
    exported = _source()
    damage(exported)
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(exported))
    with pytest.raises(InvalidSource) as raised:
        await import_sources(store, [path], format="chatgpt")
    message = str(raised.value)
    assert message.startswith(f"{path}: {place}: ")
    assert reason in message
    assert "\n" not in message
    assert await store.sessions() == []


async def test_a_cut_off_or_undecodable_export_is_refused_and_nothing_is_written(
    store: HistoryStore, tmp_path: Path
) -> None:
    text = FIXTURE.read_text()
    cut = tmp_path / "conversations.json"
    cut.write_text(text[: len(text) - 200])  # in the second conversation
    with pytest.raises(InvalidSource) as raised:
        await import_sources(store, [cut], format="chatgpt")
    assert str(raised.value).startswith(f"{cut}: conversation 2: not JSON")
    assert "cut off" in str(raised.value)
    assert "\n" not in str(raised.value)
    latin = tmp_path / "latin.json"
    latin.write_bytes(FIXTURE.read_bytes().replace("\u00d7".encode(), "\u00d7".encode("latin-1")))
    with pytest.raises(InvalidSource, match=r"latin\.json: line 1: not UTF-8 text"):
        await import_sources(store, [latin], format="chatgpt")
    assert await store.sessions() == []


async def test_an_orphan_result_is_refused_with_strict(store: HistoryStore) -> None:
    with pytest.raises(InvalidSource) as raised:
        await import_sources(store, [FIXTURE], strict=True)
    assert f"conversation 1 node {_node(18)}" in str(raised.value)
    assert await store.sessions() == []


def test_cli_imports_then_says_already_stored(db_url: str, tmp_path: Path) -> None:
    source = tmp_path / "conversations.json"
    source.write_bytes(FIXTURE.read_bytes())
    args = ("import", "--create", str(source), "--format", "chatgpt", "--url", db_url)
    first = chatledger(*args, env={"PYTHONPATH": str(ROOT)})
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines()[1] == "28 stored, 0 already stored"
    second = chatledger(*args, env={"PYTHONPATH": str(ROOT)})
    assert second.stdout.splitlines()[1] == "0 stored, 28 already stored"
    source.write_text('[{"title": "x", "mapping": {}, "current_node": null}, {"title"')
    refused = chatledger(*args, env={"PYTHONPATH": str(ROOT)})
    assert_one_line_error(refused, contains="conversations.json: conversation 2: not JSON")


def _export(path: Path, conversations: int) -> None:
    """An export of ``conversations`` conversations of 40 messages (about 25 KB each),
    written one at a time."""
    with path.open("w", encoding="utf-8") as out:
        out.write("[")
        for number in range(conversations):
            mapping: dict[str, Any] = {}
            parent: str | None = None
            for turn in range(40):
                node = f"c{number}-n{turn}"
                role = "user" if turn % 2 == 0 else "assistant"
                message = {
                    "id": node,
                    "author": {"role": role, "name": None, "metadata": {}},
                    "create_time": 1733400000.0 + turn,
                    "content": {"content_type": "text", "parts": [f"{turn} " + "words " * 80]},
                    "recipient": "all",
                    "metadata": {},
                }
                mapping[node] = {"id": node, "message": message, "parent": parent, "children": []}
                if parent is not None:
                    mapping[parent]["children"].append(node)
                parent = node
            conversation = {"id": f"c{number}", "title": f"chat {number}", "mapping": mapping}
            conversation["current_node"] = parent
            out.write(("," if number else "") + json.dumps(conversation))
        out.write("]")


def _peak(path: Path) -> tuple[int, int]:
    """The peak memory of reading ``path``'s sessions, and how many were read."""
    tracemalloc.start()
    try:
        sessions = sum(1 for _ in chatgpt.read(path, str(path)))
        return tracemalloc.get_traced_memory()[1], sessions
    finally:
        tracemalloc.stop()


def test_conversations_are_streamed_one_at_a_time(tmp_path: Path) -> None:
    small, large = tmp_path / "small.json", tmp_path / "large.json"
    _export(small, 4)
    _export(large, 160)
    assert small.stat().st_size < 200_000 < 4_000_000 < large.stat().st_size
    small_peak, small_sessions = _peak(small)
    large_peak, large_sessions = _peak(large)
    assert (small_sessions, large_sessions) == (4, 160)
    # reading it whole would hold the 4 MB text and its objects many times over
    assert large_peak < small_peak + 1_000_000


def test_a_zip_archive_that_is_no_export_is_refused(tmp_path: Path) -> None:
    archive = tmp_path / "photos.zip"
    with zipfile.ZipFile(archive, "w") as packed:
        packed.writestr("cat.png", b"\x89PNG")
    with pytest.raises(InvalidSource) as raised:
        detect_format(archive)
    assert str(raised.value) == (
        f"{archive}: a zip archive that is not a ChatGPT or Claude.ai data export"
    )
    listed = tmp_path / "messages.json"
    listed.write_text('[{"role": "user", "content": "hi"}]')
    assert detect_format(listed) == "openai-chat"  # an array of no export: as before


def test_an_export_in_another_encoding_reads_with_its_encoding(tmp_path: Path) -> None:
    latin = tmp_path / "latin.json"
    latin.write_bytes(FIXTURE.read_bytes().replace("\u00d7".encode(), "\u00d7".encode("latin-1")))
    with read_with(Reading(encoding="latin-1")):
        found = list(chatgpt.read(latin, str(latin)))
    answer = [m.message for m in found[0].messages if m.message.message_id == _node(16)]
    assert answer[0].text == "21 \u00d7 2 = 42; 1 / 0 raises ZeroDivisionError."
    wide = tmp_path / "wide.json"
    wide.write_bytes(FIXTURE.read_text(encoding="utf-8").encode("utf-16"))  # with its BOM
    assert detect_format(wide) == "chatgpt"
    again = list(chatgpt.read(wide, str(wide)))
    assert [[m.message for m in c.messages] for c in again] == [
        [m.message for m in c.messages] for c in chatgpt.read(FIXTURE, str(FIXTURE))
    ]
