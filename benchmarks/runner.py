"""Runs every workload on every system, each run in a fresh process, interleaved.

Each stored size is built once per system (a SQLite file, a pickle, or a PostgreSQL
template database) and copied for every run. Runs are interleaved across systems so
that a noisy neighbour slows every system alike, and each figure is a median with
its spread. With a baseline (``--baseline``), each chatledger system has a twin that runs
another commit's ``store`` and ``strategies`` (:mod:`benchmarks.baseline`), planned and
interleaved like any other system.
"""

from __future__ import annotations

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
TEMPLATED = frozenset({"per_turn", "projection", "full_read"})
ALL_WORKLOADS = ("per_turn", "bulk_import", "projection", "full_read", "token_counting")
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
    runs: int = 5
    mid_runs: int = 3
    """Runs at 100,000 messages (to 999,999)."""
    large_runs: int = 3
    """Runs at 1,000,000 messages and above (bulk import: one)."""
    full_read_max: int = 100_000
    """Largest size of the full-read workload (a full read is O(history) by nature)."""
    turns: int = 10
    """Timed turns per per-turn run."""
    repeats: int = 5
    """Timed calls per projection or full-read run."""
    token_turns: int = 1_000
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
    ),
    "smoke": Config(
        sizes=(200,),
        peer_sizes=(200,),
        pg_sizes=(200,),
        runs=1,
        turns=3,
        repeats=2,
        token_turns=10,
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
        self.pg = PgAdmin(config.pg_url, prefix=f"clbench_{os.getpid()}") if config.pg_url else None
        self.skipped: dict[str, str] = {}
        self.templates: dict[tuple[str, int], str] = {}
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
                sizes = self.config.peer_sizes
                if not spec.peer:
                    pg = spec.backend == "postgresql"
                    sizes = self.config.pg_sizes if pg else self.config.sizes
                if workload == "full_read":
                    sizes = tuple(s for s in sizes if s <= self.config.full_read_max)
                cases.extend(Case(workload, name, size) for size in sizes)
        return sorted(cases, key=lambda c: (ALL_WORKLOADS.index(c.workload), c.size))

    def runs_for(self, case: Case) -> int:
        """How many fresh-process runs a case gets."""
        if case.workload == "token_counting":
            return 1
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
        needed = sorted({(c.system, c.size) for c in cases if c.workload in TEMPLATED})
        for name, size in needed:
            if self.pg is not None and self.specs[name].backend == "postgresql":
                self.pg_templates.append(self.pg.name(name, "tpl", size))
            location = self._fresh_location(name, "tpl", size)
            self._say(f"building {name} at {size:,} messages")
            answer = self._child(self._spec("build", name, location, size))
            build = Case("build", name, size)
            self.results[build] = result = CaseResult(build)
            result.add(answer)
            if answer["status"] == "ok":
                self.templates[(name, size)] = location
                if self.specs[name].backend == "postgresql":
                    assert self.pg is not None
                    self.pg.analyze(self.pg.name(name, "tpl", size))

    def _run_once(self, case: Case, index: int) -> None:
        result = self.results.setdefault(case, CaseResult(case))
        if case.workload in TEMPLATED and (case.system, case.size) not in self.templates:
            build = self.results.get(Case("build", case.system, case.size))
            result.status = "error"
            result.reason = f"no stored template: {build.reason if build else '?'}"
            return
        self._say(f"run {index + 1}: {case.workload} {case.system} {case.size:,}")
        with self._run_location(case, index) as location:
            result.add(self._child(self._spec(case.workload, case.system, location, case.size)))

    def _spec(self, workload: str, name: str, location: str, size: int) -> ChildSpec:
        spec = ChildSpec(workload, name, self.specs[name].backend, location, size)
        config = self.config
        spec = replace(spec, seed=config.seed, turns=config.turns, repeats=config.repeats)
        spec = replace(spec, source=self._source(name))
        if workload == "token_counting":
            spec = replace(spec, turns=size, size=0)
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
        template = self.templates.get((case.system, case.size))
        copy = case.workload in TEMPLATED and template is not None
        if self.specs[case.system].backend == "postgresql":
            assert self.pg is not None
            database = self.pg.name(case.system, "run", index)
            source = self.pg.name(case.system, "tpl", case.size) if copy else None
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

    def _child(self, spec: ChildSpec) -> dict[str, Any]:
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
                timeout=self.config.timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return {"status": "error", "reason": f"timed out after {self.config.timeout:.0f} s"}
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


def iter_ok(results: dict[Case, CaseResult]) -> Iterator[CaseResult]:
    """The results that have samples."""
    return (r for r in results.values() if r.status == "ok" and r.samples)
