"""The demo's scripted model: deterministic, offline, no key.

The model follows a per-turn plan, and derives each step's arguments and its final
answer from the tool results it was *sent*; if a result it needs is missing from the
request, it raises :class:`MissingResult` (the provider must always send the in-flight
tool calls with their results).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic import JsonValue

from store.demo.tools import FILES, SERVICES, rng_for
from store.errors import ChatledgerError
from strategies.messages import FunctionCallContent, FunctionResultContent, Message, TextContent

__all__ = ["SYSTEM_PROMPT", "MissingResult", "ScriptedModel", "TurnPlan"]

SYSTEM_PROMPT = (
    "You are an operations assistant. Use the tools to inspect logs, files and metrics, "
    "then answer briefly with the numbers you found."
)


class MissingResult(ChatledgerError, RuntimeError):
    """The model was sent a tool call without the result it needs."""


@dataclass
class TurnPlan:
    """What the user asks in one turn, and how the model will go about it."""

    kind: str
    request: str
    subject: tuple[str, ...]
    made: list[str] = field(default_factory=list)
    """Call ids the model made so far in this turn."""


def _result(sent: Sequence[Message], call_id: str) -> JsonValue:
    for message in reversed(sent):
        for content in message.contents:
            if isinstance(content, FunctionResultContent) and content.call_id == call_id:
                return content.result
    raise MissingResult(f"the model was sent call {call_id} without its result")


class ScriptedModel:
    """Plays a plan per turn: tool calls (some in parallel), then a text answer."""

    def __init__(self, *, seed: int) -> None:
        """A model whose choices are a function of ``seed`` and the turn number."""
        self.seed = seed
        self._calls = 0

    def plan(self, turn: int) -> TurnPlan:
        """The user request of ``turn``."""
        rng = rng_for(self.seed, turn, "plan")
        kind = rng.choices(("errors", "compare", "review", "chat"), weights=(4, 3, 3, 1))[0]
        if kind == "errors":
            svc = rng.choice(SERVICES)
            return TurnPlan(kind, f"Why is {svc} failing? Check its error logs.", (svc,))
        if kind == "compare":
            picked = tuple(rng.sample(SERVICES, 3))
            return TurnPlan(kind, f"Compare the latency of {', '.join(picked)}.", picked)
        if kind == "review":
            path = rng.choice(FILES)
            return TurnPlan(kind, f"Review {path}: how many handlers does it define?", (path,))
        return TurnPlan(kind, f"Thanks! Anything else I should watch (turn {turn})?", ())

    def _call(self, name: str, **arguments: JsonValue) -> FunctionCallContent:
        self._calls += 1
        return FunctionCallContent(call_id=f"call_{self._calls}", name=name, arguments=arguments)

    def _ask(self, plan: TurnPlan, *calls: FunctionCallContent) -> Message:
        plan.made.extend(c.call_id for c in calls)
        return Message(role="assistant", contents=list(calls))

    @staticmethod
    def _say(text: str) -> Message:
        return Message(role="assistant", contents=[TextContent(text=text)])

    def respond(self, plan: TurnPlan, sent: Sequence[Message]) -> Message:
        """The next assistant message of ``plan``, given the messages the model was sent."""
        step = len(plan.made)
        if plan.kind == "errors":
            return self._errors(plan, sent, step)
        if plan.kind == "compare":
            return self._compare(plan, sent, step)
        if plan.kind == "review":
            return self._review(plan, sent, step)
        return self._say("All quiet. Keep an eye on p99 latency and error budgets.")

    def _errors(self, plan: TurnPlan, sent: Sequence[Message], step: int) -> Message:
        svc = plan.subject[0]
        if step == 0:
            return self._ask(plan, self._call("search_logs", service=svc, level="ERROR"))
        if step == 1:
            header = str(_result(sent, plan.made[0])).split(" ", 3)
            return self._ask(
                plan,
                self._call("get_metrics", service=svc),
                self._call("calculate", expression=f"{header[0]} * 100 / {header[2]}"),
            )
        metrics = _result(sent, plan.made[1])
        share = _result(sent, plan.made[2])
        errors = metrics.get("errors", "?") if isinstance(metrics, dict) else "?"
        return self._say(
            f"{svc}: {share}% of the sampled log lines are errors; "
            f"{errors} errors in the metrics window."
        )

    def _compare(self, plan: TurnPlan, sent: Sequence[Message], step: int) -> Message:
        if step == 0:
            calls = [self._call("get_metrics", service=svc) for svc in plan.subject]
            return self._ask(plan, *calls)
        p99 = {}
        for call_id in plan.made:
            metrics = _result(sent, call_id)
            if isinstance(metrics, dict):
                p99[str(metrics["service"])] = metrics["p99_ms"]
        worst = max(p99, key=lambda s: int(str(p99[s])))
        return self._say(f"Slowest p99 is {worst} at {p99[worst]} ms ({len(p99)} compared).")

    def _review(self, plan: TurnPlan, sent: Sequence[Message], step: int) -> Message:
        path = plan.subject[0]
        if step == 0:
            return self._ask(plan, self._call("read_file", path=path))
        source = str(_result(sent, plan.made[0]))
        handlers = source.count("\ndef handler_")
        return self._say(f"{path} defines {handlers} handlers.")
