"""A seeded, streaming generator of realistic agent conversations.

One session is a system prompt followed by turns. A turn is a user request, zero to
two rounds of tool use (an assistant message with one to three parallel function calls,
then one tool message per call, each result 200 to 4,000 characters), and a final
assistant answer. Messages average about 1 kB as OpenAI chat JSON.

The primary form is a plain OpenAI chat-completions dict; :func:`to_message` turns one
into a chatledger :class:`~strategies.messages.Message`. Everything is a generator: a
million messages can be produced without holding them. The same seed gives the same
messages, ids and timestamps.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, get_args

from strategies.messages import (
    Content,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    TextContent,
)

__all__ = [
    "DATASETS",
    "ChatDict",
    "ConversationGenerator",
    "Dataset",
    "message_size",
    "model_text",
    "to_message",
]

ChatDict = dict[str, Any]
"""A message in the OpenAI chat-completions format."""

Dataset = Literal["mixed", "tools", "short"]
"""Which conversations a generator produces (see the module docstring)."""
DATASETS: tuple[Dataset, ...] = get_args(Dataset)

_EPOCH = datetime(2025, 1, 1, tzinfo=UTC)

_WORDS = (
    "the of and to in is that for it as with was on be by this are from at or an not have "
    "which but all can has more one its were will would there their been if also when into "
    "other than only some these after new time first two may such over most used between "
    "where while both each under could because through during before should without number "
    "system data model request response value function result error table index query file "
    "session message token context window budget compaction summary group store agent tool "
    "call return config deploy service cluster latency memory cache thread process worker "
    "report customer invoice order payment shipment account region schedule ticket review "
    "analysis estimate forecast revenue margin quarter metric dashboard alert incident"
).split()

_TOOLS = (
    ("search_documents", ("query", "top_k")),
    ("read_file", ("path", "start_line", "end_line")),
    ("run_sql", ("database", "statement")),
    ("get_weather", ("city", "units")),
    ("list_tickets", ("project", "status", "assignee")),
    ("fetch_url", ("url", "timeout")),
)

_SYSTEM_PROMPT_WORDS = 260


@dataclass(frozen=True, slots=True)
class _TurnPlan:
    rounds: list[int]
    """Number of parallel calls in each tool round."""

    def size(self) -> int:
        return 2 + sum(1 + calls for calls in self.rounds)


class ConversationGenerator:
    """Deterministic, streaming source of one session's messages.

    ``ConversationGenerator(seed)`` yields the same conversation every time; ids carry
    ``id_prefix`` (default ``s<seed>``) so two generators with different seeds never
    collide within one session.
    """

    def __init__(
        self, seed: int, *, id_prefix: str | None = None, dataset: Dataset = "mixed"
    ) -> None:
        if dataset not in DATASETS:
            raise ValueError(f"unknown data set {dataset!r}: one of {', '.join(DATASETS)}")
        self.seed = seed
        self.dataset = dataset
        self.id_prefix = id_prefix if id_prefix is not None else f"s{seed}"
        self._rng = random.Random(seed)
        self._index = 0
        self._call_index = 0

    # -- public streams -------------------------------------------------------------

    def chat_dicts(self, count: int, *, system_prompt: bool = True) -> Iterator[ChatDict]:
        """Yield exactly ``count`` messages, ending on a whole turn where possible."""
        remaining = count
        if system_prompt and remaining > 0:
            yield self._system()
            remaining -= 1
        while remaining > 0:
            turn = self.turn(limit=remaining)
            remaining -= len(turn)
            yield from turn

    def messages(self, count: int, *, system_prompt: bool = True) -> Iterator[Message]:
        """Like :meth:`chat_dicts`, as chatledger messages."""
        for item in self.chat_dicts(count, system_prompt=system_prompt):
            yield to_message(item)

    def turns(self) -> Iterator[list[ChatDict]]:
        """Yield whole turns forever (no system prompt)."""
        while True:
            yield self.turn()

    def turn(self, *, limit: int | None = None) -> list[ChatDict]:
        """One whole turn, shortened to at most ``limit`` messages when given."""
        plan = self._plan(limit)
        out: list[ChatDict] = [self._user()]
        if limit is not None and limit < 2:
            return out
        for calls in plan.rounds:
            out.extend(self._tool_round(calls))
        out.append(self._assistant_text())
        return out

    # -- building blocks ------------------------------------------------------------

    def _plan(self, limit: int | None) -> _TurnPlan:
        rng = self._rng
        if self.dataset == "tools":
            rounds = [2]
        elif self.dataset == "short":
            rounds = []
        else:
            count = rng.randint(0, 2)
            rounds = [rng.choices((1, 2, 3), weights=(6, 3, 1))[0] for _ in range(count)]
        plan = _TurnPlan(rounds)
        if limit is None:
            return plan
        while plan.rounds and plan.size() > limit:
            plan.rounds.pop()
        return plan

    def _next_meta(self) -> dict[str, Any]:
        index = self._index
        self._index += 1
        created = _EPOCH + timedelta(seconds=7 * index + 3 * self.seed)
        return {"id": f"{self.id_prefix}_m{index}", "created_at": created.isoformat()}

    def _words(self, count: int) -> str:
        words = self._rng.choices(_WORDS, k=count)
        words[0] = words[0].capitalize()
        return " ".join(words) + "."

    def _paragraphs(self, chars: int) -> str:
        parts: list[str] = []
        total = 0
        while total < chars:
            sentence = self._words(self._rng.randint(8, 22))
            parts.append(sentence)
            total += len(sentence) + 1
        return " ".join(parts)[:chars]

    def _system(self) -> ChatDict:
        words = 12 if self.dataset == "short" else _SYSTEM_PROMPT_WORDS
        text = "You are a careful operations assistant. " + self._words(words)
        return {"role": "system", "content": text, **self._next_meta()}

    def _user(self) -> ChatDict:
        low, high = (60, 140) if self.dataset == "short" else (80, 1100)
        text = self._paragraphs(self._rng.randint(low, high))
        return {"role": "user", "content": text, **self._next_meta()}

    def _assistant_text(self) -> ChatDict:
        low, high = (60, 140) if self.dataset == "short" else (200, 2100)
        text = self._paragraphs(self._rng.randint(low, high))
        return {"role": "assistant", "content": text, **self._next_meta()}

    def _tool_round(self, calls: int) -> list[ChatDict]:
        rng = self._rng
        tool_calls: list[dict[str, Any]] = []
        for _ in range(calls):
            name, params = rng.choice(_TOOLS)
            arguments = {p: self._words(rng.randint(1, 4)) for p in params}
            call_id = f"call_{self.id_prefix}_{self._call_index}"
            self._call_index += 1
            tool_calls.append(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(arguments)},
                }
            )
        call_message: ChatDict = {
            "role": "assistant",
            "content": None,
            "tool_calls": tool_calls,
            **self._next_meta(),
        }
        results = [self._tool_result(call["id"]) for call in tool_calls]
        return [call_message, *results]

    def _tool_result(self, call_id: str) -> ChatDict:
        if self.dataset == "tools":  # uniform between 1 and 2 kB
            length = self._rng.randint(1_000, 2_000)
        else:  # log-uniform between 200 and 4,000 characters: many short, a few long
            length = round(200 * 20 ** self._rng.random())
        return {
            "role": "tool",
            "tool_call_id": call_id,
            "content": self._paragraphs(length),
            **self._next_meta(),
        }


def to_message(item: ChatDict) -> Message:
    """Convert one OpenAI chat dict (as generated here) into a chatledger message."""
    contents: list[Content] = []
    role = item["role"]
    if role == "tool":
        contents.append(FunctionResultContent(call_id=item["tool_call_id"], result=item["content"]))
    elif item.get("content"):
        contents.append(TextContent(text=item["content"]))
    for call in item.get("tool_calls") or ():
        function = call["function"]
        contents.append(
            FunctionCallContent(
                call_id=call["id"], name=function["name"], arguments=function["arguments"]
            )
        )
    return Message(
        role=role,
        contents=contents,
        message_id=item["id"],
        created_at=datetime.fromisoformat(item["created_at"]),
    )


def model_text(item: ChatDict) -> str:
    """What the model reads of a message: its text, call names and arguments, results."""
    parts: list[str] = []
    if item.get("content"):
        parts.append(item["content"])
    for call in item.get("tool_calls") or ():
        parts.append(call["function"]["name"])
        parts.append(call["function"]["arguments"])
    return "\n".join(parts)


def message_size(item: ChatDict) -> int:
    """Size of a message in bytes, as compact UTF-8 JSON."""
    return len(json.dumps(item, separators=(",", ":")).encode())
