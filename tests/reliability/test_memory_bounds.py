"""Memory is bounded by the work, not multiplied (``docs/limits.md``, "Memory").

Each case runs :mod:`tests.reliability.peak_child` in a fresh process on SQLite and
PostgreSQL and reads the peak of its resident size above its baseline after the
warm-up: a 20 MB tool result appended and read back stays below four times its size
(3.2 to 3.4 times measured), as one run of a character and as prose that JSON escapes,
where it took 53 and 9 times before the first bounds; an append of 1,000,000 messages is
refused by ``Limits.max_append_messages`` in one line pointing to ``chatledger
import``, below 500 MB, where it grew without bound before.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.peak_child import SIZE

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
TIMES = {"run": 4, "prose": 4}
"""The bound of each tool result's peak, in times its size."""
MILLION_CAP_MB = 500


def _peak(db_url: str, workload: str, cap_mb: float) -> dict[str, Any]:
    if not Path("/proc/self/clear_refs").exists():
        pytest.skip("needs Linux's /proc/self/clear_refs to reset the peak")
    done = subprocess.run(
        [sys.executable, "-m", "tests.reliability.peak_child", db_url, workload, str(int(cap_mb))],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    lines = done.stdout.strip().splitlines()
    assert lines, done.stderr[-2000:]
    figures: dict[str, Any] = json.loads(lines[-1])
    return figures


@pytest.mark.parametrize("workload", ["run", "prose"])
def test_a_20_mb_tool_result_peaks_at_a_few_times_its_size(db_url: str, workload: str) -> None:
    cap_mb = TIMES[workload] * SIZE / (1 << 20)
    figures = _peak(db_url, workload, cap_mb)
    assert figures["error"] is None
    assert figures["peak_mb"] < cap_mb, figures


def test_an_append_of_a_million_messages_is_refused_in_bounded_memory(db_url: str) -> None:
    figures = _peak(db_url, "million", MILLION_CAP_MB)
    error = figures["error"]
    assert error is not None and error.startswith("InvalidInput: "), figures
    assert "100,000 messages" in error and "chatledger import" in error
    assert "\n" not in error
    assert figures["peak_mb"] < MILLION_CAP_MB, figures
