"""One measurement in a fresh process: ``python -m benchmarks.child '<json spec>'``.

The runner starts one child per run and reads the last line of its standard output, a
JSON object: ``{"status": "ok", "metrics": {...}}``, ``{"status": "skipped", "reason":
...}`` or ``{"status": "error", "reason": ...}``. Peak memory is the child's own
``ru_maxrss``. Generating messages and converting them to a system's native objects
happen outside the timed sections. A child with a ``source`` (a ``--baseline`` system)
measures nothing unless ``store`` and ``strategies`` were imported from there.
"""

from __future__ import annotations

import asyncio
import json
import resource
import statistics
import sys
import time
import traceback
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any

from benchmarks.baseline import imported_elsewhere
from benchmarks.generator import ChatDict, ConversationGenerator
from benchmarks.peers import System, Target, load_system
from benchmarks.tokenizing import CountingTokenizer, TokenCounter, Unavailable, load_tiktoken

__all__ = ["ChildSpec", "main", "run_spec"]

Metrics = dict[str, float]


@dataclass(frozen=True, slots=True)
class ChildSpec:
    """What one child measures."""

    workload: str
    system: str
    backend: str
    location: str
    size: int = 0
    seed: int = 7
    turns: int = 20
    repeats: int = 10
    batch: int = 1000
    source: str = ""
    """The worktree ``store`` and ``strategies`` must come from ('': wherever Python finds
    them, the working tree)."""

    def target(self) -> Target:
        """The storage target."""
        return Target(self.backend, self.location)  # type: ignore[arg-type]


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _batches(spec: ChildSpec) -> Iterator[list[ChatDict]]:
    stream = ConversationGenerator(spec.seed).chat_dicts(spec.size)
    while batch := list(islice(stream, spec.batch)):
        yield batch


async def _load(system: System, spec: ChildSpec) -> Metrics:
    """Bulk-load ``spec.size`` messages; only the system's own calls are timed."""
    elapsed = 0.0
    for batch in _batches(spec):
        native = system.prepare(batch)
        start = time.perf_counter()
        await system.load(native)
        elapsed += time.perf_counter() - start
    start = time.perf_counter()
    finish = await system.finish_load()
    elapsed += time.perf_counter() - start
    return {"seconds": elapsed, **finish}


async def _build(system: System, spec: ChildSpec) -> Metrics:
    """Load ``spec.size`` messages and settle (every ``system.settle_every`` messages)."""
    await system.open(create=True)
    every = system.settle_every
    loaded = 0
    metrics: Metrics = {"seconds": 0.0, "settle_s": 0.0}
    try:
        for batch in _batches(spec):
            native = system.prepare(batch)
            start = time.perf_counter()
            await system.load(native)
            metrics["seconds"] += time.perf_counter() - start
            loaded += len(batch)
            if every and loaded % every == 0 and loaded < spec.size:
                metrics["settle_s"] += (await system.settle()).get("settle_s", 0.0)
        start = time.perf_counter()
        finish = await system.finish_load()
        metrics["seconds"] += time.perf_counter() - start
        settled = await system.settle()
        metrics["settle_s"] += settled.get("settle_s", 0.0)
        return {**finish, **settled, **metrics}
    finally:
        await system.close()


async def _bulk_import(system: System, spec: ChildSpec) -> Metrics:
    await system.open(create=True)
    try:
        metrics = await _load(system, spec)
        metrics["msgs_per_s"] = spec.size / metrics["seconds"] if metrics["seconds"] else 0.0
        metrics.update(system.extra_metrics())
    finally:
        await system.close()
    metrics["peak_rss_mb"] = _rss_mb()
    return metrics


def _turns(spec: ChildSpec, count: int) -> list[list[ChatDict]]:
    generator = ConversationGenerator(spec.seed + 1, id_prefix=f"t{spec.seed}")
    return list(islice(generator.turns(), count))


async def _turn(system: System, native: Any) -> int:
    await system.append_turn(native)
    await system.after_run()
    return await system.context()


async def _per_turn(system: System, spec: ChildSpec) -> Metrics:
    turns = _turns(spec, spec.turns + 1)
    await system.open(create=False)
    try:
        await _turn(system, system.prepare(turns[0]))  # warm-up, not timed
        rss_setup = _rss_mb()
        samples: list[float] = []
        context_size = 0
        for turn in turns[1:]:
            native = system.prepare(turn)
            start = time.perf_counter()
            context_size = await _turn(system, native)
            samples.append(time.perf_counter() - start)
    finally:
        await system.close()
    return {
        "per_turn_s": statistics.median(samples),
        "per_turn_max_s": max(samples),
        "context_messages": context_size,
        "rss_after_warmup_mb": rss_setup,
        "peak_rss_mb": _rss_mb(),
    }


async def _repeat(system: System, spec: ChildSpec, call: Callable[[], Awaitable[int]]) -> Metrics:
    await system.open(create=False)
    try:
        count = await call()  # warm-up, not timed
        samples: list[float] = []
        for _ in range(spec.repeats):
            start = time.perf_counter()
            count = await call()
            samples.append(time.perf_counter() - start)
    finally:
        await system.close()
    return {"seconds": statistics.median(samples), "messages": count, "peak_rss_mb": _rss_mb()}


async def _projection(system: System, spec: ChildSpec) -> Metrics:
    return await _repeat(system, spec, system.context)


async def _full_read(system: System, spec: ChildSpec) -> Metrics:
    return await _repeat(system, spec, system.full_read)


async def _token_counting(system: System, spec: ChildSpec) -> Metrics:
    """A ``spec.turns``-turn run from empty; how often each stored message is tokenized.

    The baseline is one pass over the stored messages (summaries included) with a fresh
    counting tokenizer: a ratio of 1.00 means every stored message was tokenized exactly
    once and nothing else was. Texts a strategy generated without storing them, and
    texts tokenized again, show as calls beyond the baseline.
    """
    counter = system.tokenizer
    assert isinstance(counter, CountingTokenizer)
    generator = ConversationGenerator(spec.seed)
    await system.open(create=True)
    appended = 1
    try:
        await system.append_turn(system.prepare(list(generator.chat_dicts(1))))
        for turn in islice(generator.turns(), spec.turns):
            appended += len(turn)
            await _turn(system, system.prepare(turn))
        baseline = CountingTokenizer(counter.inner)
        stored = await system.count_stored_once(baseline)
    finally:
        await system.close()
    metrics: Metrics = {
        "tokenizer_calls": counter.calls,
        "stored_messages": appended,
        "calls_per_message": counter.calls / appended,
        "max_repeats_one_text": counter.max_repeats(),
    }
    if stored is not None and baseline.calls:
        excess, worst = counter.excess_over(baseline)
        metrics.update(
            {
                "stored_with_summaries": stored,
                "one_pass_calls": baseline.calls,
                "passes_per_stored_message": counter.calls / baseline.calls,
                "calls_beyond_one_pass": excess,
                "max_extra_one_text": worst,
            }
        )
    return metrics


WORKLOADS: dict[str, Callable[[System, ChildSpec], Awaitable[Metrics]]] = {
    "build": _build,
    "bulk_import": _bulk_import,
    "per_turn": _per_turn,
    "projection": _projection,
    "full_read": _full_read,
    "token_counting": _token_counting,
}


class _CharEstimate:
    """Four characters per token; used only to count calls when tiktoken is missing."""

    def count_tokens(self, text: str) -> int:
        return len(text) // 4


def _tokenizer_for(workload: str) -> TokenCounter | None:
    if workload != "token_counting":
        return None
    try:
        inner = load_tiktoken()
    except Unavailable:
        inner = _CharEstimate()
    return CountingTokenizer(inner)


async def run_spec(spec: ChildSpec) -> dict[str, Any]:
    """Run one measurement and return the result object the runner expects."""
    try:
        if spec.source and (elsewhere := imported_elsewhere(spec.source)):
            print(elsewhere, file=sys.stderr)
            return {"status": "error", "reason": elsewhere}
        system = load_system(spec.system, spec.target(), tokenizer=_tokenizer_for(spec.workload))
        if spec.workload == "probe":
            return {"status": "ok", "metrics": {}}
        metrics = await WORKLOADS[spec.workload](system, spec)
    except Unavailable as exc:
        return {"status": "skipped", "reason": str(exc)}
    except Exception as exc:  # reported to the runner, which records the failure
        traceback.print_exc()
        return {"status": "error", "reason": f"{type(exc).__name__}: {exc}"}
    return {"status": "ok", "metrics": metrics}


def main(argv: list[str] | None = None) -> int:
    """Entry point: one JSON spec in, one JSON line out."""
    args = sys.argv[1:] if argv is None else argv
    spec = ChildSpec(**json.loads(args[0]))
    result = asyncio.run(run_spec(spec))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
