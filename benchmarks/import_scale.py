"""Peak memory and rates of ``import_sources`` on generated JSONL files of given sizes.

Usage::

    python -m benchmarks.import_scale 10 100 1000       # SQLite and PostgreSQL, 3 sizes
    python -m benchmarks.import_scale 10 --pg-url ''    # SQLite only
    python -m benchmarks.import_scale 10 --baseline main --runs 3

Each size is generated once (Chat Completions conversations, one a line, 41 messages
with 10 tool calls each), then imported in a child process into a fresh database, on
SQLite and on PostgreSQL (a throwaway database made through ``--pg-url``, the admin
URL), the systems interleaved run after run so that they share the machine's noise.
With ``--baseline REV`` chatledger at git revision REV runs too, beside the working
tree (``<system>@<hash>``). A line a run gives the child's own peak resident set
(``ru_maxrss``), the whole import's rate and the write pass's (pass two: from the last
progress call of pass one to the end); the summary gives the medians, PostgreSQL's
rates as a fraction of SQLite's, and each system's against its baseline twin. The
tokenizer is the character estimator, so the figures measure the import, not tiktoken.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.baseline import Checkout, checkout
from benchmarks.pg import PgAdmin
from benchmarks.runner import DEFAULT_PG_URL, REPO

__all__ = ["Run", "generate", "main", "measure"]

_CHILD = """
import asyncio, resource, sys, time
from benchmarks.baseline import imported_elsewhere
from store import HistoryStore
from store.importing import import_sources
from strategies.tokenizers import CharacterEstimatorTokenizer

if sys.argv[3] and (elsewhere := imported_elsewhere(sys.argv[3])):
    raise SystemExit(elsewhere)
marks = {}

def progress(phase, done):
    marks[phase] = time.perf_counter()

async def main():
    tokenizer = CharacterEstimatorTokenizer()
    async with HistoryStore.open(sys.argv[1], tokenizer=tokenizer) as store:
        started = time.perf_counter()
        report = await import_sources(store, [sys.argv[2]], progress=progress)
        ended = time.perf_counter()
    write = ended - marks.get("validate", started)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(report.messages, ended - started, write, peak)

asyncio.run(main())
"""


def _conversation(index: int) -> str:
    import json

    messages: list[dict[str, object]] = [{"role": "system", "content": "be brief"}]
    for turn in range(10):
        call = f"call_{index}_{turn}"
        messages += [
            {"role": "user", "content": f"question {turn} of conversation {index} " * 3},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call,
                        "type": "function",
                        "function": {"name": "search", "arguments": json.dumps({"q": turn})},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call, "content": "result text " * 20},
            {"role": "assistant", "content": f"answer {turn} " * 10},
        ]
    return json.dumps({"id": f"conv-{index}", "messages": messages}) + "\n"


def generate(path: Path, megabytes: int) -> None:
    """Write conversations until the file holds ``megabytes`` MB."""
    limit = megabytes * 1_000_000
    written, index = 0, 0
    with path.open("w", encoding="utf-8") as handle:
        while written < limit:
            line = _conversation(index)
            handle.write(line)
            written += len(line)
            index += 1


@dataclass(frozen=True, slots=True)
class Run:
    """One import in a child process."""

    messages: int
    seconds: float
    write_seconds: float
    """Pass two alone."""
    peak_mb: float
    """The child's own peak resident set."""

    @property
    def rate(self) -> float:
        """Messages a second, both passes."""
        return self.messages / self.seconds

    @property
    def write_rate(self) -> float:
        """Messages a second of pass two."""
        return self.messages / self.write_seconds


def measure(url: str, source: Path, library: Checkout | None = None) -> Run:
    """Import ``source`` into ``url`` in a child process (chatledger at ``library``, or
    the working tree's), run from the source's folder so that only its path decides
    where ``store`` comes from."""
    env = library.child_env(REPO) if library is not None else {**os.environ}
    if library is None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    root = str(library.root) if library is not None else str(REPO)
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, url, str(source), root],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        cwd=source.parent,
    )
    if done.returncode != 0:
        raise SystemExit(f"import child failed: {done.stderr.strip().splitlines()[-1:]}")
    messages, seconds, write, peak = done.stdout.split()
    return Run(int(messages), float(seconds), float(write), int(peak) / 1024)


@dataclass(slots=True)
class _System:
    name: str
    postgres: bool
    library: Checkout | None
    runs: dict[int, list[Run]] = field(default_factory=dict)


def _median(runs: list[Run], key: str) -> float:
    return float(statistics.median(getattr(run, key) for run in runs))


def _summary(systems: list[_System], sizes: list[int]) -> list[str]:
    lines = ["", "median of the runs:"]
    by_name = {system.name: system for system in systems}
    for size in sizes:
        for system in systems:
            runs = system.runs[size]
            lines.append(
                f"  {size} MB {system.name}: {_median(runs, 'rate'):.0f} messages/s, "
                f"write pass {_median(runs, 'write_rate'):.0f} messages/s, "
                f"peak {_median(runs, 'peak_mb'):.0f} MB"
            )
        for system in systems:
            runs = system.runs[size]
            lite = by_name.get(system.name.replace("postgresql", "sqlite"))
            if system.postgres and lite is not None:
                lines.append(
                    f"  {size} MB {system.name} / {lite.name}: import "
                    f"{_median(runs, 'rate') / _median(lite.runs[size], 'rate'):.2f}, "
                    f"write pass "
                    f"{_median(runs, 'write_rate') / _median(lite.runs[size], 'write_rate'):.2f}"
                )
            twin = next((t for t in systems if t.name.startswith(f"{system.name}@")), None)
            if twin is not None:
                lines.append(
                    f"  {size} MB {system.name} / {twin.name}: import "
                    f"{_median(runs, 'rate') / _median(twin.runs[size], 'rate'):.2f}, "
                    f"peak {_median(runs, 'peak_mb') - _median(twin.runs[size], 'peak_mb'):+.0f} MB"
                )
    if len(sizes) > 1:
        for system in systems:
            low, high = sizes[0], sizes[-1]
            growth = _median(system.runs[high], "peak_mb") - _median(system.runs[low], "peak_mb")
            lines.append(
                f"  {system.name}: peak at {high} MB minus peak at {low} MB: {growth:+.0f} MB"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="+", type=int, help="file sizes in MB, smallest first")
    parser.add_argument(
        "--pg-url",
        default=DEFAULT_PG_URL,
        help="PostgreSQL admin URL where throwaway databases are made ('' for SQLite only)",
    )
    parser.add_argument("--runs", type=int, default=1, help="runs per size and system")
    parser.add_argument("--baseline", metavar="REV", help="also run chatledger at revision REV")
    options = parser.parse_args()
    admin = PgAdmin(options.pg_url, prefix=f"climport_{os.getpid()}") if options.pg_url else None
    with ExitStack() as stack:
        libraries: list[tuple[str, Checkout | None]] = [("", None)]
        if options.baseline:
            base = stack.enter_context(checkout(options.baseline, repo=REPO))
            libraries.append((f"@{base.short}", base))
        systems = [
            _System(f"{kind}{suffix}", kind == "postgresql", library)
            for kind in ("sqlite", *(("postgresql",) if admin else ()))
            for suffix, library in libraries
        ]
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        for size in options.sizes:
            source = folder / f"chats-{size}mb.jsonl"
            generate(source, size)
            for attempt in range(options.runs):
                for system in systems:
                    run = _one(system, source, folder, admin, f"{size}_{attempt}")
                    system.runs.setdefault(size, []).append(run)
                    print(
                        f"{size} MB {system.name}: {run.messages} messages in "
                        f"{run.seconds:.1f} s ({run.rate:.0f} messages/s, write pass "
                        f"{run.write_rate:.0f} messages/s), peak {run.peak_mb:.0f} MB",
                        flush=True,
                    )
            source.unlink()
        print("\n".join(_summary(systems, options.sizes)))


def _one(system: _System, source: Path, folder: Path, admin: PgAdmin | None, tag: str) -> Run:
    if not system.postgres or admin is None:
        target = folder / f"import-{tag}-{system.name.replace('@', '_')}.db"
        try:
            return measure(f"sqlite:///{target}", source, system.library)
        finally:
            for path in folder.glob(f"{target.name}*"):
                path.unlink()
    database = admin.name(tag, system.name)
    url = admin.create(database)
    try:
        return measure(url, source, system.library)
    finally:
        admin.drop(database)


if __name__ == "__main__":
    main()
