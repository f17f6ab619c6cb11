"""The markdown table and the JSON file of one harness run.

Every comparison is a ratio taken within the same run: a system's median divided by
chatledger's (``÷ chatledger``; on PostgreSQL, by chatledger on PostgreSQL) and by the
physical limit's (``÷ limit``) at the same size; a ``--baseline`` system
(``chatledger@<commit>``) is divided by the working tree's chatledger on its backend.
For times, a ratio above 1 means slower than the reference; for throughputs, below 1
means slower. ``growth`` divides a system's median by its own median at the smallest
size; "worst turn" is the median over runs of the slowest turn in a run (Agent
Framework's truncation calls).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks.child import SESSIONS_PAGE
from benchmarks.peers import spec_for
from benchmarks.runner import Case, CaseResult, Config
from benchmarks.stats import Summary, summarize

__all__ = ["SCALE_TABLES", "TABLES", "build_report", "write_report"]

# workload -> (metric, label, unit scale, unit)
TABLES: dict[str, tuple[str, str, float, str]] = {
    "per_turn": ("per_turn_s", "Per-turn cost (append + after-run + next context)", 1e3, "ms"),
    "bulk_import": ("msgs_per_s", "Bulk import throughput (higher is better)", 1.0, "msg/s"),
    "projection": ("seconds", "Projection latency (next request context)", 1e3, "ms"),
    "full_read": ("seconds", "Full read of the stored history", 1e3, "ms"),
    "full_read_tools": (
        "seconds",
        "Full read, tool-heavy data set (five-message turns, tool results of 1 to 2 kB)",
        1e3,
        "ms",
    ),
    "build": (
        "seconds",
        "Template build (once per size; load only, settling reported in the JSON)",
        1.0,
        "s",
    ),
}


# the columns of both workloads of concurrent writers: (metric, column, scale)
_WRITER_METRICS: list[tuple[str, str, float]] = [
    ("turns_per_s", "turns/s", 1.0),
    ("p50_s", "p50 ms", 1e3),
    ("p99_s", "p99 ms", 1e3),
    ("errors", "errors", 1.0),
    ("lost", "lost", 1.0),
    ("duplicated", "duplicated", 1.0),
    ("turns", "turns", 1.0),
]

# workload -> (title, what the size counts, [(metric, column, scale)])
SCALE_TABLES: dict[str, tuple[str, str, list[tuple[str, str, float]]]] = {
    "search": (
        "Search: the first page (20 hits) of a two-word query, a phrase and a prefix over "
        "the stored messages, tenant-wide and scoped to the session, against the same "
        "normalized query run directly in one statement (the limit; ratios)",
        "messages",
        [
            ("wide_s", "tenant-wide ms", 1e3),
            ("wide_direct_s", "direct ms", 1e3),
            ("wide_ratio", "tenant-wide / direct", 1.0),
            ("scoped_s", "scoped ms", 1e3),
            ("scoped_direct_s", "direct ms", 1e3),
            ("scoped_ratio", "scoped / direct", 1.0),
        ],
    ),
    "search_sessions": (
        "Search among 10,000 sessions: the stored messages spread evenly over 10,000 "
        "sessions; the same queries tenant-wide and scoped to one session in the middle, "
        "against the same normalized query run directly in one statement (the limit; "
        "ratios)",
        "messages",
        [
            ("wide_s", "tenant-wide ms", 1e3),
            ("wide_direct_s", "direct ms", 1e3),
            ("wide_ratio", "tenant-wide / direct", 1.0),
            ("scoped_s", "scoped ms", 1e3),
            ("scoped_direct_s", "direct ms", 1e3),
            ("scoped_ratio", "scoped / direct", 1.0),
        ],
    ),
    "erasure": (
        "Erasure: a redaction of one message of a session among 10,000 (the stored "
        "messages spread evenly over them), then of another, each in its own "
        "transaction with its checkpoint and what it does to the search index (SQLite "
        "3.40: an optimize of the index; the unindexed systems have none)",
        "messages",
        [
            ("redact_s", "redaction ms", 1e3),
            ("redact_again_s", "next redaction ms", 1e3),
        ],
    ),
    "branches": (
        "Branches: a fork of the stored session at its end (no message row written), and "
        "the per-turn cost on the root and on forks of depth 1 and 10 of it, turns "
        "interleaved (ratios against the root)",
        "messages",
        [
            ("fork_s", "fork ms", 1e3),
            ("per_turn_depth0_s", "turn, root ms", 1e3),
            ("per_turn_depth1_s", "turn, depth 1 ms", 1e3),
            ("per_turn_depth10_s", "turn, depth 10 ms", 1e3),
            ("depth1_ratio", "depth 1 / root", 1.0),
            ("depth10_ratio", "depth 10 / root", 1.0),
        ],
    ),
    "many_sessions": (
        "Many sessions: one session of 1,000 messages in a database of N sessions "
        "(20 short messages each); growth against the smallest database (for a "
        "sessions() page, the smallest that fills one)",
        "sessions",
        [
            ("per_turn_s", "per turn ms", 1e3),
            ("projection_s", "projection ms", 1e3),
            ("page_first_s", "sessions() first page of 100 ms", 1e3),
            ("page_deep_s", "page at 90% ms", 1e3),
            ("page_recent_s", "newest-first page ms", 1e3),
            ("cache_max_messages", "view cache, most messages held", 1.0),
            ("cache_bound", "cache bound", 1.0),
            ("peak_rss_mb", "peak MB", 1.0),
        ],
    ),
    "many_writers": (
        "Many writers: N writer processes, each on its own session (turn = append, "
        "after-run compaction, next context)",
        "writers",
        _WRITER_METRICS,
    ),
    "shared_session": (
        "Shared session: N writer processes on one session",
        "writers",
        _WRITER_METRICS,
    ),
    "deferred_compaction": (
        "Deferred compaction: a provider's save_turn with a summarizer that takes "
        "the configured delay, summarizing after every turn",
        "turns",
        [
            ("inline_turn_s", "inline turn ms", 1e3),
            ("deferred_turn_s", "deferred turn ms", 1e3),
            ("deferred_max_s", "deferred slowest turn ms", 1e3),
            ("deferred_flush_s", "deferred aclose ms", 1e3),
            ("inline_compactions", "inline compactions", 1.0),
            ("deferred_compactions", "deferred compactions", 1.0),
        ],
    ),
}


def _reference(system: str) -> str:
    return "chatledger_pg" if spec_for(system).backend == "postgresql" else "chatledger"


def _median(results: dict[Case, CaseResult], case: Case, metric: str) -> float | None:
    result = results.get(case)
    if result is None or result.status != "ok" or metric not in result.samples:
        return None
    return summarize(result.samples[metric]).median


def _ratio(value: float, base: float | None) -> float | None:
    return value / base if base else None


def _row(results: dict[Case, CaseResult], result: CaseResult, metric: str) -> dict[str, Any]:
    case = result.case
    summary = summarize(result.samples[metric])
    sizes = sorted(
        c.size for c in results if c.workload == case.workload and c.system == case.system
    )
    smallest = Case(case.workload, case.system, sizes[0])
    return {
        "workload": case.workload,
        "system": case.system,
        "size": case.size,
        "metric": metric,
        "summary": summary.to_json(),
        "vs_chatledger": _ratio(
            summary.median, _median(results, replace_system(case, _reference(case.system)), metric)
        ),
        "vs_limit": _ratio(summary.median, _median(results, replace_system(case, "limit"), metric)),
        "growth": _ratio(summary.median, _median(results, smallest, metric)),
        "worst_turn_s": _median(results, case, "per_turn_max_s"),
    }


def replace_system(case: Case, system: str) -> Case:
    """The same workload and size on another system."""
    return Case(case.workload, system, case.size)


def build_report(
    results: dict[Case, CaseResult],
    *,
    config: Config,
    skipped: dict[str, str],
    machine: dict[str, Any],
) -> dict[str, Any]:
    """Everything the JSON file holds."""
    rows = [
        _row(results, r, TABLES[r.case.workload][0])
        for r in results.values()
        if r.status == "ok"
        and r.case.workload in TABLES
        and TABLES[r.case.workload][0] in r.samples
    ]
    return {
        "config": asdict(config),
        "machine": machine,
        "skipped_systems": skipped,
        "systems": {name: spec_for(name).description for name in config.all_systems()},
        "rows": rows,
        "cases": [
            {**asdict(r.case), "status": r.status, "reason": r.reason, "samples": r.samples}
            for r in results.values()
        ],
    }


def _fmt(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def _section(title: str, lines: list[str]) -> list[str]:
    """``lines`` under a heading, or nothing when there are none."""
    return [f"### {title}", "", *lines, ""] if lines else []


def _cells(cells: list[str]) -> str:
    return f"| {' | '.join(cells)} |"


def _markdown_table(
    title: str,
    columns: list[str],
    rows: list[list[str]],
    *,
    left: int = 1,
    intro: tuple[str, ...] = (),
) -> list[str]:
    """A table under a heading (the first ``left`` columns aligned left, the others
    right), after the ``intro`` lines; nothing when there are no rows."""
    if not rows:
        return []
    rule = "|" + "---|" * left + "---:|" * (len(columns) - left)
    return _section(title, [*intro, _cells(columns), rule, *map(_cells, rows)])


def _table(report: dict[str, Any], workload: str) -> list[str]:
    _metric, title, scale, unit = TABLES[workload]
    worst = workload == "per_turn"
    columns = [
        "system",
        "messages",
        f"median {unit}",
        "IQR",
        "min to max",
        "runs",
        "÷ chatledger",
        "÷ limit",
        "growth",
    ]
    if worst:
        columns.append(f"worst turn {unit}")
    rows: list[list[str]] = []
    mine = [r for r in report["rows"] if r["workload"] == workload]
    for row in sorted(mine, key=lambda r: (r["size"], r["system"])):
        s = Summary(**row["summary"])
        cells = [
            row["system"],
            f"{row['size']:,}",
            _fmt(s.median * scale),
            f"{_fmt(s.q1 * scale)} to {_fmt(s.q3 * scale)}",
            f"{_fmt(s.minimum * scale)} to {_fmt(s.maximum * scale)}",
            str(s.runs),
            _fmt(row["vs_chatledger"]),
            _fmt(row["vs_limit"]),
            _fmt(row["growth"]),
        ]
        if worst:
            worst_turn = row["worst_turn_s"]
            cells.append(_fmt(worst_turn * scale if worst_turn else None))
        rows.append(cells)
    return _markdown_table(title, columns, rows)


def _scale_cells(
    case: dict[str, Any],
    metrics: list[tuple[str, str, float]],
    smallest: dict[tuple[str, str], float] | None,
) -> list[str]:
    """A case's median of each metric; with ``smallest`` (the first median seen of each
    system and time), its growth too. A ``sessions()`` page of a database too small to
    fill one is no base: it is shown as a partial page, without growth."""
    cells: list[str] = []
    for metric, _, scale in metrics:
        values = case["samples"].get(metric)
        if not values:
            cells.append("-")
            continue
        median = summarize(values).median
        cell = _fmt(median * scale)
        if metric.startswith("page_") and case["size"] < SESSIONS_PAGE:
            cells.append(f"{cell} (partial page)")
            continue
        if metric.endswith("_s") and smallest is not None:
            base = smallest.setdefault((case["system"], metric), median)
            cell += f" ({_fmt(median / base if base else None)}x)"
        cells.append(cell)
    return cells


def _scale_table(report: dict[str, Any], workload: str) -> list[str]:
    """Medians of each metric of a workload of scale, with growth for the times."""
    title, counts, metrics = SCALE_TABLES[workload]
    cases = [c for c in report["cases"] if c["workload"] == workload and c["samples"]]
    smallest: dict[tuple[str, str], float] | None = {} if workload == "many_sessions" else None
    rows = [
        [
            case["system"],
            f"{case['size']:,}",
            str(len(next(iter(case["samples"].values())))),
            *_scale_cells(case, metrics, smallest),
        ]
        for case in sorted(cases, key=lambda c: (c["system"], c["size"]))
    ]
    columns = ["system", counts, "runs", *(label for _, label, _ in metrics)]
    return _markdown_table(title, columns, rows)


_MEMORY_WORKLOADS = ("per_turn", "bulk_import", "full_read", "full_read_tools")


def _memory_table(report: dict[str, Any]) -> list[str]:
    """Peak memory of each case, with its growth against the system's smallest size (flat
    is 1.00) and, for chatledger's turns, the most messages its view cache held against
    the cache's bound."""
    cases = [
        case
        for case in report["cases"]
        if case["workload"] in _MEMORY_WORKLOADS and case["samples"].get("peak_rss_mb")
    ]
    smallest: dict[tuple[str, str], float] = {}
    for case in sorted(cases, key=lambda c: c["size"]):
        key = (case["workload"], case["system"])
        smallest.setdefault(key, summarize(case["samples"]["peak_rss_mb"]).median)
    rows: list[list[str]] = []
    for case in cases:
        s = summarize(case["samples"]["peak_rss_mb"])
        growth = _ratio(s.median, smallest[(case["workload"], case["system"])])
        held, bound = case["samples"].get("cache_max_messages"), case["samples"].get("cache_bound")
        rows.append(
            [
                case["workload"],
                case["system"],
                f"{case['size']:,}",
                _fmt(s.median, 1),
                f"{_fmt(s.minimum, 1)} to {_fmt(s.maximum, 1)}",
                _fmt(growth),
                f"{max(held):,.0f} / {max(bound):,.0f}" if held is not None and bound else "",
            ]
        )
    columns = [
        "workload",
        "system",
        "messages",
        "median MB",
        "min to max",
        "growth",
        "view cache held / bound",
    ]
    return _markdown_table(
        "Peak resident memory (ru_maxrss of the child, MB)", columns, rows, left=2
    )


def _token_row(case: dict[str, Any]) -> list[str]:
    samples = {k: v[0] for k, v in case["samples"].items()}
    passes = samples.get("passes_per_stored_message")
    stored = samples.get("stored_with_summaries", samples["stored_messages"])
    return [
        case["system"],
        f"{case['size']:,}",
        f"{stored:,.0f}",
        f"{samples['tokenizer_calls']:,.0f}",
        _fmt(samples.get("one_pass_calls"), 0),
        _fmt(passes),
        _fmt(samples.get("calls_beyond_one_pass"), 0),
        f"{samples['calls_per_message']:.2f}",
        f"{samples['max_repeats_one_text']:,.0f}",
    ]


def _token_table(report: dict[str, Any]) -> list[str]:
    intro = (
        "One pass = the tokenizer calls needed to count every stored message (summaries "
        "included) once; a message has several texts (call names, arguments, results), "
        "so calls per appended message exceed 1 even then. passes = calls / one pass: "
        "1.00 means each stored message was tokenized exactly once and nothing else was.",
        "",
    )
    columns = [
        "system",
        "turns",
        "stored messages",
        "tokenizer calls",
        "one pass",
        "passes",
        "calls beyond one pass",
        "calls per appended message",
        "max per text",
    ]
    rows = [
        _token_row(case)
        for case in report["cases"]
        if case["workload"] == "token_counting" and case["samples"]
    ]
    return _markdown_table(
        "Token counting (instrumented tokenizer over an N-turn run)", columns, rows, intro=intro
    )


def _extras(report: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for case in report["cases"]:
        samples = case["samples"]
        if case["workload"] == "bulk_import" and "tiktoken_s" in samples and case["size"]:
            size = case["size"]
            sql = summarize(samples["sqlite_s"]).median
            tok = summarize(samples["tiktoken_s"]).median
            lines.append(
                f"- limit at {size:,}: sqlite3 alone {_fmt(size / sql if sql else None)} msg/s, "
                f"tiktoken alone {_fmt(size / tok if tok else None)} msg/s"
            )
    return _section("Limit split", lines)


def _duration(start: dict[str, Any], end: dict[str, Any]) -> list[str]:
    if "time" not in start or "time" not in end:  # a report of an older harness
        return []
    minutes = (end["time"] - start["time"]) / 60
    return [f"- wall time of the run: {minutes:.1f} min (stored sizes built on the way)"]


def _header(report: dict[str, Any], stamp: str) -> list[str]:
    machine = report["machine"]
    start, end = machine["start"], machine["end"]
    versions = ", ".join(f"{k} {v}" for k, v in start["packages"].items() if v)
    lines = [
        f"# chatledger benchmarks, {stamp}",
        "",
        f"- machine: {start['cores']} cores, {start['platform']}, python {start['python']}, "
        f"sqlite {start['sqlite']}",
        f"- load average at start {start['load_average']}, at end {end['load_average']}",
        *_duration(start, end),
        f"- versions: {versions}",
        f"- runs per figure: {report['config']['runs']} (fresh process each, systems "
        "interleaved); spread shown as IQR and min to max",
        *_writer_history(report["config"]),
        "- ratios: a system's median divided by chatledger's (÷ chatledger) and by the "
        "limit's (÷ limit) at the same size; growth = median / own median at the smallest size",
    ]
    if baseline := report["config"].get("baseline"):
        names = ", ".join(name for name in report["systems"] if name.endswith(f"@{baseline}"))
        lines.append(
            f"- baseline: {names} run the store and strategies of commit {baseline}, with "
            "the working tree's harness; their ÷ chatledger is baseline / working tree "
            "(for a time, above 1 means the working tree is faster)"
        )
    lines.append("")
    if report["skipped_systems"]:
        lines += ["Skipped systems:", ""]
        lines += [f"- {name}: {reason}" for name, reason in report["skipped_systems"].items()]
        lines.append("")
    return lines


def _writer_history(config: dict[str, Any]) -> list[str]:
    """What the writers' sessions held before they started, where it was not nothing."""
    held = config.get("writer_history", 0)
    if not held or not {"many_writers", "shared_session"} & set(config["workloads"]):
        return []
    return [f"- writers: each session they write holds {held:,} turns, settled, before they start"]


def _failures(report: dict[str, Any]) -> list[str]:
    failed = [c for c in report["cases"] if c["status"] != "ok"]
    lines = [f"- {c['workload']} {c['system']} {c['size']:,}: {c['reason']}" for c in failed]
    return _section("Cases that did not run", lines)


def to_markdown(report: dict[str, Any], stamp: str) -> str:
    """The human-readable report."""
    lines = _header(report, stamp)
    for workload in TABLES:
        lines += _table(report, workload)
    for workload in SCALE_TABLES:
        lines += _scale_table(report, workload)
    lines += _memory_table(report) + _token_table(report) + _extras(report) + _failures(report)
    return "\n".join(lines)


def write_report(report: dict[str, Any], out_dir: Path, *, now: datetime) -> tuple[Path, Path]:
    """Write ``<timestamp>.md`` and ``<timestamp>.json``; return both paths."""
    stamp = now.strftime("%Y%m%dT%H%M%SZ")
    out_dir.mkdir(parents=True, exist_ok=True)
    md_path, json_path = out_dir / f"{stamp}.md", out_dir / f"{stamp}.json"
    json_path.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    md_path.write_text(to_markdown(report, stamp) + "\n")
    return md_path, json_path
