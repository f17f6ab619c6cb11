"""One measurement in a fresh process: ``python -m benchmarks.child '<json spec>'``.

The runner starts one child per run and reads the last line of its standard output, a
JSON object: ``{"status": "ok", "metrics": {...}}``, ``{"status": "skipped", "reason":
...}`` or ``{"status": "error", "reason": ...}``. Peak memory is the child's own
``ru_maxrss``. Generating messages and converting them to a system's native objects
happen outside the timed sections. A child with a ``source`` (a ``--baseline`` system)
measures nothing unless ``store`` and ``strategies`` were imported from there.

The workloads of scale: ``many_sessions`` runs one session's turns, its projection,
``sessions()`` paging and the view cache's bound in a database of ``size`` sessions
(built by ``build_sessions``); ``many_writers`` and ``shared_session`` start ``size``
``writer`` children, on their own sessions or all on one, released together once each
has opened its store; ``deferred_compaction`` times a provider's turns with a slow
summarizer, compaction inline and deferred.
"""

from __future__ import annotations

import asyncio
import gc
import json
import resource
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, replace
from itertools import islice
from pathlib import Path
from typing import Any

from benchmarks.baseline import imported_elsewhere
from benchmarks.generator import ChatDict, ConversationGenerator, Dataset
from benchmarks.peers import SESSION_ID, System, Target, load_system
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
    dataset: str = "mixed"
    """The generator's data set (:data:`benchmarks.generator.DATASETS`)."""
    start: int = 0
    """``build_sessions``: sessions the database holds already."""
    probe: int = 1_000
    """``build_sessions``: messages of the measured session."""
    filler: int = 20
    """``build_sessions``: short messages of every other session."""
    delay: float = 2.0
    """``deferred_compaction``: seconds the summarizer takes."""
    index: int = 0
    """``writer``: which writer this is."""
    session_id: str = ""
    """``writer``: the session written ('': the writer's own)."""
    history: int = 0
    """``many_writers``, ``shared_session``: turns each written session holds, settled,
    before the writers start."""

    def target(self) -> Target:
        """The storage target."""
        return Target(self.backend, self.location)  # type: ignore[arg-type]


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


SEARCH_SESSIONS = 10_000
"""Sessions of the ``spread`` data set (``search_sessions``, ``erasure``): the stored
messages spread evenly over them, one ``append`` a session (:func:`_spread`)."""


def _dataset(spec: ChildSpec) -> Dataset:
    if spec.dataset == "spread":
        return "mixed"
    return spec.dataset  # type: ignore[return-value]  # checked by the generator


def _search_session(index: int) -> str:
    return f"searched-{index:05d}"


def _spread(size: int) -> tuple[int, int]:
    """Sessions of the ``spread`` data set at ``size`` messages, and messages each:
    :data:`SEARCH_SESSIONS`, fewer where it is small (two messages each at least)."""
    sessions = max(1, min(SEARCH_SESSIONS, size // 2))
    return sessions, max(1, size // sessions)


def _middle_session(size: int) -> str:
    """The session in the middle of the ``spread`` data set's."""
    return _search_session(_spread(size)[0] // 2)


def _batches(spec: ChildSpec) -> Iterator[list[ChatDict]]:
    stream = ConversationGenerator(spec.seed, dataset=_dataset(spec)).chat_dicts(spec.size)
    while batch := list(islice(stream, spec.batch)):
        yield batch


async def _load(system: System, spec: ChildSpec) -> Metrics:
    """Bulk-load ``spec.size`` messages; only the system's own calls are timed.

    One full collection before the first timed call, so that a collection of the
    set-up's garbage (the process's imports, the generator, the first batch's
    conversion) is not charged to the import: with a single batch (1,000 messages) it
    fell inside the timed append or not by chance, halving or doubling the figure."""
    elapsed = 0.0
    for index, batch in enumerate(_batches(spec)):
        native = system.prepare(batch)
        if index == 0:
            gc.collect()
        start = time.perf_counter()
        await system.load(native)
        elapsed += time.perf_counter() - start
    start = time.perf_counter()
    finish = await system.finish_load()
    elapsed += time.perf_counter() - start
    return {"seconds": elapsed, **finish}


async def _build(system: System, spec: ChildSpec) -> Metrics:
    """Load ``spec.size`` messages and settle (every ``system.settle_every`` messages);
    the ``spread`` data set: spread over :data:`SEARCH_SESSIONS` sessions instead."""
    if spec.dataset == "spread":
        return await _build_spread(system, spec)
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


async def _build_spread(system: System, spec: ChildSpec) -> Metrics:
    """Store ``spec.size`` messages of the mixed data set as :data:`SEARCH_SESSIONS`
    sessions of equal length, one ``append`` each (no compaction: every message is
    searched, excluded or not)."""
    await system.open(create=True)
    each = _spread(spec.size)[1]
    stream = ConversationGenerator(spec.seed, dataset="mixed").chat_dicts(spec.size)
    start = time.perf_counter()
    try:
        index = 0
        while batch := list(islice(stream, each)):
            system.session_id = _search_session(index)
            await system.load(system.prepare(batch))
            index += 1
    finally:
        await system.close()
    return {"seconds": time.perf_counter() - start, "sessions": float(index)}


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
        # a full collection now, not in whichever timed turn first crosses the collector's
        # threshold: the objects left by opening and warming up (about 130 ms of it at
        # 10k messages) are the setup's, and where that collection fell decided the worst turn
        gc.collect()
        rss_setup = _rss_mb()
        samples: list[float] = []
        context_size = 0
        cache = _view_cache(system)
        held = 0
        for turn in turns[1:]:
            native = system.prepare(turn)
            start = time.perf_counter()
            context_size = await _turn(system, native)
            samples.append(time.perf_counter() - start)
            held = max(held, cache.size) if cache is not None else 0
    finally:
        await system.close()
    metrics: Metrics = {
        "per_turn_s": statistics.median(samples),
        "per_turn_max_s": max(samples),
        "context_messages": context_size,
        "rss_after_warmup_mb": rss_setup,
        "peak_rss_mb": _rss_mb(),
    }
    if cache is not None:
        metrics.update(
            cache_max_messages=held,
            cache_bound=cache._max,
            cache_within_bound=float(held <= cache._max),
        )
    return metrics


def _view_cache(system: System) -> Any:
    """chatledger's view cache (``size`` messages held, bound ``_max``), or None for a
    system without one. The bound is the cache's own; it has no public view of its size."""
    store = getattr(system, "store", None)
    return getattr(store, "_cache", None)


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


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


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


def _filler_id(index: int) -> str:
    return f"s{index:07d}"


async def _built_sessions(system: System) -> int:
    """How many sessions an interrupted build stored (they are stored in order, so a
    bisection finds the first missing one); 0 when it had not finished the measured
    session, whose database is then started again."""
    await system.open(create=True)
    try:
        store = system.store  # type: ignore[attr-defined]
        low, high = 1, 1
        while (await store.sessions(limit=1, after=_filler_id(high - 1))) != []:
            low, high = high, high * 2
        while low < high:  # the first index whose session is missing is in [low, high]
            middle = (low + high) // 2
            if await store.sessions(limit=1, after=_filler_id(middle - 1)) == []:
                high = middle
            else:
                low = middle + 1
        found = low
    finally:
        await system.close()
    if found <= 1:
        await asyncio.to_thread(Path(system.target.location).unlink, missing_ok=True)
        return 0
    return found


async def _build_sessions(system: System, spec: ChildSpec) -> Metrics:
    """Grow a database of ``spec.start`` sessions to ``spec.size`` (``spec.start`` -1:
    as many as an interrupted build stored): the measured session (``spec.probe``
    messages, settled) first, then sessions of ``spec.filler`` short messages, each one
    ``append`` (one transaction), as a fleet of agents fills it."""
    start = time.perf_counter()
    first = spec.start
    if first < 0:
        first = await _built_sessions(system)
    if first == 0:
        await _build(system, replace(spec, size=spec.probe))
    await system.open(create=False)
    try:
        store = system.store  # type: ignore[attr-defined]
        for index in range(max(first, 1), spec.size):
            generator = ConversationGenerator(spec.seed + index, dataset="short")
            batch = system.prepare(list(generator.chat_dicts(spec.filler)))
            await store.append(_filler_id(index), batch)
    finally:
        await system.close()
    return {"seconds": time.perf_counter() - start}


async def _timed(call: Callable[[], Awaitable[Any]], repeats: int) -> float:
    await call()  # warm-up, not timed
    samples: list[float] = []
    for _ in range(repeats):
        start = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


SESSIONS_PAGE = 100
"""Sessions a ``sessions()`` page of ``many_sessions`` asks for (a database of fewer
sessions gives a shorter page, whose time is no base for growth)."""


async def _many_sessions(system: System, spec: ChildSpec) -> Metrics:
    """The measured session's turns and projection, ``sessions()`` pages, and the view
    cache's size while the store projects up to 2,000 other sessions."""
    turns = [system.prepare(t) for t in _turns(spec, spec.turns + 1)]
    await system.open(create=False)
    try:
        store = system.store  # type: ignore[attr-defined]
        await _turn(system, turns[0])  # warm-up, not timed
        samples: list[float] = []
        for native in turns[1:]:
            start = time.perf_counter()
            await _turn(system, native)
            samples.append(time.perf_counter() - start)
        metrics: Metrics = {"per_turn_s": statistics.median(samples)}
        metrics["projection_s"] = await _timed(system.context, spec.repeats)
        deep = _filler_id(max(1, spec.size * 9 // 10))
        pages: dict[str, Callable[[], Awaitable[Any]]] = {
            "page_first_s": lambda: store.sessions(limit=SESSIONS_PAGE),
            "page_deep_s": lambda: store.sessions(limit=SESSIONS_PAGE, after=deep),
            "page_recent_s": lambda: store.sessions(limit=SESSIONS_PAGE, order="updated"),
        }
        for name, call in pages.items():
            metrics[name] = await _timed(call, spec.repeats)
        cache = store._cache  # the bound is the cache's own; no public view of its size
        largest = cache.size
        for index in range(1, min(spec.size, 2_001)):
            await store.context(_filler_id(index))
            largest = max(largest, cache.size)
        metrics.update(
            sessions=(totals := await store.stats()).sessions,
            stored_messages=totals.stored_messages,
            cache_max_messages=largest,
            cache_bound=cache._max,
            cache_within_bound=float(largest <= cache._max),
        )
    finally:
        await system.close()
    metrics["peak_rss_mb"] = _rss_mb()
    return metrics


def _own_session(index: int) -> str:
    """The session of writer ``index`` when each writer has its own."""
    return f"writer-{index}"


def _written_sessions(spec: ChildSpec, *, shared: bool) -> list[str]:
    """The sessions ``spec.size`` writers write: one, or one each."""
    return [SESSION_ID] if shared else [_own_session(index) for index in range(spec.size)]


async def _writer(system: System, spec: ChildSpec) -> Metrics:
    """One writer process: a warm-up turn, then (once the parent says go) ``spec.turns``
    turns, each timed; an error is counted and the writer goes on."""
    system.session_id = spec.session_id or _own_session(spec.index)
    generator = ConversationGenerator(spec.seed + spec.index, id_prefix=f"w{spec.index}")
    turns = [system.prepare(t) for t in islice(generator.turns(), spec.turns + 1)]
    await system.open(create=False)
    errors = 0
    first_error = ""
    samples: list[float] = []
    try:
        await _turn(system, turns[0])
        print("ready", flush=True)
        sys.stdin.readline()  # the parent's go: every writer starts together
        began = time.time()
        for native in turns[1:]:
            start = time.perf_counter()
            try:
                await _turn(system, native)
            except Exception as exc:  # counted and reported: the workload expects none
                errors += 1
                first_error = first_error or f"{type(exc).__name__}: {exc}"
            samples.append(time.perf_counter() - start)
        ended = time.time()
    finally:
        await system.close()
    if first_error:
        print(first_error, file=sys.stderr)
    return {"began": began, "ended": ended, "errors": errors, "latencies": samples}  # type: ignore[dict-item]


def _writers(spec: ChildSpec, *, shared: bool) -> Metrics:
    """Start ``spec.size`` writers, release them together, and add up what they did."""
    children: list[subprocess.Popen[str]] = []
    for index in range(spec.size):
        writer = replace(
            spec, workload="writer", index=index, session_id=SESSION_ID if shared else ""
        )
        command = [sys.executable, "-m", "benchmarks.child", json.dumps(asdict(writer))]
        children.append(
            subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        )
    try:
        for child in children:  # each has opened its store and run one turn
            assert child.stdin is not None and child.stdout is not None
            if child.stdout.readline().strip() != "ready":
                raise RuntimeError("a writer ended before it was ready")
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        answers = []
        for child in children:
            out, _ = child.communicate()
            answers.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
    failed = [a for a in answers if a["status"] != "ok"]
    if failed:
        raise RuntimeError(f"a writer failed: {failed[0].get('reason')}")
    done = [a["metrics"] for a in answers]
    latencies = [x for d in done for x in d["latencies"]]
    wall = max(d["ended"] for d in done) - min(d["began"] for d in done)
    return {
        "turns_per_s": len(latencies) / wall,
        "p50_s": _percentile(latencies, 0.5),
        "p99_s": _percentile(latencies, 0.99),
        "errors": sum(d["errors"] for d in done),
        "turns": len(latencies),
    }


async def _stored_ids(system: System, sessions: Iterable[str]) -> list[str]:
    """The ids of every message the sessions store, excluded ones too, in order."""
    store = system.store  # type: ignore[attr-defined]
    found: list[str] = []
    for session in sessions:
        async for stored in store.aiter_history(session, include_excluded=True):
            found.append(stored.message.message_id)
    return found


async def _accounted(system: System, spec: ChildSpec, *, shared: bool) -> Metrics:
    """What the writers appended against what the store holds afterwards: ``lost`` (an
    appended message not stored) and ``duplicated`` (a message stored more than once);
    the summaries compaction added are neither."""
    appended: set[str] = set()
    for index in range(spec.size):
        generator = ConversationGenerator(spec.seed + index, id_prefix=f"w{index}")
        for turn in islice(generator.turns(), spec.turns + 1):
            appended.update(m.message_id for m in system.prepare(turn))
    sessions = _written_sessions(spec, shared=shared)
    await system.open(create=False)
    try:
        found = await _stored_ids(system, sessions)
    finally:
        await system.close()
    if not appended:
        raise RuntimeError("the writers' turns hold no message to account for")
    held = [i for i in found if i in appended]
    lost, duplicated = len(appended - set(held)), len(held) - len(set(held))
    return {"appended": len(appended), "lost": lost, "duplicated": duplicated}


_HISTORY_BATCH = 50
"""Turns of a written session's history loaded at once."""


async def _before_writers(system: System, spec: ChildSpec, *, shared: bool) -> None:
    """The schema, made once before the writers start, and each session they write
    holding ``spec.history`` turns of its own, loaded and settled (untimed)."""
    await system.open(create=True)
    try:
        sessions = _written_sessions(spec, shared=shared)
        for index, session in enumerate(sessions if spec.history else ()):
            system.session_id = session
            seed = spec.seed + 1_000 + index
            generator = ConversationGenerator(seed, id_prefix=f"h{index}")
            turns = list(islice(generator.turns(), spec.history))
            for start in range(0, len(turns), _HISTORY_BATCH):
                batch = [item for turn in turns[start : start + _HISTORY_BATCH] for item in turn]
                await system.load(system.prepare(batch))
            await system.settle()
    finally:
        await system.close()


async def _many_writers(system: System, spec: ChildSpec) -> Metrics:
    await _before_writers(system, spec, shared=False)
    metrics = await asyncio.to_thread(_writers, spec, shared=False)
    return {**metrics, **await _accounted(system, spec, shared=False)}


async def _shared_session(system: System, spec: ChildSpec) -> Metrics:
    await _before_writers(system, spec, shared=True)
    metrics = await asyncio.to_thread(_writers, spec, shared=True)
    return {**metrics, **await _accounted(system, spec, shared=True)}


async def _deferred_compaction(system: System, spec: ChildSpec) -> Metrics:
    """A provider's ``save_turn`` with a summarizer that takes ``spec.delay`` seconds and
    summarizes after every turn: compaction inline, then deferred (its own session);
    ``flush_s`` is what the deferred mode's ``aclose`` waited for."""
    from store.provider import TwoPhaseProvider
    from strategies.summarization import SummarizationStrategy
    from strategies.summarizers import FakeSummarizer

    await system.open(create=True)
    store = system.store  # type: ignore[attr-defined]
    metrics: Metrics = {}
    try:
        for mode in ("inline", "deferred"):
            strategy = SummarizationStrategy(
                client=FakeSummarizer(delay=spec.delay),
                target_count=2,
                threshold=0,
                tokenizer=store.tokenizer,
            )
            provider = TwoPhaseProvider(store, after_strategy=strategy, compaction=mode)
            session = f"deferred-{mode}"
            samples: list[float] = []
            for turn in _turns(replace(spec, seed=spec.seed + len(mode)), spec.size):
                native = system.prepare(turn)
                start = time.perf_counter()
                await provider.save_turn(session, native, end_of_turn=True, existing=())
                samples.append(time.perf_counter() - start)
            start = time.perf_counter()
            await provider.aclose()
            metrics[f"{mode}_turn_s"] = statistics.median(samples)
            metrics[f"{mode}_max_s"] = max(samples)
            metrics[f"{mode}_flush_s"] = time.perf_counter() - start
            metrics[f"{mode}_compactions"] = len(await store.audit(session))
    finally:
        await system.close()
    return metrics


DEPTHS = (0, 1, 10)
"""The depths of fork whose per-turn cost :func:`_branches` compares (0: the root)."""


async def _branches(system: System, spec: ChildSpec) -> Metrics:
    """A fork of the stored session at its end, timed ``spec.repeats`` times (each a new
    fork); then a chain of forks ten deep, and turns on the root and on the forks of
    depth 1 and 10, interleaved round by round (the same turn on each), timed."""
    await system.open(create=False)
    store = getattr(system, "store", None)
    if store is None or not hasattr(store, "fork"):
        await system.close()
        raise Unavailable(f"{spec.system} has no branches")
    root = system.session_id  # type: ignore[attr-defined]
    try:
        forks: list[float] = []
        for index in range(spec.repeats):
            gc.collect()
            start = time.perf_counter()
            await store.fork(root, new_session_id=f"bench-fork-{index}")
            forks.append(time.perf_counter() - start)
        chain = [root]
        for depth in range(1, max(DEPTHS) + 1):
            made = await store.fork(chain[-1], new_session_id=f"bench-depth-{depth}")
            chain.append(made.session_id)
        samples: dict[int, list[float]] = {depth: [] for depth in DEPTHS}
        for index, turn in enumerate(_turns(spec, spec.turns + 1)):
            for depth in DEPTHS:
                system.session_id = chain[depth]  # type: ignore[attr-defined]
                native = system.prepare(turn)
                start = time.perf_counter()
                await _turn(system, native)
                if index:  # the first round warms each session up
                    samples[depth].append(time.perf_counter() - start)
    finally:
        system.session_id = root  # type: ignore[attr-defined]
        await system.close()
    turn_s = {depth: statistics.median(samples[depth]) for depth in DEPTHS}
    metrics: Metrics = {"fork_s": statistics.median(forks), "fork_max_s": max(forks)}
    for depth in DEPTHS:
        metrics[f"per_turn_depth{depth}_s"] = turn_s[depth]
        if depth:
            metrics[f"depth{depth}_ratio"] = turn_s[depth] / turn_s[0]
    return metrics


SEARCH_QUERIES = ("invoice forecast", '"latency report"', "dash*")
"""The queries :func:`_search` times: two words, a phrase, a prefix (the generator's
vocabulary)."""
_DIRECT_ORDER = (
    "ORDER BY score DESC, coalesce(m.created_at, m.stored_at) DESC, m.seq DESC, "
    "m.session_id LIMIT 21"
)
_DIRECT = {
    "fts5": (
        "SELECT m.session_id, m.seq, m.message_id, m.role, m.contents, "
        "-bm25(chatledger_search) AS score FROM chatledger_search JOIN chatledger_messages m "
        "ON m.rowid = chatledger_search.rowid WHERE chatledger_search MATCH :q "
        "AND m.tenant = :tenant {scope}" + _DIRECT_ORDER
    ),
    "tsvector": (
        "SELECT m.session_id, m.seq, m.message_id, m.role, m.contents, "
        "ts_rank(v.vector, to_tsquery('simple'::regconfig, :q)) AS score "
        "FROM chatledger_search_vectors v JOIN chatledger_messages m ON m.tenant = v.tenant "
        "AND m.session_id = v.session_id AND m.seq = v.seq WHERE v.vector "
        "@@ to_tsquery('simple'::regconfig, :q) AND v.tenant = :tenant {scope}" + _DIRECT_ORDER
    ),
}
"""The limit: the same normalized query, ordered and cut as the store's, in one
statement that reads the rows and builds no hit."""


async def _search(system: System, spec: ChildSpec) -> Metrics:
    """The first page of each of :data:`SEARCH_QUERIES` over the stored messages,
    tenant-wide and scoped to the session, against the same query run directly
    (:data:`_DIRECT`), interleaved, ``spec.repeats`` rounds (the first a warm-up)."""
    from sqlalchemy import text

    from store.search import parse_query, to_fts5, to_tsquery
    from store.sql import dialect

    await system.open(create=False)
    store = getattr(system, "store", None)
    if store is None or not hasattr(store, "search"):
        await system.close()
        raise Unavailable(f"{spec.system} has no search")
    if spec.dataset == "spread":  # one session in the middle of the many
        system.session_id = _middle_session(spec.size)
    session = system.session_id
    kinds = ("wide", "scoped")
    samples: dict[str, list[float]] = {f"{w}_{k}": [] for w in ("store", "direct") for k in kinds}
    hits = 0
    try:
        async with store.engine.connect() as conn:
            index = dialect.of(conn).full_text
        compile_query = to_tsquery if index == "tsvector" else to_fts5
        for round_ in range(spec.repeats + 1):
            for query in SEARCH_QUERIES:
                compiled = compile_query(parse_query(query))
                for kind in kinds:
                    scoped = session if kind == "scoped" else None
                    gc.collect()
                    start = time.perf_counter()
                    page = await store.search(query, session_id=scoped)
                    took = time.perf_counter() - start
                    scope = (
                        f"AND {'v' if index == 'tsvector' else 'm'}.session_id = :session "
                        if scoped
                        else ""
                    )
                    statement = text(_DIRECT[index].format(scope=scope))
                    params = {"q": compiled, "tenant": store.tenant, "session": session}
                    gc.collect()
                    start = time.perf_counter()
                    async with store.engine.connect() as conn:
                        (await conn.execute(statement, params)).all()
                    direct = time.perf_counter() - start
                    if round_:
                        samples[f"store_{kind}"].append(took)
                        samples[f"direct_{kind}"].append(direct)
                        hits = max(hits, len(page.hits))
    finally:
        await system.close()
    metrics: Metrics = {"hits": hits}
    for kind in kinds:
        mine = statistics.median(samples[f"store_{kind}"])
        limit = statistics.median(samples[f"direct_{kind}"])
        metrics.update(
            {f"{kind}_s": mine, f"{kind}_direct_s": limit, f"{kind}_ratio": mine / limit}
        )
    return metrics


async def _erasure(system: System, spec: ChildSpec) -> Metrics:
    """A redaction of one message of a stored session, then of another: each its own
    transaction, with what erasure does to the search index (SQLite without FTS5's
    ``secure-delete``: an ``optimize`` merging the index), the checkpoint included."""
    await system.open(create=False)
    if spec.dataset == "spread":  # one session in the middle of the many
        system.session_id = _middle_session(spec.size)
    try:
        store = getattr(system, "store", None)
        if store is None or not hasattr(store, "redact"):
            raise Unavailable(f"{spec.system} has no redaction")
        ids: list[str] = []
        async for stored in store.aiter_history(system.session_id, include_excluded=True):
            ids.append(stored.message.message_id)
            if len(ids) == 1_000:
                break
        if len(ids) < 2:
            raise Unavailable(f"the session has {len(ids)} message(s), two are redacted")
        metrics: Metrics = {}
        for name, message_id in (("redact_s", ids[0]), ("redact_again_s", ids[-1])):
            gc.collect()
            start = time.perf_counter()
            await store.redact(system.session_id, [message_id], reason="benchmark")
            metrics[name] = time.perf_counter() - start
    finally:
        await system.close()
    return metrics


WORKLOADS: dict[str, Callable[[System, ChildSpec], Awaitable[Metrics]]] = {
    "branches": _branches,
    "search": _search,
    "search_sessions": _search,
    "erasure": _erasure,
    "build": _build,
    "bulk_import": _bulk_import,
    "per_turn": _per_turn,
    "projection": _projection,
    "full_read": _full_read,
    "full_read_tools": _full_read,
    "token_counting": _token_counting,
    "build_sessions": _build_sessions,
    "many_sessions": _many_sessions,
    "writer": _writer,
    "many_writers": _many_writers,
    "shared_session": _shared_session,
    "deferred_compaction": _deferred_compaction,
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
