"""What a model call cost, as the provider reported it, and what the store makes of it.

* :class:`Usage`: one call's usage, in the provider's own counts, lane by lane.
* :class:`UsageCall`: a recorded call (:meth:`~store.contract.HistoryBackend.usage_calls`),
  with what chatledger projected for it when it did.
* :class:`UsageRow` and :class:`UsageReport`: totals by model, session or day
  (:meth:`~store.contract.HistoryBackend.usage`).
* :class:`ModelPrice`: what a model's tokens cost, per million, for a report's ``cost``.
* :class:`Calibration`: the fit of the provider's input count on chatledger's own
  (:meth:`~store.contract.HistoryBackend.calibration`).

The meaning of the lanes is the same whatever the provider: ``input_tokens`` includes
cache reads and cache writes, ``output_tokens`` includes reasoning. A lane is None where
the source does not report it, and the number it reports otherwise (0 included).
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator

from store.rules.records import now

__all__ = [
    "USAGE_GROUPINGS",
    "Calibration",
    "ModelPrice",
    "Usage",
    "UsageCall",
    "UsageGrouping",
    "UsageReport",
    "UsageRow",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid")

UsageGrouping = Literal["model", "session", "day"]
"""What a usage report's rows are keyed by."""

USAGE_GROUPINGS: tuple[UsageGrouping, ...] = get_args(UsageGrouping)
"""Every grouping, in the order of :data:`UsageGrouping`."""

LANES: tuple[str, ...] = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)
"""The five token lanes, in the order reports show them."""


class Usage(BaseModel):
    """One model call's usage, as its provider reported it.

    ``input_tokens`` includes the cache reads and writes, ``output_tokens`` includes the
    reasoning, whatever the provider's own convention (an adapter converts). Each lane
    is None where the source does not report it.
    """

    model_config = _FROZEN

    model: str | None = None
    """The model that answered, as the provider names it."""
    input_tokens: int | None = Field(default=None, ge=0)
    """Every input token the provider counted, cache reads and writes included."""
    output_tokens: int | None = Field(default=None, ge=0)
    """Every output token, reasoning included."""
    cache_read_tokens: int | None = Field(default=None, ge=0)
    """Input tokens read from the provider's prompt cache."""
    cache_write_tokens: int | None = Field(default=None, ge=0)
    """Input tokens written to the provider's prompt cache."""
    reasoning_tokens: int | None = Field(default=None, ge=0)
    """Output tokens spent on reasoning."""
    exact: bool = True
    """Whether the counts are the provider's own (False: estimated, e.g. by an import)."""
    at: datetime = Field(default_factory=now)
    """When the call was made (timezone-aware; naive times are taken as UTC)."""

    @field_validator("at")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        from datetime import UTC

        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


class UsageCall(BaseModel):
    """One recorded model call: its usage, what it is tied to, and what chatledger
    projected for it (when the call was paired with a projection of this store)."""

    model_config = _FROZEN

    session_id: str
    seq: int
    """The call's place among the session's recorded calls, from 1."""
    call_id: str | None
    """The caller's id of the call (a repeated one records nothing)."""
    message_id: str | None
    """The assistant message the call produced, as the caller named it (it may be
    stored after the usage); None ties the call to the session's newest turn."""
    after_seq: int | None
    """The ``seq`` of the session's newest stored message when the call was recorded
    (None for an empty session): the turn a call without ``message_id`` belongs to."""
    usage: Usage
    local_tokens: int | None = None
    """chatledger's count of the context it projected for this call (None: the call was
    not paired with a projection)."""
    prefix_kept: bool | None = None
    """Whether the context projected for this call began with the context of the
    session's previous projected call (what a provider's prompt cache can reuse); None
    for a call without projection, or the first projected one."""
    recorded_at: datetime


class UsageRow(BaseModel):
    """The totals of the calls of one model, session or day."""

    model_config = _FROZEN

    key: str
    """The model (``"unknown"`` when not reported), the session id, or the day
    (``YYYY-MM-DD``, UTC)."""
    calls: int
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None
    """Each lane's total; None when no call of the row reported the lane."""
    local_sent_tokens: int | None = None
    """chatledger's count of what it projected for these calls, summed over the calls
    paired with a projection; None when none was."""
    projected_calls: int = 0
    """Calls paired with a projection of the store."""
    cache_breaks: int = 0
    """Projected calls whose context did not begin with the previous call's context
    (compaction changed what the provider had cached)."""
    cost: float | None = None
    """The cost of the priced calls, in the prices' currency; None without prices or
    when no call of the row has one."""
    unpriced_calls: int = 0
    """Calls whose model the prices do not name (left out of ``cost``)."""


class UsageReport(BaseModel):
    """Usage totals of one session or of the tenant, row by row."""

    model_config = _FROZEN

    tenant: str
    session_id: str | None = None
    """The session, or None for the tenant."""
    by: UsageGrouping
    since: datetime | None = None
    """The earliest call counted (None: all)."""
    rows: tuple[UsageRow, ...] = ()
    """One row per key, in key order (days oldest first)."""
    total: UsageRow
    """The totals of every row (key ``"total"``)."""
    priced: bool = False
    """Whether prices were given (``cost`` is None everywhere otherwise)."""


class ModelPrice(BaseModel):
    """One model's prices, in currency per million tokens."""

    model_config = _FROZEN

    input: float = Field(ge=0, allow_inf_nan=False)
    """Uncached input tokens."""
    output: float = Field(ge=0, allow_inf_nan=False)
    """Output tokens, reasoning included."""
    cache_read: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """Cache reads (the input price when None)."""
    cache_write: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """Cache writes (the input price when None)."""

    def cost(self, usage: Usage) -> float:
        """What ``usage`` cost: uncached input x input + cache reads x cache_read +
        cache writes x cache_write + output x output, per million (a lane not reported
        counts 0; uncached input is the input less the cache reads and writes, at least 0)."""
        read = usage.cache_read_tokens or 0
        write = usage.cache_write_tokens or 0
        uncached = max(0, (usage.input_tokens or 0) - read - write)
        read_price = self.input if self.cache_read is None else self.cache_read
        write_price = self.input if self.cache_write is None else self.cache_write
        total = (
            uncached * self.input
            + read * read_price
            + write * write_price
            + (usage.output_tokens or 0) * self.output
        )
        return total / 1_000_000


class Calibration(BaseModel):
    """The provider's input count fitted on chatledger's: ``scale x local + offset``.

    Fitted per session and model on the calls paired with a projection, newest weighing
    most, and bounded: the scale within [:data:`~store.usage.calibration.MIN_SCALE`,
    :data:`~store.usage.calibration.MAX_SCALE`], the offset within [0,
    :data:`~store.usage.calibration.MAX_OFFSET`], whatever a provider reports.
    """

    model_config = _FROZEN

    session_id: str
    model: str | None
    """The model the fit is of (None: the calls did not name one)."""
    scale: float
    offset: float
    calls: int
    """How many paired calls the fit rests on."""
    bounded: bool = False
    """Whether a bound moved the fit (the reports alone would have gone past it)."""

    def provider_tokens(self, local: int) -> int:
        """What the provider is expected to count for a context chatledger counts
        ``local``."""
        return round(self.scale * local + self.offset)

    def local_budget(self, provider_budget: int) -> int:
        """The local count at which the provider is expected to count
        ``provider_budget`` (at least 1)."""
        return max(1, math.floor((provider_budget - self.offset) / self.scale))

    def as_params(self) -> dict[str, object]:
        """What a compaction event records of the fit it used."""
        return {
            "model": self.model,
            "scale": round(self.scale, 6),
            "offset": round(self.offset, 3),
            "calls": self.calls,
            "bounded": self.bounded,
        }
