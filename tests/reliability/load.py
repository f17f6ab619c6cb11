"""A load test of the provider's two phases: many sessions, many writers, one database.

Each writer opens its own store (its own connections) on the database and drives its
share of the sessions turn by turn, interleaved: the *before* phase
(:meth:`~store.provider.TwoPhaseProvider.load` with the user's message in flight), then
the *after* phase (:meth:`~store.provider.TwoPhaseProvider.save_turn` of the whole turn:
the user's message, a tool call, its result and the answer, then the after-run
compaction). The run is bounded in count (turns per session) and in time (a deadline
after which no writer starts a turn). Afterwards every session's stored history is read
back: every message written must be there exactly once, in the order written.

Only loopback databases are accepted (a SQLite file, or PostgreSQL on ``127.0.0.1``,
``::1`` or ``localhost``): this is a test, never a tool to point at a server.

Run it from the command line for figures (``docs/retention.md`` records some)::

    python -m tests.reliability.load --url postgresql://postgres@127.0.0.1:5432/DB \\
        --sessions 200 --writers 16 --turns 20 --seconds 120

The test suite runs a short variant (``tests/reliability/test_load.py``); the long one
runs with ``CHATLEDGER_LOAD=long``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from dataclasses import dataclass, field

from sqlalchemy.engine import make_url

from store import HistoryStore
from store.provider import TwoPhaseProvider
from strategies.messages import FunctionCallContent, FunctionResultContent, Message
from strategies.tokenizers import CharacterEstimatorTokenizer

__all__ = ["LONG", "SHORT", "LoadPlan", "LoadResult", "check_loopback", "run_load"]

_LOOPBACK = ("127.0.0.1", "::1", "localhost")


@dataclass(frozen=True)
class LoadPlan:
    """How much load: the bound in count (``sessions`` x ``turns``) and in time."""

    sessions: int
    writers: int
    turns: int
    """Turns per session."""
    seconds: float
    """No turn starts after this many seconds."""
    window: int = 3000
    """The provider's context window (tokens): small enough that compaction runs."""


SHORT = LoadPlan(sessions=6, writers=3, turns=4, seconds=60, window=800)
"""What the test suite runs on each backend."""
LONG = LoadPlan(sessions=200, writers=16, turns=20, seconds=120)
"""What ``CHATLEDGER_LOAD=long`` runs."""


@dataclass
class LoadResult:
    """What a run did and how long each phase took."""

    plan: LoadPlan
    elapsed: float = 0.0
    turns: int = 0
    errors: list[str] = field(default_factory=list)
    load_ms: list[float] = field(default_factory=list)
    save_ms: list[float] = field(default_factory=list)
    written: dict[str, list[str]] = field(default_factory=dict)
    """Each session's message ids, in the order written."""

    @property
    def turns_per_second(self) -> float:
        return self.turns / self.elapsed if self.elapsed else 0.0

    @staticmethod
    def _percentile(values: list[float], q: int) -> float:
        if len(values) < 2:
            return values[0] if values else 0.0
        return statistics.quantiles(values, n=100, method="inclusive")[q - 1]

    def summary(self) -> dict[str, float]:
        """The figures: turns/s, errors, p50 and p99 of both phases (ms)."""
        return {
            "turns": self.turns,
            "seconds": round(self.elapsed, 2),
            "turns_per_second": round(self.turns_per_second, 1),
            "errors": len(self.errors),
            "load_p50_ms": round(self._percentile(self.load_ms, 50), 2),
            "load_p99_ms": round(self._percentile(self.load_ms, 99), 2),
            "save_p50_ms": round(self._percentile(self.save_ms, 50), 2),
            "save_p99_ms": round(self._percentile(self.save_ms, 99), 2),
        }


def check_loopback(url: str) -> None:
    """Refuse a database that is not a SQLite file or a server on the loopback."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return
    if parsed.host not in _LOOPBACK:
        raise ValueError(f"the load test runs against loopback databases only, not {parsed.host}")


def _turn(session: str, turn: int) -> list[Message]:
    p = f"{session}-t{turn}"
    call_id = f"{p}-call"
    return [
        Message.text_message("user", f"question {turn} about order {session}", message_id=f"{p}-u"),
        Message(
            role="assistant",
            message_id=f"{p}-c",
            contents=[FunctionCallContent(call_id=call_id, name="lookup", arguments={"n": turn})],
        ),
        Message(
            role="tool",
            message_id=f"{p}-r",
            contents=[
                FunctionResultContent(
                    call_id=call_id, result=" ".join(f"row{turn}-{i}" for i in range(60))
                )
            ],
        ),
        Message.text_message("assistant", f"answer {turn}: all good", message_id=f"{p}-a"),
    ]


async def _writer(url: str, sessions: list[str], result: LoadResult, deadline: float) -> None:
    tokenizer = CharacterEstimatorTokenizer()
    async with HistoryStore.open(url, tokenizer=tokenizer) as store:
        provider = TwoPhaseProvider(
            store,
            max_context_window_tokens=result.plan.window,
            max_output_tokens=200,
            tokenizer=tokenizer,
        )
        for turn in range(result.plan.turns):
            for session in sessions:
                if time.monotonic() >= deadline:
                    return
                messages = _turn(session, turn)
                try:
                    started = time.perf_counter()
                    await provider.load(session, pending=messages[:1])
                    loaded = time.perf_counter()
                    await provider.save_turn(session, messages, end_of_turn=True)
                    saved = time.perf_counter()
                except Exception as error:  # every failure is counted, none may happen
                    result.errors.append(f"{session} turn {turn}: {type(error).__name__}: {error}")
                    continue
                result.load_ms.append((loaded - started) * 1000)
                result.save_ms.append((saved - loaded) * 1000)
                result.turns += 1
                result.written.setdefault(session, []).extend(m.message_id for m in messages)


async def run_load(url: str, plan: LoadPlan) -> LoadResult:
    """Run ``plan`` against ``url`` (migrated, or empty: the first store creates the
    schema) and return what happened; :func:`verify` checks the stored histories."""
    check_loopback(url)
    async with HistoryStore.open(url):  # the schema, before the writers race for it
        pass
    result = LoadResult(plan=plan)
    names = [f"load-{i:04d}" for i in range(plan.sessions)]
    shares = [names[w :: plan.writers] for w in range(plan.writers)]
    started = time.monotonic()
    deadline = started + plan.seconds
    await asyncio.wait_for(
        asyncio.gather(*(_writer(url, share, result, deadline) for share in shares if share)),
        timeout=plan.seconds + 120,  # a turn begun before the deadline may finish
    )
    result.elapsed = time.monotonic() - started
    return result


async def verify(url: str, result: LoadResult) -> list[str]:
    """The problems of the stored histories: a message missing, duplicated, out of
    order, or not written by the run (empty when every message is there once, in order)."""
    problems: list[str] = []
    async with HistoryStore.open(url, tokenizer=CharacterEstimatorTokenizer()) as store:
        for session, expected in sorted(result.written.items()):
            stored = [
                m.message_id
                async for m in store.aiter_history(session, include_excluded=True)
                if m.kind != "summary"
            ]
            if stored != expected:
                problems.append(
                    f"{session}: {len(stored)} stored ({len(set(stored))} distinct), "
                    f"{len(expected)} written, same order: {stored == expected}"
                )
    return problems


def main() -> None:
    """``python -m tests.reliability.load``: run a plan and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--sessions", type=int, default=LONG.sessions)
    parser.add_argument("--writers", type=int, default=LONG.writers)
    parser.add_argument("--turns", type=int, default=LONG.turns)
    parser.add_argument("--seconds", type=float, default=LONG.seconds)
    args = parser.parse_args()
    plan = LoadPlan(args.sessions, args.writers, args.turns, args.seconds)

    async def go() -> None:
        result = await run_load(args.url, plan)
        problems = await verify(args.url, result)
        print({**result.summary(), "histories_wrong": len(problems)})
        for line in [*result.errors[:10], *problems[:10]]:
            print(" ", line)

    asyncio.run(go())


if __name__ == "__main__":
    main()
