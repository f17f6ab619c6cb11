"""Where chatledger's spans and metrics go: the configured providers, or nowhere.

chatledger needs only ``opentelemetry-api`` (the ``otel`` extra). It uses the providers
given to :func:`configure`, else the global ones that the application set up with the
SDK (``trace.set_tracer_provider`` / ``metrics.set_meter_provider``). Without either
(or without the API installed) :func:`instruments` returns None and nothing is built
or emitted: each store operation then pays for one function call and two global
lookups. The tracer and the instruments are built once per pair of providers.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from store.telemetry import names

if TYPE_CHECKING:
    from opentelemetry.metrics import Counter, Histogram, Meter, MeterProvider
    from opentelemetry.trace import Tracer, TracerProvider

__all__ = ["Instruments", "configure", "instruments"]


@dataclass(frozen=True, slots=True)
class Instruments:
    """The tracer and the metric instruments of one pair of providers (either may be
    missing: then its part is None)."""

    tracer: Tracer | None
    tokens_stored: Counter | None
    tokens_sent: Counter | None
    tokens_saved: Counter | None
    outcomes: Counter | None
    duration: Histogram | None


@dataclass
class _State:
    available: bool | None = None
    """Whether ``opentelemetry-api`` is installed (None: not looked yet)."""
    tracer_provider: Any = None
    """The provider given to :func:`configure` (None: the global one)."""
    meter_provider: Any = None
    built_for: tuple[int, int] | None = None
    built: Instruments | None = None


_STATE = _State()


def configure(
    *,
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
) -> None:
    """Send chatledger's spans and metrics to these providers instead of the global ones
    (``configure()`` with neither goes back to the global providers)."""
    if (tracer_provider is not None or meter_provider is not None) and not _available():
        raise ImportError(
            "chatledger's telemetry needs opentelemetry-api: pip install 'chatledger[otel]'"
        )
    _STATE.tracer_provider = tracer_provider
    _STATE.meter_provider = meter_provider
    _STATE.built_for = None
    _STATE.built = None


def _available() -> bool:
    if _STATE.available is None:
        _STATE.available = importlib.util.find_spec("opentelemetry") is not None and (
            importlib.util.find_spec("opentelemetry.trace") is not None
        )
    return _STATE.available


def _providers() -> tuple[Any, Any]:
    """The tracer and meter providers in force, None for each that is not configured."""
    from opentelemetry import metrics, trace

    tracer_provider: Any = _STATE.tracer_provider or trace.get_tracer_provider()
    meter_provider: Any = _STATE.meter_provider or metrics.get_meter_provider()
    if isinstance(tracer_provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        tracer_provider = None
    if isinstance(meter_provider, metrics.NoOpMeterProvider) or (
        type(meter_provider).__name__ == "_ProxyMeterProvider"
    ):
        meter_provider = None
    return tracer_provider, meter_provider


def instruments() -> Instruments | None:
    """The instruments of the providers in force, or None when none is configured."""
    if not _available():
        return None
    tracer_provider, meter_provider = _providers()
    if tracer_provider is None and meter_provider is None:
        return None
    key = (id(tracer_provider), id(meter_provider))
    if _STATE.built_for != key or _STATE.built is None:
        _STATE.built = _build(tracer_provider, meter_provider)
        _STATE.built_for = key
    return _STATE.built


def _build(tracer_provider: Any, meter_provider: Any) -> Instruments:
    tracer = None
    if tracer_provider is not None:
        tracer = tracer_provider.get_tracer(names.INSTRUMENTATION_NAME)
    if meter_provider is None:
        return Instruments(tracer, None, None, None, None, None)
    meter: Meter = meter_provider.get_meter(names.INSTRUMENTATION_NAME)
    return Instruments(
        tracer=tracer,
        tokens_stored=meter.create_counter(
            names.TOKENS_STORED, unit="{token}", description="Tokens of the messages stored"
        ),
        tokens_sent=meter.create_counter(
            names.TOKENS_SENT, unit="{token}", description="Tokens of the contexts sent"
        ),
        tokens_saved=meter.create_counter(
            names.TOKENS_SAVED,
            unit="{token}",
            description="Active tokens removed by applied compactions",
        ),
        outcomes=meter.create_counter(
            names.COMPACTION_OUTCOMES,
            unit="{compaction}",
            description="Compactions, by outcome and strategy",
        ),
        duration=meter.create_histogram(
            names.COMPACTION_DURATION, unit="s", description="Wall time of a compaction"
        ),
    )
