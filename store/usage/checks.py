"""The checks of the usage methods' arguments, and the points a calibration rests on."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta

from store.errors import InvalidInput
from store.rules.records import now
from store.usage.models import USAGE_GROUPINGS, ModelPrice, Usage, UsageCall, UsageGrouping

__all__ = ["check_grouping", "check_prices", "check_usage", "paired_points", "usage_since"]


def check_usage(usage: object) -> None:
    """Refuse anything but a :class:`~store.usage.models.Usage`."""
    if not isinstance(usage, Usage):
        raise InvalidInput(f"usage must be a store.Usage, got {type(usage).__name__}")


def check_grouping(by: object) -> UsageGrouping:
    """``by`` as a grouping; anything but ``model``, ``session`` or ``day`` is refused."""
    if by not in USAGE_GROUPINGS:
        raise InvalidInput(f"by must be one of {', '.join(USAGE_GROUPINGS)}, got {by!r}")
    return by


def check_prices(prices: object) -> None:
    """Refuse prices that are not a mapping of model names to ``ModelPrice``."""
    if prices is None:
        return
    if not isinstance(prices, Mapping) or not all(
        isinstance(k, str) and isinstance(v, ModelPrice) for k, v in prices.items()
    ):
        raise InvalidInput("prices must map model names to store.usage.ModelPrice")


def usage_since(since: object) -> datetime | None:
    """``since`` as a time: a datetime (a naive one is UTC), or a span back from now."""
    if since is None:
        return None
    if isinstance(since, timedelta):
        if since < timedelta(0):
            raise InvalidInput(f"since must not be a negative span, got {since}")
        return now() - since
    if isinstance(since, datetime):
        return since if since.tzinfo is not None else since.replace(tzinfo=UTC)
    raise InvalidInput(f"since must be a datetime or a timedelta, got {type(since).__name__}")


def paired_points(
    calls: Sequence[UsageCall], *, model: str | None, limit: int
) -> tuple[str | None, list[tuple[int, int]]]:
    """The model (``model``, or that of the newest paired call reporting input) and the
    ``(local, input)`` counts of its newest ``limit`` paired calls reporting input,
    oldest first."""
    paired = [c for c in calls if c.local_tokens is not None and c.usage.input_tokens is not None]
    if not paired:
        return model, []
    chosen = model if model is not None else paired[-1].usage.model
    points = [
        (c.local_tokens, c.usage.input_tokens)
        for c in paired
        if c.usage.model == chosen
        and c.local_tokens is not None
        and c.usage.input_tokens is not None
    ]
    return chosen, points[-limit:]
