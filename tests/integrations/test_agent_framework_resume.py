"""Resume from a fresh process, and replays across compaction, with the real framework."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from agent_framework import AgentSession
from agent_framework import Message as AFMessage

from store.integrations.agent_framework import ChatledgerHistoryProvider
from strategies.base import CompactionStrategy
from strategies.reduction import ToolResultReductionStrategy
from strategies.tokenizers import Tokenizer
from strategies.tool_result import ToolResultCompactionStrategy
from tests.integrations.agents import (
    BUILDERS,
    PER_TURN,
    TOOL_CALLS,
    answer,
    request,
    run_turns,
    window_provider,
)
from tests.integrations.conftest import AnyStore
from tests.integrations.scripted_client import ScriptedChatClient

REPO = Path(__file__).resolve().parents[2]
FIRST_TURNS = 8


@pytest.mark.parametrize("mode", sorted(BUILDERS))
async def test_resume_from_a_fresh_process_with_only_the_session_id(
    mode: str, tmp_path: Path, tokenizer: Tokenizer
) -> None:
    url = f"sqlite:///{tmp_path / 'resume.db'}"
    session_id = f"fresh-{mode}"
    async with window_provider(url=url, tokenizer=tokenizer) as provider:
        client = ScriptedChatClient(tool_calls=TOOL_CALLS)
        agent = BUILDERS[mode](client, provider, tokenizer)
        session = AgentSession(session_id=session_id)
        await run_turns(agent, client, session, tokenizer, range(FIRST_TURNS))

    child = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "tests.integrations.resume_child"),
        *(url, session_id, mode, str(FIRST_TURNS)),
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(child.communicate(), timeout=120)
    assert child.returncode == 0, stderr.decode()
    report: dict[str, Any] = json.loads(stdout)

    first_call = [m["text"] for m in report["first_call"]]
    assert answer(FIRST_TURNS - 1) in first_call  # the stored history came back
    assert first_call[-1] == request(FIRST_TURNS)  # with the new request last
    assert report["model_calls"] == TOOL_CALLS + 1
    assert report["stored_users"] == [request(t) for t in range(FIRST_TURNS + 1)]
    assert report["stored_appended"] == (FIRST_TURNS + 1) * PER_TURN
    assert report["last_save_appended"] > 0
    assert report["events"] > 0


# -- replays across compaction ------------------------------------------------------------


class RecordingProvider(ChatledgerHistoryProvider):
    """Keeps every batch the framework hands to ``save_messages``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.batches: list[list[AFMessage]] = []

    async def save_messages(
        self,
        session_id: str | None,
        messages: Sequence[AFMessage],
        *,
        state: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self.batches.append(list(messages))
        await super().save_messages(session_id, messages, state=state, **kwargs)


def _shorten(text: str) -> str:
    return text[:20]


AFTER: dict[str, CompactionStrategy] = {
    # Every tool group, the newest included, is excluded and replaced by a summary.
    "summarized": ToolResultCompactionStrategy(keep_last_tool_call_groups=0),
    # Every tool result, the newest included, is shown reduced.
    "reduced": ToolResultReductionStrategy(reducers={"lookup": _shorten}),
}


def _turns(batches: list[list[AFMessage]]) -> list[list[AFMessage]]:
    """Each turn's messages, as the framework handed them over (once each).

    ``Agent`` saves a whole turn at once; the harness saves per model call, each batch
    holding what is new since the last one (it closes a turn with the text answer).
    """
    turns: list[list[AFMessage]] = []
    current: list[AFMessage] = []
    for batch in batches:
        current.extend(batch)
        if batch and batch[-1].role == "assistant" and batch[-1].text:
            turns.append(current)
            current = []
    return turns


@pytest.mark.parametrize("after", sorted(AFTER))
@pytest.mark.parametrize("mode", sorted(BUILDERS))
async def test_replays_of_a_compacted_tail_are_not_stored_twice(
    mode: str, after: str, any_store: AnyStore, tokenizer: Tokenizer
) -> None:
    provider = RecordingProvider(any_store, after_strategy=AFTER[after])
    client = ScriptedChatClient(tool_calls=TOOL_CALLS)
    agent = BUILDERS[mode](client, provider, tokenizer)
    session_id = f"replay-{mode}-{after}"
    await run_turns(agent, client, AgentSession(session_id=session_id), tokenizer, range(3))
    turns = _turns(provider.batches)
    assert len(turns) == 3 and all(len(t) == PER_TURN for t in turns)
    before = await any_store.history(session_id, include_excluded=True)
    # The tail really is compacted: the last turn's results are excluded or reduced.
    last_results = [s for s in before if s.kind != "summary"][-PER_TURN:]
    last_results = [s for s in last_results if s.message.role == "tool"]
    assert len(last_results) == TOOL_CALLS
    assert all(s.excluded or s.reduced is not None for s in last_results)

    # The framework hands back the last turn again, then the whole transcript plus more.
    await provider.save_messages(session_id, turns[-1])
    assert provider.last_save is not None
    assert provider.last_save.appended == () and provider.last_save.replayed == PER_TURN
    follow_up = AFMessage(role="user", contents=["and then?"])
    transcript = [m for t in turns for m in t]
    await provider.save_messages(session_id, [*transcript, follow_up])
    assert provider.last_save.replayed == len(transcript)
    assert len(provider.last_save.appended) == 1

    stored = await any_store.history(session_id, include_excluded=True)
    assert len(stored) == len(before) + 1
    assert stored[-1].message.text == "and then?"
    users = [s.message.text for s in stored if s.message.role == "user"]
    assert users == [*(request(t) for t in range(3)), "and then?"]
