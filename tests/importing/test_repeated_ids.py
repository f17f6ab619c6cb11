"""Two contents at one id or one place of a session within one import are refused by
pass one, with where both are, and write nothing: two files of one session whose
messages have no ids and differ at the same place, ids a source gives twice, and the
store's limits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from store import HistoryStore
from store.errors import InvalidSource
from store.importing import import_sources
from store.rules.limits import Limits
from strategies.tokenizers import CharacterEstimatorTokenizer
from tests.importing.sources import weather_chat, write_chat_jsonl


async def _sessions(store: HistoryStore) -> list[str]:
    return sorted(s.session_id for s in await store.sessions())


def _two_files_of_one_session(tmp_path: Path) -> tuple[Path, Path]:
    """``conv`` in two files, one line each: the second message differs."""
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_chat_jsonl(first, {"conv": weather_chat(1)})
    changed = weather_chat(1)
    changed[1]["content"] = "another question"
    write_chat_jsonl(second, {"conv": changed})
    return first, second


async def test_one_session_in_two_files_that_differ_at_one_place_is_refused(
    store: HistoryStore, tmp_path: Path
) -> None:
    first, second = _two_files_of_one_session(tmp_path)
    with pytest.raises(InvalidSource) as raised:
        await import_sources(store, [first, second])
    message = str(raised.value)
    assert message.startswith(f"{second}: line 1 message 2: session 'conv' has other content")
    assert f"here than at {first}: line 1 message 2; " in message
    assert message.endswith("import one of them under another --session-prefix")
    assert "\n" not in message
    assert await _sessions(store) == []  # nothing written, the first file's part neither


async def test_skip_invalid_leaves_out_the_later_source_and_imports_the_rest(
    store: HistoryStore, tmp_path: Path
) -> None:
    first, second = _two_files_of_one_session(tmp_path)
    other = tmp_path / "c.jsonl"
    write_chat_jsonl(other, {"other": weather_chat(2)})
    report = await import_sources(store, [first, second, other], skip_invalid=True)
    assert [s.session_id for s in report.skipped] == ["conv"]
    assert report.skipped[0].source == str(second)
    assert "has other content here than at" in report.skipped[0].reason
    assert report.session_ids == ["conv", "other"]
    assert await _sessions(store) == ["conv", "other"]
    assert [m.message.text for m in await store.history("conv")][1] == "weather 0?"
    assert report.new == len(weather_chat(1)) + len(weather_chat(2))


async def test_the_same_file_twice_and_a_session_grown_elsewhere_are_accepted(
    store: HistoryStore, tmp_path: Path
) -> None:
    first = tmp_path / "a.jsonl"
    write_chat_jsonl(first, {"conv": weather_chat(1)})
    later = tmp_path / "later.jsonl"  # the same session, further on, in another file
    later.write_text(
        "\n" + json.dumps({"id": "conv", "messages": weather_chat(2)}) + "\n",
        encoding="utf-8",
    )
    report = await import_sources(store, [first, first, later])
    assert report.messages == report.new == len(weather_chat(2))
    stored = [row.message for row in await store.history("conv")]
    assert [m.role for m in stored] == [m["role"] for m in weather_chat(2)]
    assert stored[5].text == "weather 1?"  # the second file's part follows the first's


async def test_an_id_the_source_gives_twice_to_other_content_is_refused(
    store: HistoryStore, tmp_path: Path
) -> None:
    line = {
        "format": "chatledger",
        "version": 1,
        "session_id": "s",
        "seq": 1,
        "message": {
            "role": "user",
            "contents": [{"type": "text", "text": "first"}],
            "message_id": "m1",
        },
    }
    second = json.loads(json.dumps(line))
    second["seq"] = 2
    second["message"]["contents"][0]["text"] = "second"
    path = tmp_path / "own.jsonl"
    path.write_text(json.dumps(line) + "\n" + json.dumps(second) + "\n", encoding="utf-8")
    with pytest.raises(InvalidSource, match=r"own\.jsonl: line 2: message id 'm1' is given"):
        await import_sources(store, [path])
    assert await _sessions(store) == []


async def test_pass_one_checks_against_the_stores_own_limits(db_url: str, tmp_path: Path) -> None:
    path = tmp_path / "chats.jsonl"
    write_chat_jsonl(path, {"ok": weather_chat(1), "a-" + "long-" * 10 + "id": weather_chat(1)})
    async with HistoryStore.open(
        db_url, tokenizer=CharacterEstimatorTokenizer(), limits=Limits(max_id_length=40)
    ) as store:
        with pytest.raises(InvalidSource, match=r"chats\.jsonl: line 2: session_id has 54 "):
            await import_sources(store, [path])
        assert await _sessions(store) == []
