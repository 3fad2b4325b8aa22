"""Reading what an in-memory OpenTelemetry reader collected, in tests."""

from __future__ import annotations

from typing import Any

from opentelemetry.metrics import Meter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

__all__ = ["counts", "meter_and_reader", "points"]


def meter_and_reader() -> tuple[Meter, InMemoryMetricReader]:
    """A meter whose measurements ``reader`` collects (cumulative)."""
    reader = InMemoryMetricReader()
    return MeterProvider(metric_readers=[reader]).get_meter("test"), reader


def points(reader: InMemoryMetricReader, name: str) -> list[Any]:
    """The data points of instrument ``name`` collected now (empty: none recorded)."""
    data = reader.get_metrics_data()
    return [
        point
        for resource in (data.resource_metrics if data else [])
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == name
        for point in metric.data.data_points  # type: ignore[union-attr]
    ]


def counts(reader: InMemoryMetricReader, name: str) -> dict[tuple[tuple[str, Any], ...], int]:
    """A counter's values by their (sorted) attributes."""
    return {
        tuple(sorted((point.attributes or {}).items())): int(point.value)
        for point in points(reader, name)
    }
