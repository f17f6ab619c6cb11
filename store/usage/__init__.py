"""What each model call really cost: provider-reported usage, reports, prices and the
calibration of chatledger's counts on the provider's (``docs/usage.md``)."""

from store.usage.models import (
    USAGE_GROUPINGS,
    Calibration,
    ModelPrice,
    Usage,
    UsageCall,
    UsageGrouping,
    UsageReport,
    UsageRow,
)
from store.usage.prices import load_prices, read_prices

__all__ = [
    "USAGE_GROUPINGS",
    "Calibration",
    "ModelPrice",
    "Usage",
    "UsageCall",
    "UsageGrouping",
    "UsageReport",
    "UsageRow",
    "load_prices",
    "read_prices",
]
