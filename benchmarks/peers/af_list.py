"""Agent Framework 1.23.0 as its database-backed users get it today.

The history is a Python list of ``agent_framework.Message``, recompacted with
``apply_compaction`` and ``ContextWindowCompactionStrategy`` (128k window) on every
model call. The strategy's tokenizer is Agent Framework's default (a
4-characters-per-token estimate) unless the harness passes one.

The stored state is the list pickled in its steady state, as a long-lived agent would
hold it: every group older than the newest ~50 % of the input budget already excluded
as truncated. Reaching that state with a cold first call is impractical at scale
(its truncation recounts the whole list once per excluded group: O(n²), minutes at
10,000 messages), so the build excludes the old groups with Agent Framework's public
``exclude_group_ids`` and then settles the tail with one ``apply_compaction``, whose
time is reported as ``first_call_s``.
"""

from __future__ import annotations

import json
import pickle
import time
from pathlib import Path
from typing import Any

from agent_framework import (
    CharacterEstimatorTokenizer,
    Content,
    ContextWindowCompactionStrategy,
    Message,
    apply_compaction,
)

# exported in the module's __all__, not re-exported at the package top
from agent_framework._compaction import (
    GROUP_ANNOTATION_KEY,
    GROUP_ID_KEY,
    GROUP_KIND_KEY,
    annotate_message_groups,
    exclude_group_ids,
)

from benchmarks.generator import ChatDict
from benchmarks.peers import CONTEXT_WINDOW, MAX_OUTPUT_TOKENS, System

__all__ = ["AgentFrameworkSystem", "to_af_message"]


def to_af_message(item: ChatDict) -> Message:
    """Convert one generated OpenAI chat dict into an Agent Framework message."""
    contents: list[Content] = []
    if item["role"] == "tool":
        contents.append(Content.from_function_result(item["tool_call_id"], result=item["content"]))
    elif item.get("content"):
        contents.append(Content.from_text(item["content"]))
    for call in item.get("tool_calls") or ():
        function = call["function"]
        contents.append(
            Content.from_function_call(
                call["id"], function["name"], arguments=json.loads(function["arguments"])
            )
        )
    return Message(item["role"], contents, message_id=item["id"])


def _chars(message: Message) -> int:
    total = 0
    for content in message.contents:
        for name in ("text", "result", "arguments", "name"):
            value = getattr(content, name, None)
            if value is not None:
                total += len(value) if isinstance(value, str) else len(str(value))
    return total


def _group_of(message: Message) -> tuple[str, str]:
    annotation = message.additional_properties[GROUP_ANNOTATION_KEY]
    return str(annotation[GROUP_ID_KEY]), str(annotation[GROUP_KIND_KEY])


def _exclude_old_groups(messages: list[Message], *, keep_tokens: int) -> int:
    """Exclude every non-system group before the newest ``keep_tokens`` (4 chars a token)."""
    annotate_message_groups(messages)
    kept: set[str] = set()
    budget = keep_tokens * 4
    for message in reversed(messages):
        budget -= _chars(message)
        if budget < 0:
            break
        kept.add(_group_of(message)[0])
    old = {gid for gid, kind in map(_group_of, messages) if kind != "system" and gid not in kept}
    exclude_group_ids(messages, old, reason="truncation")
    return len(old)


class AgentFrameworkSystem(System):
    """A list of messages recompacted on every model call."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._messages: list[Message] = []
        self._path = Path(self.target.location)
        self._strategy = ContextWindowCompactionStrategy(
            max_context_window_tokens=CONTEXT_WINDOW,
            max_output_tokens=MAX_OUTPUT_TOKENS,
            tokenizer=self.tokenizer or CharacterEstimatorTokenizer(),
        )
        self._dirty = False

    async def open(self, *, create: bool) -> None:
        """Unpickle the stored list (or start empty)."""
        if create or not self._path.exists():
            self._messages = []
            self._dirty = True
            return
        with self._path.open("rb") as fh:
            self._messages = pickle.load(fh)

    def prepare(self, items: list[ChatDict]) -> list[Message]:
        """Convert to Agent Framework messages."""
        return [to_af_message(item) for item in items]

    async def load(self, native: list[Message]) -> None:
        """Extend the list (Agent Framework does no work until the next call)."""
        self._messages.extend(native)
        self._dirty = True

    async def settle(self) -> dict[str, float]:
        """Exclude the groups a long-lived agent would have truncated, then settle."""
        start = time.perf_counter()
        excluded = _exclude_old_groups(self._messages, keep_tokens=(CONTEXT_WINDOW // 4))
        prefix_s = time.perf_counter() - start
        start = time.perf_counter()
        await self.context()
        return {
            "prefix_exclusion_s": prefix_s,
            "first_call_s": time.perf_counter() - start,
            "excluded_groups": float(excluded),
        }

    async def append_turn(self, native: list[Message]) -> None:
        """Append the turn's messages to the list."""
        self._messages.extend(native)

    async def context(self) -> int:
        """One model call's worth of work: ``apply_compaction`` over the whole list."""
        projected = await apply_compaction(self._messages, strategy=self._strategy)
        return len(projected)

    async def full_read(self) -> int:
        """The list is the full history."""
        return len(list(self._messages))

    async def close(self) -> None:
        """Pickle the list back when it was built here."""
        if self._dirty:
            with self._path.open("wb") as fh:
                pickle.dump(self._messages, fh, protocol=pickle.HIGHEST_PROTOCOL)
