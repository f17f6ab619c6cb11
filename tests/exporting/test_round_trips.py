"""Round trips come home: a session exported in any format and imported into the same
store stores nothing new; imported elsewhere, it is the same conversation, ids and
times included. On SQLite and PostgreSQL, over the sessions of every source."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from store import HistoryStore
from store.contract import HistoryBackend
from store.errors import InvalidInput, InvalidSource
from store.exporting import EXPORT_FORMATS, export_sessions
from store.formats.documents import RECORD_KEY
from store.importing import import_sources
from strategies.messages import Message
from strategies.tokenizers import CharacterEstimatorTokenizer
from tests.exporting.fixtures import seed


async def export_file(store: HistoryStore, ids: list[str], fmt: str, folder: Path) -> Path:
    """The export of ``ids`` in ``fmt``, written to a file of ``folder``."""
    suffix = ".json" if fmt == "agent-framework" else ".jsonl"
    path = folder / f"export-{fmt}{suffix}"
    with path.open("w", encoding="utf-8") as out:
        async for chunk in export_sessions(store, ids, format=fmt):
            out.write(chunk)
    return path


async def messages_of(store: HistoryBackend, session_id: str) -> list[Message]:
    return [row.message for row in await store.history(session_id, include_excluded=True)]


@pytest.mark.parametrize("fmt", EXPORT_FORMATS)
async def test_an_export_imported_into_the_same_store_stores_nothing_new(
    store: HistoryStore, tmp_path: Path, fmt: str
) -> None:
    ids = await seed(store, tmp_path)
    stored = {s: await messages_of(store, s) for s in ids}
    path = await export_file(store, ids, fmt, tmp_path)
    again = await import_sources(store, [path])
    assert (again.new, again.already_stored) == (0, sum(map(len, stored.values())))
    assert sorted(again.session_ids) == sorted(ids)
    assert {s: await messages_of(store, s) for s in ids} == stored
    assert (await store.doctor()).healthy


@pytest.mark.parametrize("name", ["chat.out", "chat.json", "chat.jsonl"])
@pytest.mark.parametrize("fmt", EXPORT_FORMATS)
async def test_an_export_under_any_file_name_comes_home(
    store: HistoryStore, tmp_path: Path, fmt: str, name: str
) -> None:
    # `export -o chat.out` or `-o chat.json` of JSONL: the import tells a document from
    # JSONL by what the file holds, not only by its name
    ids = await seed(store, tmp_path)
    named = (await export_file(store, ids, fmt, tmp_path)).rename(tmp_path / name)
    again = await import_sources(store, [named])
    assert again.new == 0 and again.already_stored == again.messages > 0


@pytest.mark.parametrize("fmt", EXPORT_FORMATS)
async def test_an_export_imported_elsewhere_is_the_same_conversation(
    store: HistoryStore, tmp_path: Path, fmt: str
) -> None:
    ids = await seed(store, tmp_path)
    path = await export_file(store, ids, fmt, tmp_path)
    copy = await import_sources(store, [path], session_prefix="copy/")
    assert copy.new == copy.messages and copy.already_stored == 0
    async with HistoryStore.open(
        f"sqlite:///{tmp_path}/empty.db", tokenizer=CharacterEstimatorTokenizer()
    ) as empty:
        rebuilt = await import_sources(empty, [path])
        assert rebuilt.new == copy.messages
        for session_id in ids:
            original = await messages_of(store, session_id)
            assert await messages_of(store, f"copy/{session_id}") == original
            assert await messages_of(empty, session_id) == original


def _edit(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """Apply ``change`` to the first session document of the export at ``path``."""
    if path.suffix == ".json":
        documents = json.loads(path.read_text(encoding="utf-8"))
        change(documents[0])
        path.write_text(json.dumps(documents), encoding="utf-8")
        return
    first, *rest = path.read_text(encoding="utf-8").splitlines()
    document = json.loads(first)
    change(document)
    path.write_text("\n".join([json.dumps(document), *rest]) + "\n", encoding="utf-8")


async def test_an_export_edited_after_the_fact_is_refused_with_the_remedy(
    store: HistoryStore, tmp_path: Path
) -> None:
    ids = await seed(store, tmp_path)
    path = await export_file(store, [ids[1]], "openai-chat", tmp_path)  # recorded whole

    def reword(document: dict[str, Any]) -> None:
        assert "messages" in document[RECORD_KEY]
        document["messages"][0]["content"] = "edited"

    _edit(path, reword)
    with pytest.raises(InvalidSource, match=r"edited after the export.*remove the 'chatledger'"):
        await import_sources(store, [path])
    _edit(path, lambda document: document.pop(RECORD_KEY))
    plain = await import_sources(store, [path], session_prefix="plain/")
    assert plain.new == plain.messages > 0  # a conversation of the format, new ids


async def test_a_native_export_with_a_message_removed_is_refused(
    store: HistoryStore, tmp_path: Path
) -> None:
    await seed(store, tmp_path)
    path = await export_file(store, ["chat"], "openai-chat", tmp_path)  # recorded by ids

    def drop(document: dict[str, Any]) -> None:
        assert "message_ids" in document[RECORD_KEY]
        document["messages"].pop()

    _edit(path, drop)
    with pytest.raises(InvalidSource, match="names 9 messages, the document holds 8"):
        await import_sources(store, [path])


async def test_a_record_of_another_format_or_version_is_refused(
    store: HistoryStore, tmp_path: Path
) -> None:
    await seed(store, tmp_path)
    path = await export_file(store, ["chat"], "openai-chat", tmp_path)
    _edit(path, lambda document: document[RECORD_KEY].update(version=2))
    with pytest.raises(InvalidSource, match="unsupported chatledger record version 2"):
        await import_sources(store, [path])
    _edit(path, lambda document: document[RECORD_KEY].update(version=1, format="langchain"))
    with pytest.raises(InvalidSource, match="this is langchain, not openai-chat"):
        await import_sources(store, [path], format="openai-chat")


async def test_an_export_without_the_record_holds_the_targets_messages_only(
    store: HistoryStore, tmp_path: Path
) -> None:
    await seed(store, tmp_path)
    chunks = export_sessions(store, ["claude"], format="anthropic", record=False)
    (line,) = "".join([chunk async for chunk in chunks]).splitlines()
    assert set(json.loads(line)) == {"id", "system", "messages"}
    with pytest.raises(InvalidInput, match="record must be a bool"):
        _ = [c async for c in export_sessions(store, ["claude"], format="anthropic", record=1)]  # type: ignore[arg-type]
