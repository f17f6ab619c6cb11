"""Peak memory and rate of ``import_sources`` on generated JSONL files of given sizes.

Usage::

    python -m benchmarks.import_scale 10 200            # SQLite, 10 MB and 200 MB files
    python -m benchmarks.import_scale 10 --url postgresql://postgres@127.0.0.1/bench

Each size is generated (Chat Completions conversations, one a line, with tool calls),
then imported in a child process into a fresh database; the child's peak resident set
(``ru_maxrss``) and its messages per second are printed, one line a size. The
tokenizer is the character estimator, so the figures measure the import, not tiktoken.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_CHILD = """
import asyncio, sys, time
from store import HistoryStore
from store.importing import import_sources
from strategies.tokenizers import CharacterEstimatorTokenizer

async def main() -> None:
    async with HistoryStore.open(sys.argv[1], tokenizer=CharacterEstimatorTokenizer()) as store:
        started = time.perf_counter()
        report = await import_sources(store, [sys.argv[2]])
        print(report.messages, time.perf_counter() - started)

asyncio.run(main())
"""


def _conversation(index: int) -> str:
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


def measure(url: str, source: Path) -> tuple[int, float, float]:
    """(messages, seconds, peak MB) of importing ``source`` in a child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, url, str(source)],
        capture_output=True,
        text=True,
        check=True,
    )
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    messages, seconds = done.stdout.split()
    return int(messages), float(seconds), max(peak, before) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="+", type=int, help="file sizes in MB, smallest first")
    parser.add_argument("--url", help="a fresh, migrated PostgreSQL database to import into")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        for size in options.sizes:
            source = Path(folder) / f"chats-{size}mb.jsonl"
            generate(source, size)
            url = options.url or f"sqlite:///{folder}/import-{size}.db"
            started = time.perf_counter()
            messages, seconds, peak = measure(url, source)
            print(
                f"{size} MB: {messages} messages in {seconds:.1f} s "
                f"({messages / seconds:.0f} messages/s), peak {peak:.0f} MB "
                f"(wall {time.perf_counter() - started:.1f} s)",
                flush=True,
            )
            source.unlink()


if __name__ == "__main__":
    main()
