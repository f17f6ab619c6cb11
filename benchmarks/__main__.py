"""``python -m benchmarks``: run every workload and write the report.

``--smoke`` is the tiny version run by ``make test`` (about a minute); ``--quick``
takes about 15 minutes; the default is the full run (``make bench``, under an hour on
2 cores: three runs per figure, one bulk import of 1,000,000 messages; chatledger alone
goes to 1,000,000, on SQLite), plus the workloads of scale (tool-heavy full reads, many
sessions, many writers, deferred compaction). The
databases of many sessions are built once, the first time, and kept in the work
directory (``--work-dir``, by default the system's temporary directory) for later runs.

``--baseline REV`` also runs chatledger at git revision REV (``HEAD~3``, a branch, a
hash), checked out in a temporary worktree that is removed afterwards: each chatledger
system gets a twin ``<system>@<hash>``, interleaved with it, whose ratio to it is the
before/after change within the noise of one run (with ``--systems chatledger``: the
working tree against REV alone, on SQLite). Only ``store`` and ``strategies`` come from
REV; the harness and its workloads are the working tree's.
"""

from __future__ import annotations

import argparse
import signal
import sys
from contextlib import ExitStack
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

from benchmarks.baseline import checkout
from benchmarks.machine import machine_info
from benchmarks.peers import REGISTRY
from benchmarks.report import build_report, write_report
from benchmarks.runner import ALL_WORKLOADS, PRESETS, REPO, Config, Runner

RESULTS = Path(__file__).resolve().parent / "results"


def _sizes(text: str) -> tuple[int, ...]:
    return tuple(int(part.replace("_", "")) for part in text.split(",") if part)


def _turns(text: str) -> int:
    """A count of turns: a whole number, 0 or more."""
    try:
        turns = int(text.replace("_", ""))
    except ValueError:
        turns = -1
    if turns < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number, 0 or more, got {text!r}")
    return turns


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    preset = parser.add_mutually_exclusive_group()
    preset.add_argument("--smoke", action="store_true", help="tiny run (200 messages, 1 run)")
    preset.add_argument("--quick", action="store_true", help="about 10 minutes")
    parser.add_argument("--sizes", type=_sizes, help="chatledger sizes, comma-separated")
    parser.add_argument("--peer-sizes", type=_sizes, help="peer sizes, comma-separated")
    parser.add_argument("--pg-sizes", type=_sizes, help="chatledger-on-PostgreSQL sizes")
    parser.add_argument("--tool-sizes", type=_sizes, help="sizes of the tool-heavy data set")
    parser.add_argument("--session-counts", type=_sizes, help="sessions of many_sessions")
    parser.add_argument("--writer-counts", type=_sizes, help="writer processes of many_writers")
    parser.add_argument(
        "--writer-history",
        type=_turns,
        help="turns each session the writers write holds before they start (default 0)",
    )
    parser.add_argument("--runs", type=int, help="fresh-process runs per figure")
    parser.add_argument("--turns", type=int, help="timed turns per per-turn run")
    parser.add_argument("--repeats", type=int, help="timed calls per projection or full read")
    parser.add_argument("--token-turns", type=int, help="turns of the token-counting run")
    parser.add_argument("--systems", help=f"comma-separated subset of {', '.join(REGISTRY)}")
    parser.add_argument("--workloads", help=f"comma-separated subset of {', '.join(ALL_WORKLOADS)}")
    parser.add_argument("--pg-url", help="PostgreSQL admin URL ('' to skip PostgreSQL)")
    parser.add_argument("--timeout", type=float, help="seconds per child process")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results directory")
    parser.add_argument("--work-dir", type=Path, help="where stored sizes are built")
    parser.add_argument(
        "--baseline",
        metavar="REV",
        help="also run chatledger at git revision REV, beside the working tree's",
    )
    return parser


def config_from(args: argparse.Namespace) -> Config:
    """The preset chosen, with any explicit option applied over it."""
    config = PRESETS["smoke" if args.smoke else "quick" if args.quick else "full"]
    changes: dict[str, Any] = {
        "sizes": args.sizes,
        "peer_sizes": args.peer_sizes,
        "pg_sizes": args.pg_sizes,
        "tool_sizes": args.tool_sizes,
        "session_counts": args.session_counts,
        "writer_counts": args.writer_counts,
        "writer_history": args.writer_history,
        "runs": args.runs,
        "turns": args.turns,
        "repeats": args.repeats,
        "token_turns": args.token_turns,
        "timeout": args.timeout,
        "systems": tuple(args.systems.split(",")) if args.systems else None,
        "workloads": tuple(args.workloads.split(",")) if args.workloads else None,
    }
    config = replace(config, **{k: v for k, v in changes.items() if v is not None})
    if args.pg_url is not None:
        config = replace(config, pg_url=args.pg_url or None)
    unknown = [s for s in config.systems if s not in REGISTRY]
    unknown += [w for w in config.workloads if w not in ALL_WORKLOADS]
    if unknown:
        raise SystemExit(f"unknown system or workload: {', '.join(unknown)}")
    if args.baseline is not None and all(REGISTRY[s].peer for s in config.systems):
        raise SystemExit("--baseline compares chatledger systems, and --systems names none")
    if args.work_dir is not None:
        try:
            args.work_dir.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise SystemExit(f"--work-dir {args.work_dir}: {error.strerror}") from None
    return config


def _terminate(signum: int, _frame: FrameType | None) -> None:
    """End the run on SIGTERM as on Ctrl-C: through every cleanup on the way out."""
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    """Run the harness and print where the report went."""
    args = _parser().parse_args(argv)
    config = config_from(args)
    signal.signal(signal.SIGTERM, _terminate)
    with ExitStack() as stack:
        baseline = None
        if args.baseline is not None:
            baseline = stack.enter_context(
                checkout(args.baseline, repo=REPO, work_dir=args.work_dir)
            )
            config = replace(config, baseline=baseline.short)
        start = machine_info()
        runner = Runner(config, work_dir=args.work_dir, baseline=baseline)
        results = runner.run()
    machine = {"start": start, "end": machine_info()}
    report = build_report(results, config=config, skipped=runner.skipped, machine=machine)
    md_path, json_path = write_report(report, args.out, now=datetime.now(UTC))
    print(md_path)
    print(json_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
