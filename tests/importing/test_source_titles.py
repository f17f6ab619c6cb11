"""The titles sources give their conversations are the sessions' titles once imported:
a ChatGPT conversation's on its session and on each of its forks, Claude.ai's names,
Claude Code's and Codex's titles; a second import changes nothing (not even the
sessions' revisions), and a source whose title changed since sets the new one."""

from __future__ import annotations

import json
from pathlib import Path

from store import HistoryStore
from store.importing import import_sources
from tests.importing.test_chatgpt import CAT, MATH, _node
from tests.importing.test_chatgpt import FIXTURE as CHATGPT
from tests.importing.test_claude_ai import FIXTURE as CLAUDE_AI
from tests.importing.test_claude_code import PROJECT
from tests.importing.test_claude_code import SESSION as CLAUDE_CODE
from tests.importing.test_codex import SESSION as CODEX
from tests.importing.test_codex import SESSIONS


async def _titles(store: HistoryStore) -> dict[str, tuple[str | None, int]]:
    return {s.session_id: (s.title, s.revision) for s in await store.sessions()}


async def test_each_format_s_titles_are_stored_once(store: HistoryStore) -> None:
    sources = [str(CHATGPT), str(CLAUDE_AI), str(PROJECT), str(SESSIONS)]
    await import_sources(store, sources)
    stored = await _titles(store)
    titles = {session: title for session, (title, _) in stored.items()}
    for session in (MATH, *(f"{MATH}~{_node(n)}" for n in (3, 6, 8))):
        assert titles[session] == "Arithmetic in Python"
    assert titles[CAT] == "Cat picture"
    assert "Fact-checking a physics slide" in titles.values() and "Haiku" in titles.values()
    assert titles[CLAUDE_CODE] == "calc: divide(1, 0)"
    assert titles[CODEX] == "Add --verbose to cli.py"
    again = await import_sources(store, sources)
    assert again.new == 0
    assert await _titles(store) == stored


async def test_a_title_changed_in_the_source_is_set_again(
    store: HistoryStore, tmp_path: Path
) -> None:
    source = tmp_path / "conversations.json"
    conversations = json.loads(CHATGPT.read_text())
    source.write_text(json.dumps(conversations))
    await import_sources(store, [str(source)])
    conversations[0]["title"] = "  Arithmetic,\n renamed  "
    source.write_text(json.dumps(conversations))
    report = await import_sources(store, [str(source)])
    assert report.new == 0
    assert (await store.session(MATH)).title == "Arithmetic, renamed"
    assert (await store.session(CAT)).title == "Cat picture"
