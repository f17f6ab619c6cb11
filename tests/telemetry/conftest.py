"""Fixtures of the telemetry tests: SDK providers that keep what they receive."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from store import telemetry
from tests.audit.conftest import any_store

__all__ = ["Collected", "any_store", "collected"]


@dataclass
class Collected:
    """What chatledger emitted to the configured providers."""

    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader

    def spans(self, name: str | None = None) -> list[ReadableSpan]:
        """The finished spans (of ``name``), oldest first."""
        return [s for s in self.exporter.get_finished_spans() if name is None or s.name == name]

    def points(self, metric: str) -> list[tuple[dict[str, Any], Any]]:
        """The data points of ``metric``: (attributes, point)."""
        data = self.reader.get_metrics_data()
        out: list[tuple[dict[str, Any], Any]] = []
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for item in scope.metrics:
                    if item.name == metric:
                        out.extend((dict(p.attributes or {}), p) for p in item.data.data_points)
        return out

    def total(self, metric: str, **attributes: str) -> int:
        """The sum of a counter's points whose attributes include ``attributes``."""
        return sum(
            point.value
            for attrs, point in self.points(metric)
            if all(attrs.get(k.replace("__", ".")) == v for k, v in attributes.items())
        )


@pytest.fixture
def collected() -> Iterator[Collected]:
    """chatledger configured with in-memory SDK providers for the test, then reset."""
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    telemetry.configure(tracer_provider=tracer_provider, meter_provider=meter_provider)
    try:
        yield Collected(exporter, reader)
    finally:
        telemetry.configure()
        tracer_provider.shutdown()
        meter_provider.shutdown()
