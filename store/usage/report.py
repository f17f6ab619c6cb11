"""Usage reports: the recorded calls totalled by model, session or day, and priced.

A row's lanes are the sums of the calls that reported them (None when none did);
``local_sent_tokens`` sums chatledger's counts of the calls paired with a projection;
``cache_breaks`` counts the paired calls whose context did not begin with the previous
call's. With prices (``{model: ModelPrice}``), a call's cost is
:meth:`~store.usage.models.ModelPrice.cost`; a row's cost sums its priced calls and
``unpriced_calls`` counts the others (None when no call of the row is priced).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime

from store.usage.models import (
    LANES,
    ModelPrice,
    UsageCall,
    UsageGrouping,
    UsageReport,
    UsageRow,
)

__all__ = ["UNKNOWN_MODEL", "report", "row_of"]

UNKNOWN_MODEL = "unknown"
"""The key of the calls that named no model, in a report by model."""


def _key(call: UsageCall, by: UsageGrouping) -> str:
    if by == "model":
        return call.usage.model or UNKNOWN_MODEL
    if by == "session":
        return call.session_id
    return call.usage.at.astimezone(UTC).date().isoformat()


def row_of(
    key: str, calls: Iterable[UsageCall], prices: Mapping[str, ModelPrice] | None
) -> UsageRow:
    """The totals of ``calls`` under ``key``."""
    count = projected = breaks = unpriced = 0
    lanes: dict[str, int | None] = dict.fromkeys(LANES)
    local: int | None = None
    cost: float | None = None
    for call in calls:
        count += 1
        for lane in LANES:
            value = getattr(call.usage, lane)
            if value is not None:
                lanes[lane] = (lanes[lane] or 0) + value
        if call.local_tokens is not None:
            projected += 1
            local = (local or 0) + call.local_tokens
        if call.prefix_kept is False:
            breaks += 1
        if prices is not None:
            price = prices.get(call.usage.model or "")
            if price is None:
                unpriced += 1
            else:
                cost = (cost or 0.0) + price.cost(call.usage)
    return UsageRow(
        key=key,
        calls=count,
        local_sent_tokens=local,
        projected_calls=projected,
        cache_breaks=breaks,
        cost=cost,
        unpriced_calls=unpriced,
        **lanes,
    )


def report(
    tenant: str,
    calls: Iterable[UsageCall],
    *,
    session_id: str | None,
    since: datetime | None,
    by: UsageGrouping,
    prices: Mapping[str, ModelPrice] | None = None,
) -> UsageReport:
    """The report of ``calls`` (already limited to the session and ``since``)."""
    every = list(calls)
    keyed: dict[str, list[UsageCall]] = {}
    for call in every:
        keyed.setdefault(_key(call, by), []).append(call)
    rows = tuple(row_of(key, keyed[key], prices) for key in sorted(keyed))
    return UsageReport(
        tenant=tenant,
        session_id=session_id,
        by=by,
        since=since,
        rows=rows,
        total=row_of("total", every, prices),
        priced=prices is not None,
    )
