"""OpenTelemetry: where a service's metrics and traces go, and Sundial's instruments.

Components take a :class:`~opentelemetry.metrics.Meter` (tests pass one backed by an
in-memory reader); by default they use the global one, which :func:`configure_telemetry`
points at an OTLP collector when ``SUNDIAL_OTLP_ENDPOINT`` is set and which otherwise
records nothing at almost no cost.

Instruments (all lateness in seconds, measured from the run's nominal ``scheduled_at``):

- ``sundial.dispatch.lateness`` (scheduler): due time to the dispatch transaction that
  created the run; a run dispatched on time records 0.
- ``sundial.run.start_lateness`` (executor): nominal time to the first attempt's target
  call, the lateness a tenant sees.
"""

from __future__ import annotations

from dataclasses import dataclass

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from sundial.core.config import ConfigError, EnvConfig

DISPATCH_LATENESS = "sundial.dispatch.lateness"
RUN_START_LATENESS = "sundial.run.start_lateness"

# Bucket bounds in seconds: "on time" (under a second) in detail, then the tail.
LATENESS_BUCKETS_S = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600)


@dataclass(frozen=True, kw_only=True)
class TelemetryConfig(EnvConfig):
    """Where metrics and traces are exported."""

    otlp_endpoint: str = ""
    """OTLP/gRPC collector for metrics and traces, e.g. ``http://otel-collector:4317``;
    empty: nothing is exported."""

    metrics_interval_s: float = 15.0
    """Seconds between metric exports."""

    def __post_init__(self) -> None:
        if self.otlp_endpoint and not self.otlp_endpoint.startswith(("http://", "https://")):
            raise ConfigError("otlp_endpoint", "expected an http:// or https:// URL")
        if self.metrics_interval_s <= 0:
            raise ConfigError("metrics_interval_s", "must be > 0")


def lateness_histogram(meter: metrics.Meter, name: str, description: str) -> metrics.Histogram:
    """A lateness histogram in seconds with Sundial's bucket bounds."""
    return meter.create_histogram(
        name,
        unit="s",
        description=description,
        explicit_bucket_boundaries_advisory=LATENESS_BUCKETS_S,
    )


def configure_telemetry(
    config: TelemetryConfig, service: str, *, readers: tuple[MetricReader, ...] = ()
) -> MeterProvider | None:
    """Install the global meter and tracer providers for ``service``.

    Returns:
        The meter provider (shut it down on exit to flush), or None when nothing is
        exported and no reader was given.
    """
    if not config.otlp_endpoint and not readers:
        return None
    resource = Resource.create({"service.name": f"sundial-{service}"})
    all_readers = list(readers)
    if config.otlp_endpoint:
        # Imported here: the exporter pulls in its own gRPC stubs, needed only when used.
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (  # noqa: PLC0415
            OTLPMetricExporter,
        )
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # noqa: PLC0415
            OTLPSpanExporter,
        )

        insecure = config.otlp_endpoint.startswith("http://")
        all_readers.append(
            PeriodicExportingMetricReader(
                OTLPMetricExporter(endpoint=config.otlp_endpoint, insecure=insecure),
                export_interval_millis=config.metrics_interval_s * 1000,
            )
        )
        tracer_provider = TracerProvider(resource=resource)
        tracer_provider.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=config.otlp_endpoint, insecure=insecure))
        )
        trace.set_tracer_provider(tracer_provider)
    provider = MeterProvider(resource=resource, metric_readers=all_readers)
    metrics.set_meter_provider(provider)
    return provider
