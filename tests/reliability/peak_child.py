"""A child process that measures its own peak memory (RSS) through one store workload.

``python -m tests.reliability.peak_child URL WORKLOAD CAP_MB`` opens a store on ``URL``,
warms it up (schema, tokenizer, the statements of an append and of the reads), gives
back to the system what the allocator holds free, resets the kernel's high-water mark
(``/proc/self/clear_refs``), and runs ``WORKLOAD``:

* ``run`` and ``prose``: one tool result of :data:`SIZE` characters (``run``: one
  character repeated, a single piece for the tokenizer; ``prose``: words, quotes,
  tabs and newlines, which JSON escapes), appended, then read back with ``history``
  and ``context``;
* ``million``: an append of 1,000,000 small messages, given as a generator.

It prints one JSON line: ``peak_mb`` (the high-water mark above the resident size after
the warm-up, in MB), and ``error`` (the type and message of what the workload raised,
or None). A watchdog thread ends the child early, with what it measured, when the
resident size grows more than ``CAP_MB`` above that baseline, so that a workload
without bound fails its test quickly instead of exhausting the machine.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import json
import os
import sys
import threading
from collections.abc import Iterator

from store import HistoryStore
from strategies.messages import FunctionCallContent, FunctionResultContent, Message, TextContent

SIZE = 20_000_000
"""Characters of the tool result (ASCII: as many bytes, 19.1 MB of 2**20 bytes)."""
MESSAGES = 1_000_000
"""Messages of the ``million`` workload."""
_PARAGRAPH = 'Result 42: "alpha" beta\tgamma, delta; {"k": [1, 2]} epsilon.\nzeta eta theta\n'
_MB = 1 << 20


def _status(field: str) -> int:
    """A ``/proc/self/status`` figure, in bytes."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def _trim() -> None:
    """Give the allocator's free memory back to the system (glibc), so that it is not
    reused unseen by the workload."""
    gc.collect()
    name = ctypes.util.find_library("c")
    if name is not None:
        trim = getattr(ctypes.CDLL(name), "malloc_trim", None)
        if trim is not None:
            trim(0)


def _baseline() -> int:
    """Trim, start the high-water mark again from the resident size, and return it."""
    _trim()
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")
    return _status("VmRSS")


def _report(peak: int, error: str | None) -> None:
    print(json.dumps({"peak_mb": round(peak / _MB, 1), "error": error}), flush=True)


def _watch(baseline: int, cap: int) -> None:
    """End the process once its resident size is ``cap`` bytes above ``baseline``."""
    while True:
        if _status("VmRSS") - baseline > cap:
            _report(_status("VmHWM") - baseline, f"stopped: over the cap of {cap // _MB} MB")
            os._exit(3)
        threading.Event().wait(0.05)


def _result_text(workload: str) -> str:
    if workload == "run":
        return "x" * SIZE
    return (_PARAGRAPH * (SIZE // len(_PARAGRAPH) + 1))[:SIZE]


def _small(count: int) -> Iterator[Message]:
    for index in range(count):
        role = "user" if index % 2 == 0 else "assistant"
        yield Message(role=role, contents=[TextContent(text=f"m{index}")], message_id=f"m{index}")


async def _workload(url: str, workload: str, cap: int) -> None:
    store = await HistoryStore.open(url)
    try:
        await store.append("s", list(_small(2)))
        await store.history("s")
        await store.context("s")
        call = Message(
            role="assistant",
            contents=[FunctionCallContent(call_id="c1", name="fetch", arguments="{}")],
            message_id="a1",
        )
        result = None
        if workload != "million":
            result = Message(
                role="tool",
                contents=[FunctionResultContent(call_id="c1", result=_result_text(workload))],
                message_id="t1",
            )
        baseline = _baseline()
        threading.Thread(target=_watch, args=(baseline, cap), daemon=True).start()
        error = None
        try:
            if result is None:
                await store.append("big", _small(MESSAGES))
            else:
                await store.append("s", [call, result])
                await store.history("s")
                await store.context("s")
        except Exception as failure:
            error = f"{type(failure).__name__}: {failure}"
        _report(_status("VmHWM") - baseline, error)
    finally:
        await store.aclose()


if __name__ == "__main__":
    asyncio.run(_workload(sys.argv[1], sys.argv[2], int(sys.argv[3]) * _MB))
