"""Runs every workload on every system, each run in a fresh process, interleaved.

Each stored size is built once per system (a SQLite file, a pickle, or a PostgreSQL
template database) and copied for every run. Runs are interleaved across systems so
that a noisy neighbour slows every system alike, and each figure is a median with
its spread. With a baseline (``--baseline``), each chatledger system has a twin that runs
another commit's ``store`` and ``strategies`` (:mod:`benchmarks.baseline`), planned and
interleaved like any other system.

The workloads of scale have their own sizes: ``many_sessions`` counts sessions (its
databases, up to 2 million short messages, are built once with appends and kept
between runs in the work directory's ``clbench-cache``, keyed by the schema and the
generator), ``many_writers`` and ``shared_session`` count writer processes, and
``deferred_compaction`` counts turns.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from benchmarks.baseline import Checkout
from benchmarks.child import ChildSpec
from benchmarks.peers import REGISTRY, SystemSpec, baseline_name, spec_for
from benchmarks.pg import PgAdmin

__all__ = ["PRESETS", "Case", "CaseResult", "Config", "Runner"]

REPO = Path(__file__).resolve().parents[1]
TEMPLATED = frozenset(
    {
        "per_turn",
        "projection",
        "full_read",
        "full_read_tools",
        "branches",
        "search",
        "search_sessions",
        "erasure",
    }
)
ALL_WORKLOADS = (
    "per_turn",
    "bulk_import",
    "projection",
    "full_read",
    "full_read_tools",
    "token_counting",
    "many_sessions",
    "many_writers",
    "shared_session",
    "deferred_compaction",
    "branches",
    "search",
    "search_sessions",
    "erasure",
)
SCALE = frozenset({"many_sessions", "many_writers", "shared_session", "deferred_compaction"})
"""Workloads whose sizes are not messages (sessions, writers, turns): mid-size runs."""
SESSIONS_BUILD = 1
"""Changes whenever ``build_sessions`` fills its databases differently."""
DATASET = {"full_read_tools": "tools", "search_sessions": "spread", "erasure": "spread"}
"""The generator's data set of a workload's stored sizes, where not ``"mixed"``."""
DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/test"


@dataclass(frozen=True, slots=True)
class Config:
    """What to run and how often."""

    sizes: tuple[int, ...] = (1_000, 10_000, 100_000, 1_000_000)
    """Stored sizes for chatledger on SQLite."""
    peer_sizes: tuple[int, ...] = (1_000, 10_000, 100_000)
    """Stored sizes for the peers."""
    pg_sizes: tuple[int, ...] = (1_000, 10_000, 100_000)
    """Stored sizes for chatledger on PostgreSQL."""
    runs: int = 3
    mid_runs: int = 3
    """Runs at 100,000 messages (to 999,999), and of the workloads of scale."""
    large_runs: int = 3
    """Runs at 1,000,000 messages and above (bulk import: one)."""
    full_read_max: int = 100_000
    """Largest size of the full-read workload (a full read is O(history) by nature)."""
    turns: int = 10
    """Timed turns per per-turn run."""
    repeats: int = 5
    """Timed calls per projection or full-read run."""
    token_turns: int = 1_000
    tool_sizes: tuple[int, ...] = (20_000, 100_000)
    """Stored sizes of the tool-heavy data set (full reads)."""
    session_counts: tuple[int, ...] = (1, 10_000, 100_000)
    """Sessions in the databases of ``many_sessions`` (20 short messages each, plus the
    measured session)."""
    session_probe: int = 1_000
    """Messages of the measured session of ``many_sessions``."""
    writer_counts: tuple[int, ...] = (1, 2, 4, 8)
    """Writer processes of ``many_writers``, each on its own session."""
    shared_writers: tuple[int, ...] = (1, 2, 4, 8)
    """Writer processes of ``shared_session``, all on one session (the same counts as
    ``many_writers``, so that the two tables compare row by row)."""
    writer_turns: int = 50
    """Timed turns of each writer."""
    writer_history: int = 0
    """Turns each written session holds before the writers start (0: they start empty,
    and a writer on its own session stays short of the 128k window, so its compactions
    plan nothing; at 400 every session is past the window, where every turn compacts)."""
    deferred_turns: int = 5
    """Turns of ``deferred_compaction`` in each mode."""
    summarizer_delay: float = 2.0
    """Seconds the summarizer of ``deferred_compaction`` takes."""
    systems: tuple[str, ...] = tuple(REGISTRY)
    workloads: tuple[str, ...] = ALL_WORKLOADS
    pg_url: str | None = DEFAULT_PG_URL
    timeout: float = 1_800.0
    seed: int = 7
    baseline: str | None = None
    """Short hash of a commit whose ``store`` and ``strategies`` also run, beside the
    working tree's, as ``<system>@<hash>`` for each chatledger system in ``systems``."""

    def all_systems(self) -> tuple[str, ...]:
        """``systems``, each chatledger system followed by its baseline, if any."""
        names: list[str] = []
        for name in self.systems:
            names.append(name)
            if self.baseline is not None and not REGISTRY[name].peer:
                names.append(baseline_name(name, self.baseline))
        return tuple(names)


PRESETS: dict[str, Config] = {
    "full": Config(),
    "quick": Config(
        sizes=(1_000, 10_000, 100_000),
        peer_sizes=(1_000, 10_000),
        pg_sizes=(1_000, 10_000),
        runs=3,
        turns=10,
        repeats=5,
        token_turns=200,
        tool_sizes=(20_000,),
        session_counts=(1, 10_000),
        writer_counts=(1, 2, 4),
        writer_turns=20,
        deferred_turns=3,
    ),
    "smoke": Config(
        sizes=(200,),
        peer_sizes=(200,),
        pg_sizes=(200,),
        runs=1,
        turns=3,
        repeats=2,
        token_turns=10,
        tool_sizes=(200,),
        session_counts=(1, 50),
        session_probe=200,
        writer_counts=(1, 2),
        shared_writers=(2,),
        writer_turns=3,
        deferred_turns=2,
        summarizer_delay=0.2,
        pg_url=None,
        timeout=120.0,
    ),
}


@dataclass(frozen=True, slots=True)
class Case:
    """One workload on one system at one size (for token counting: turns)."""

    workload: str
    system: str
    size: int


@dataclass(slots=True)
class CaseResult:
    """Every sample of a case, or why it did not run."""

    case: Case
    status: str = "ok"
    reason: str = ""
    samples: dict[str, list[float]] = field(default_factory=dict)

    def add(self, result: dict[str, Any]) -> None:
        """Record one child's answer."""
        if result["status"] != "ok":
            self.status, self.reason = result["status"], result.get("reason", "")
            return
        for name, value in result["metrics"].items():
            self.samples.setdefault(name, []).append(float(value))


class Runner:
    """Plans, builds the stored sizes, runs the children, collects samples."""

    def __init__(
        self, config: Config, *, work_dir: Path | None = None, baseline: Checkout | None = None
    ) -> None:
        if config.baseline != (baseline.short if baseline else None):
            raise ValueError(f"config names baseline {config.baseline}, given {baseline}")
        self.config = config
        self.baseline = baseline
        self.specs: dict[str, SystemSpec] = {n: spec_for(n) for n in config.all_systems()}
        self.work_dir = Path(tempfile.mkdtemp(prefix="clbench-", dir=work_dir))
        self.cache_dir = Path(work_dir or tempfile.gettempdir()) / "clbench-cache"
        """Where the databases of many sessions stay between runs."""
        self.pg = PgAdmin(config.pg_url, prefix=f"clbench_{os.getpid()}") if config.pg_url else None
        self.skipped: dict[str, str] = {}
        self.templates: dict[tuple[str, int, str], str] = {}
        """Built stored sizes by (system, size, data set)."""
        self.pg_templates: list[str] = []
        """Every template database created, built or not: all dropped at the end."""
        self.results: dict[Case, CaseResult] = {}
        self.log = sys.stderr

    # -- planning ---------------------------------------------------------------------

    def _backend_reason(self, name: str) -> str | None:
        if self.specs[name].backend != "postgresql":
            return None
        if self.pg is None:
            return "no PostgreSQL URL given (--pg-url)"
        return self.pg.reachable()

    def _probe_reason(self, name: str) -> str | None:
        """None when ``name`` can run here, else why not; a baseline that its backend
        allows but that cannot run ends the run (it was asked for by name)."""
        reason = self._backend_reason(name)
        if reason is not None:
            return reason
        source = self._source(name)
        answer = self._child(ChildSpec("probe", name, "file", "", source=source))
        if answer["status"] == "ok":
            return None
        reason = str(answer.get("reason", "?"))
        if source:
            raise SystemExit(f"the baseline {name} cannot run: {reason}")
        return reason

    def probe(self) -> list[str]:
        """The systems that can run here; the others go to ``skipped`` with a reason."""
        available: list[str] = []
        for name in self.specs:
            reason = self._probe_reason(name)
            if reason is None:
                available.append(name)
            else:
                self.skipped[name] = reason
        return available

    def plan(self, systems: list[str]) -> list[Case]:
        """Every case, ordered so that systems interleave at each workload and size."""
        cases: list[Case] = []
        for workload in self.config.workloads:
            for name in systems:
                spec = self.specs[name]
                if workload == "token_counting":
                    if spec.counts_tokens:
                        cases.append(Case(workload, name, self.config.token_turns))
                    continue
                if workload not in spec.workloads:
                    continue
                cases.extend(Case(workload, name, size) for size in self._sizes(workload, spec))
        return sorted(cases, key=lambda c: (ALL_WORKLOADS.index(c.workload), c.size))

    def _sizes(self, workload: str, spec: SystemSpec) -> tuple[int, ...]:
        """A workload's sizes on a system (messages, sessions, writers or turns)."""
        config = self.config
        scale = {
            "full_read_tools": config.tool_sizes,
            "many_sessions": config.session_counts,
            "many_writers": config.writer_counts,
            "shared_session": config.shared_writers,
            "deferred_compaction": (config.deferred_turns,),
        }
        if workload in scale:
            return scale[workload]
        if workload in ("branches", "search", "search_sessions", "erasure") and spec.peer:
            return ()  # chatledger's alone
        sizes = config.peer_sizes
        if not spec.peer:
            sizes = config.pg_sizes if spec.backend == "postgresql" else config.sizes
        if workload == "full_read":
            sizes = tuple(s for s in sizes if s <= config.full_read_max)
        return sizes

    def runs_for(self, case: Case) -> int:
        """How many fresh-process runs a case gets."""
        if case.workload == "token_counting":
            return 1
        if case.workload in SCALE:
            return min(self.config.runs, self.config.mid_runs)
        if case.size >= 1_000_000:
            return (
                1
                if case.workload == "bulk_import"
                else min(self.config.runs, self.config.large_runs)
            )
        if case.size >= 100_000:
            return min(self.config.runs, self.config.mid_runs)
        return self.config.runs

    # -- execution ----------------------------------------------------------------------

    def run(self) -> dict[Case, CaseResult]:
        """Probe, plan, build templates, then run every case, interleaved."""
        try:
            cases = self.plan(self.probe())
            self._build_templates(cases)
            self._build_sessions(cases)
            rounds = max((self.runs_for(c) for c in cases), default=0)
            for index in range(rounds):
                for case in cases:
                    if index < self.runs_for(case) and self._still_ok(case):
                        self._run_once(case, index)
        finally:
            self._cleanup()
        return self.results

    def _still_ok(self, case: Case) -> bool:
        result = self.results.get(case)
        return result is None or result.status == "ok"

    def _build_templates(self, cases: list[Case]) -> None:
        needed = sorted(
            {
                (c.system, c.size, DATASET.get(c.workload, "mixed"))
                for c in cases
                if c.workload in TEMPLATED
            }
        )
        for name, size, dataset in needed:
            parts = _template_parts(size, dataset)
            if self.pg is not None and self.specs[name].backend == "postgresql":
                self.pg_templates.append(self.pg.name(name, *parts))
            location = self._fresh_location(name, *parts)
            self._say(f"building {name} at {size:,} messages ({dataset})")
            spec = replace(self._spec("build", name, location, size), dataset=dataset)
            answer = self._child(spec)
            build = Case("build" if dataset == "mixed" else f"build_{dataset}", name, size)
            self.results[build] = result = CaseResult(build)
            result.add(answer)
            if answer["status"] == "ok":
                self.templates[(name, size, dataset)] = location
                if self.specs[name].backend == "postgresql":
                    assert self.pg is not None
                    self.pg.analyze(self.pg.name(name, *parts))

    def sessions_path(self, sessions: int) -> Path:
        """The cached database of ``sessions`` sessions (its name changes with the
        schema's migrations and with the generator, which make its content)."""
        digest = hashlib.sha256()
        for path in sorted((REPO / "migrations" / "versions").glob("*.py")):
            digest.update(path.name.encode())
        digest.update((REPO / "benchmarks" / "generator.py").read_bytes())
        filler = ChildSpec("build_sessions", "", "", "").filler
        digest.update(f"{SESSIONS_BUILD}:{self.config.session_probe}:{filler}".encode())
        return self.cache_dir / f"sessions_{sessions}_{digest.hexdigest()[:12]}.sqlite"

    def _build_sessions(self, cases: list[Case]) -> None:
        """Build each missing database of many sessions from the largest smaller one."""
        needed = sorted({(c.system, c.size) for c in cases if c.workload == "many_sessions"})
        if not needed:
            return
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        with (self.cache_dir / "build.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one builder at a time, across runs
            for name, size in needed:
                self._build_sessions_of(name, size)

    def _build_sessions_of(self, name: str, size: int) -> None:
        final = self.sessions_path(size)
        if final.exists():
            return
        smaller = [n for n in self.config.session_counts if n < size]
        cached = [n for n in sorted(smaller, reverse=True) if self.sessions_path(n).exists()]
        start = cached[0] if cached else 0
        partial = final.with_suffix(".building")
        if partial.exists():
            start = -1  # an interrupted build: the child finds where it stopped
        elif start:
            copying = final.with_suffix(".copying")
            shutil.copyfile(self.sessions_path(start), copying)
            copying.replace(partial)  # whole, or not there
        origin = "where it stopped" if start < 0 else f"{start:,}"
        self._say(f"building {size:,} sessions (from {origin}) in {final}")
        spec = replace(self._spec("build_sessions", name, str(partial), size), start=start)
        answer = self._child(spec, timeout=max(self.config.timeout, 0.05 * size))
        build = Case("build_sessions", name, size)
        self.results[build] = result = CaseResult(build)
        result.add(answer)
        if answer["status"] == "ok":
            partial.replace(final)

    def _template_key(self, case: Case) -> tuple[str, int, str]:
        return (case.system, case.size, DATASET.get(case.workload, "mixed"))

    def _missing(self, case: Case) -> str | None:
        """Why a case has nothing stored to run on, or None."""
        if case.workload in TEMPLATED and self._template_key(case) not in self.templates:
            dataset = self._template_key(case)[2]
            workload = "build" if dataset == "mixed" else f"build_{dataset}"
            build = self.results.get(Case(workload, case.system, case.size))
            return f"no stored template: {build.reason if build else '?'}"
        if case.workload == "many_sessions" and not self.sessions_path(case.size).exists():
            build = self.results.get(Case("build_sessions", case.system, case.size))
            return f"no database of {case.size:,} sessions: {build.reason if build else '?'}"
        return None

    def _run_once(self, case: Case, index: int) -> None:
        result = self.results.setdefault(case, CaseResult(case))
        if (reason := self._missing(case)) is not None:
            result.status, result.reason = "error", reason
            return
        self._say(f"run {index + 1}: {case.workload} {case.system} {case.size:,}")
        with self._run_location(case, index) as location:
            spec = self._spec(case.workload, case.system, location, case.size)
            result.add(self._child(replace(spec, dataset=self._template_key(case)[2])))

    def _spec(self, workload: str, name: str, location: str, size: int) -> ChildSpec:
        spec = ChildSpec(workload, name, self.specs[name].backend, location, size)
        config = self.config
        spec = replace(spec, seed=config.seed, turns=config.turns, repeats=config.repeats)
        spec = replace(spec, source=self._source(name))
        if workload == "token_counting":
            spec = replace(spec, turns=size, size=0)
        if workload in ("many_writers", "shared_session"):
            spec = replace(spec, turns=config.writer_turns, history=config.writer_history)
        if workload == "deferred_compaction":
            spec = replace(spec, delay=config.summarizer_delay)
        if workload in ("build_sessions", "many_sessions"):
            spec = replace(spec, probe=config.session_probe)
        return spec

    def _source(self, name: str) -> str:
        """Where a system's ``store`` and ``strategies`` must come from ('' for the
        working tree's)."""
        if self.baseline is None or name in self.config.systems:
            return ""
        return str(self.baseline.root)

    def _fresh_location(self, name: str, *parts: object) -> str:
        if self.specs[name].backend == "postgresql":
            assert self.pg is not None
            return self.pg.create(self.pg.name(name, *parts))
        suffix = ".pickle" if self.specs[name].backend == "file" else ".sqlite"
        stem = re.sub(r"\W", "_", "_".join([name, *(str(p) for p in parts)]))
        return str(self.work_dir / (stem + suffix))

    @contextmanager
    def _run_location(self, case: Case, index: int) -> Iterator[str]:
        """A fresh location for one run (a copy of the template when the case needs one)."""
        template = self.templates.get(self._template_key(case))
        if case.workload == "many_sessions":
            template = str(self.sessions_path(case.size))
        copy = template is not None and (
            case.workload in TEMPLATED or case.workload == "many_sessions"
        )
        if self.specs[case.system].backend == "postgresql":
            assert self.pg is not None
            database = self.pg.name(case.system, "run", index)
            parts = _template_parts(case.size, self._template_key(case)[2])
            source = self.pg.name(case.system, *parts) if copy else None
            try:
                yield self.pg.create(database, template=source)
            finally:
                self.pg.drop(database)
            return
        location = self._fresh_location(case.system, "run", index, case.size)
        if copy and template is not None:
            shutil.copyfile(template, location)
        try:
            yield location
        finally:
            Path(location).unlink(missing_ok=True)

    def _child(self, spec: ChildSpec, *, timeout: float | None = None) -> dict[str, Any]:
        command = [sys.executable, "-m", "benchmarks.child", json.dumps(asdict(spec))]
        env = None
        if spec.source:
            assert self.baseline is not None
            # -P: the working directory, which holds the working tree's store, stays off
            # the path; the checkout's import directory comes first instead
            command.insert(1, "-P")
            env = self.baseline.child_env(REPO)
        try:
            done = subprocess.run(
                command,
                cwd=REPO,
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout or self.config.timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            seconds = timeout or self.config.timeout
            return {"status": "error", "reason": f"timed out after {seconds:.0f} s"}
        lines = done.stdout.strip().splitlines()
        try:
            answer: dict[str, Any] = json.loads(lines[-1])
        except (IndexError, json.JSONDecodeError):
            tail = done.stderr.strip().splitlines()[-3:]
            return {"status": "error", "reason": f"exit {done.returncode}: {' | '.join(tail)}"}
        if answer["status"] == "error":
            self._say(f"  error: {answer.get('reason')}\n{done.stderr[-2000:]}")
        return answer

    def _cleanup(self) -> None:
        shutil.rmtree(self.work_dir, ignore_errors=True)
        if self.pg is None:
            return
        for database in self.pg_templates:
            self.pg.drop(database)

    def _say(self, text: str) -> None:
        print(text, file=self.log, flush=True)


def _template_parts(size: int, dataset: str) -> tuple[object, ...]:
    """What names a stored size's template (the data set, when not the default)."""
    return ("tpl", size) if dataset == "mixed" else ("tpl", dataset, size)


def iter_ok(results: dict[Case, CaseResult]) -> Iterator[CaseResult]:
    """The results that have samples."""
    return (r for r in results.values() if r.status == "ok" and r.samples)
