"""Summaries of repeated measurements: median and spread."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["Summary", "summarize"]


@dataclass(frozen=True, slots=True)
class Summary:
    """Median, extremes and quartiles of a set of samples."""

    median: float
    minimum: float
    maximum: float
    q1: float
    q3: float
    runs: int

    def to_json(self) -> dict[str, Any]:
        """A plain dict for the JSON report."""
        return asdict(self)


def summarize(samples: list[float]) -> Summary:
    """Summarize at least one sample (quartiles equal the median for one or two)."""
    if not samples:
        raise ValueError("no samples to summarize")
    median = statistics.median(samples)
    if len(samples) >= 3:
        q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    else:
        q1 = q3 = median
    return Summary(median, min(samples), max(samples), q1, q3, len(samples))
