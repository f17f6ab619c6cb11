"""What the usage tests of every adapter share (no pytest fixtures here)."""

from __future__ import annotations

from typing import Any

from store.usage import Calibration, UsageCall
from store.usage.calibration import CALIBRATION_KEY


def expected_lanes(n: int) -> tuple[int, int, int, int, int]:
    """The lanes the scripted models report for their ``n``-th call (from 1): input,
    output, cache reads, cache writes, reasoning."""
    return (1000 + 10 * n, 40 + n, 600 + n, 50 + n, 20 + n)


def lanes(call: UsageCall) -> tuple[int | None, ...]:
    """The lanes of a recorded call, in the order of :func:`expected_lanes`."""
    u = call.usage
    return (
        u.input_tokens,
        u.output_tokens,
        u.cache_read_tokens,
        u.cache_write_tokens,
        u.reasoning_tokens,
    )


def assert_calibrated(params: dict[str, Any], fit: Calibration) -> None:
    """A compaction event's params hold the fit its strategy was judged by."""
    assert params[CALIBRATION_KEY] == fit.as_params()
