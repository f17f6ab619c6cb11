"""``chatledger demo``: a long, tool-heavy conversation through the provider's two phases.

A scripted model (:mod:`store.demo._script`) and local tools play ``turns`` user turns
on one session. Before every model call the provider's *before* phase builds the
request (stored active context plus the turn's in-flight messages); at the end of each
turn its *after* phase appends the turn and compacts on write. Nothing is downloaded,
no key is needed, no optional extra is imported.

:func:`run_demo` records, per turn, the tokens sent on each model call against the
input budget and the stored and active tokens after the turn; it never hides a
failure: budget overruns are listed in :attr:`DemoReport.violations`, and a message
missing from the store afterwards is one too.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from store.contract import DemoBackend
from store.demo._script import SYSTEM_PROMPT, MissingResult, ScriptedModel
from store.demo.tools import rng_for, run_tool
from store.models import CompactionEvent
from store.provider import TwoPhaseProvider
from strategies.context_window import ContextWindowCompactionStrategy
from strategies.messages import FunctionCallContent, FunctionResultContent, Message
from strategies.tokenizers import count_messages_tokens

__all__ = [
    "DemoBackend",
    "DemoConfig",
    "DemoReport",
    "MissingResult",
    "TurnRecord",
    "run_demo",
]

MAX_STEPS = 8


class DemoConfig(BaseModel):
    """How long the demo runs and how small the model's window is."""

    model_config = ConfigDict(frozen=True)

    turns: int = 60
    session_id: str | None = None
    """The session to write (default: a new ``demo-<hex>`` id)."""
    max_context_window_tokens: int = 8192
    max_output_tokens: int = 1024
    reserved_tokens: int = 256
    """Set aside for instructions and tool schemas a framework adds after compaction."""
    seed: int = 7


class TurnRecord(BaseModel):
    """One user turn: what was sent on each model call, and what is stored after it."""

    model_config = ConfigDict(frozen=True)

    turn: int
    request: str
    sent_tokens: tuple[int, ...]
    """Tokens of the request of each model call of the turn."""
    budget: int
    """The input budget (window - output - reserved)."""
    tool_calls: int
    appended: int
    """Messages the after phase appended."""
    stored_messages: int
    stored_tokens: int
    """Every stored token of the session after the turn (never decreases)."""
    active_tokens: int
    """Tokens of the session's active context after the turn's compaction."""
    compaction_event: str | None = None
    tokens_saved: int = 0

    @property
    def max_sent(self) -> int:
        """The largest request of the turn."""
        return max(self.sent_tokens, default=0)

    @property
    def within_budget(self) -> bool:
        """Whether every request of the turn fitted the input budget."""
        return self.max_sent <= self.budget


class DemoReport(BaseModel):
    """What a demo run did."""

    model_config = ConfigDict(frozen=True)

    session_id: str
    budget: int
    turns: tuple[TurnRecord, ...]
    events: tuple[CompactionEvent, ...]
    appended_ids: tuple[str, ...]
    stored_ids: tuple[str, ...]
    """Ids of the stored messages that are not summaries, in storage order."""
    violations: tuple[str, ...]
    """Every broken promise found (budget overruns, lost messages); empty when all held."""

    @property
    def ok(self) -> bool:
        """Whether no violation was found."""
        return not self.violations


class _Runner:
    def __init__(self, store: DemoBackend, config: DemoConfig, session_id: str) -> None:
        self.store = store
        self.config = config
        self.session_id = session_id
        # the provider's own window strategy, as an application would configure it
        self.provider = TwoPhaseProvider(
            store,
            max_context_window_tokens=config.max_context_window_tokens,
            max_output_tokens=config.max_output_tokens,
            reserved_tokens=config.reserved_tokens,
        )
        strategy = self.provider.before_strategy
        assert isinstance(strategy, ContextWindowCompactionStrategy)
        self.strategy = strategy
        self.model = ScriptedModel(seed=config.seed)
        self.appended: list[str] = []
        self._ids = rng_for(config.seed, "message ids")

    def _named(self, message: Message) -> Message:
        """``message`` with the next id of the seed's sequence: a seed plays the same
        message ids every time, so the docs can name them."""
        return message.model_copy(update={"message_id": f"m-{self._ids.getrandbits(128):032x}"})

    def _tokens(self, messages: Sequence[Message]) -> int:
        return count_messages_tokens(messages, self.store.tokenizer, policy=self.store.policy)

    async def turn(self, turn: int) -> TurnRecord:
        plan = self.model.plan(turn)
        pending: list[Message] = (
            [self._named(Message.text_message("system", SYSTEM_PROMPT))] if turn == 1 else []
        )
        pending.append(self._named(Message.text_message("user", plan.request)))
        sent_tokens: list[int] = []
        calls = 0
        for _ in range(MAX_STEPS):
            sent = await self.provider.load(self.session_id, pending)
            sent_tokens.append(self._tokens(sent))
            reply = self._named(self.model.respond(plan, sent))
            pending.append(reply)
            batch = [c for c in reply.contents if isinstance(c, FunctionCallContent)]
            if not batch:
                break
            calls += len(batch)
            pending.extend(self._results(batch, turn))
        saved = await self.provider.save_turn(self.session_id, pending, end_of_turn=True)
        self.appended.extend(saved.appended)
        info = await self.store.session(self.session_id)
        event = saved.compaction if isinstance(saved.compaction, CompactionEvent) else None
        return TurnRecord(
            turn=turn,
            request=plan.request,
            sent_tokens=tuple(sent_tokens),
            budget=self.strategy.input_budget_tokens,
            tool_calls=calls,
            appended=len(saved.appended),
            stored_messages=info.stored_messages,
            stored_tokens=info.stored_tokens,
            active_tokens=info.active_tokens,
            compaction_event=None if event is None else event.id,
            tokens_saved=0 if event is None else event.tokens_saved,
        )

    def _results(self, batch: list[FunctionCallContent], turn: int) -> list[Message]:
        return [
            self._named(
                Message(
                    role="tool",
                    contents=[
                        FunctionResultContent(
                            call_id=call.call_id,
                            result=run_tool(call, seed=self.config.seed, turn=turn),
                        )
                    ],
                )
            )
            for call in batch
        ]


def _violations(
    turns: Sequence[TurnRecord], appended: Sequence[str], stored: Sequence[str]
) -> list[str]:
    found = [
        f"turn {t.turn}: sent {t.max_sent} tokens, over the input budget of {t.budget}"
        for t in turns
        if not t.within_budget
    ]
    missing = set(appended) - set(stored)
    if missing:
        found.append(f"{len(missing)} appended messages are missing from the store")
    if len(stored) != len(set(stored)) or len(stored) != len(appended):
        found.append(f"{len(appended)} messages appended but {len(stored)} stored")
    return found


async def _new_session_id(store: DemoBackend, seed: int) -> str:
    """The seed's own session id (``demo-`` and 12 hex digits) while the store does not
    hold it, else a random one."""
    from store.errors import SessionNotFound

    seeded = f"demo-{rng_for(seed, 'session').getrandbits(48):012x}"
    try:
        await store.session(seeded)
    except SessionNotFound:
        return seeded
    return f"demo-{uuid.uuid4().hex[:12]}"


async def run_demo(
    store: DemoBackend,
    config: DemoConfig | None = None,
    *,
    on_turn: Callable[[TurnRecord], Any] | None = None,
) -> DemoReport:
    """Play the scripted conversation on ``store`` and report what was sent and stored."""
    config = config or DemoConfig()
    if config.turns < 1:
        raise ValueError("turns must be >= 1")
    session_id = config.session_id or await _new_session_id(store, config.seed)
    runner = _Runner(store, config, session_id)
    turns: list[TurnRecord] = []
    for number in range(1, config.turns + 1):
        record = await runner.turn(number)
        turns.append(record)
        if on_turn is not None:
            on_turn(record)
    stored = [
        m.message_id
        async for m in store.aiter_history(session_id, include_excluded=True)
        if m.kind != "summary"
    ]
    return DemoReport(
        session_id=session_id,
        budget=runner.strategy.input_budget_tokens,
        turns=tuple(turns),
        events=tuple(await store.audit(session_id)),
        appended_ids=tuple(runner.appended),
        stored_ids=tuple(stored),
        violations=tuple(_violations(turns, runner.appended, stored)),
    )
