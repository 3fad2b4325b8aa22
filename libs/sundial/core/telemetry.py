"""OpenTelemetry: where a service's metrics and traces go, and Sundial's instruments.

Components take a :class:`~opentelemetry.metrics.Meter` (tests pass one backed by an
in-memory reader); by default they use the global one, which :func:`configure_telemetry`
points at an OTLP collector when ``SUNDIAL_OTLP_ENDPOINT`` is set, serves at ``/metrics``
(the OpenTelemetry Prometheus exporter) when ``SUNDIAL_METRICS_LISTEN`` is set, and which
otherwise records nothing at almost no cost. The resource carries ``service.name``
(``sundial-<service>``) and ``service.version`` (the package's version); Prometheus shows
them on ``target_info``.

Traces go to the same OTLP collector, and only there: with ``SUNDIAL_OTLP_ENDPOINT`` set,
:func:`configure_telemetry` installs a tracer provider (sampling
``SUNDIAL_TRACE_SAMPLE_RATIO`` of the traces where they start, parents' decisions
followed; spans batched) and hands it to :mod:`sundial.core.tracing`, which makes one
trace per run and instruments the gRPC servers and clients. Unset, no tracer provider
exists and tracing costs nothing. :meth:`Telemetry.shutdown` flushes spans and metrics
within one bound even when the collector is unreachable (the SDK's own span flush is
not bounded by anything shorter than its exporter's retries).

Instruments (lateness and durations in seconds, lateness from the run's nominal
``scheduled_at``). No attribute names a job, and none names a tenant unless the operator
sets ``SUNDIAL_METRICS_TENANT_ATTRIBUTE`` (then the run counters,
``sundial.occurrences.started`` and the executor's histograms carry ``tenant``: one
series per tenant, for a few large tenants, not thousands), so the series stay few:

- ``sundial.build.info`` (every service): 1, with attribute ``version``.
- ``sundial.dispatch.lateness`` (scheduler): due time to the dispatch transaction that
  created the run; a run dispatched on time records 0.
- ``sundial.dispatch.lag`` (scheduler): age of the oldest due job of its partitions that
  the dispatcher has not claimed yet, as of its last pass (0: nothing overdue). Growing
  means dispatch cannot keep up (or stopped).
- ``sundial.occurrences.skipped`` (scheduler): occurrences that got no run started, by
  ``reason``: ``misfire`` (due too long ago under a skip/fire-once misfire policy) or
  ``overlap`` (skipped by the overlap policy, or the buffer was full).
- ``sundial.occurrences.started`` (scheduler, the ledger): scheduled runs whose first
  attempt was granted, by ``outcome``: ``on_time`` (within the job's
  ``lateness_threshold`` of its due time) or ``late``; with the misfire skips above and
  the ``dead`` outcomes below, the job SLO's counts summed over jobs.
- ``sundial.runs.completed`` (scheduler, the ledger): attempts' outcomes the ledger
  accepted, by ``outcome`` (the run's next status: succeeded, retrying, dead, cancelled)
  and ``error_class`` where there is one.
- ``sundial.runs.fenced`` (scheduler, the ledger): outcomes refused, by ``reason``.
- ``sundial.leases.expired`` (scheduler, the sweeper): leases that lapsed, by ``outcome``
  (what the run became: queued again, dead on its last attempt, or cancelled).
- ``sundial.partitions.owned`` (scheduler): partitions this member owns.
- ``sundial.partitions.changes`` (scheduler): partitions this member took (``change``
  ``acquired``) or gave up (``released``, ``lost`` when its etcd lease lapsed): a
  rebalance moves a few; a steady rate means members keep leaving and joining.
- ``sundial.stream.messages`` (scheduler, the stream keeper): messages in a stream, by
  ``stream``: SUNDIAL_RUNS (a work queue: runs published and not yet acknowledged by an
  executor) and SUNDIAL_DEAD (dead letters kept), as of its last check.
- ``sundial.run.start_lateness`` (executor): nominal time to the first attempt's target
  call, the lateness a tenant sees.
- ``sundial.target.duration`` (executor): one target call, by ``outcome`` (the attempt's
  outcome status).
- ``sundial.executor.in_flight`` and ``sundial.executor.free_slots`` (executor): runs
  held and slots free, of ``SUNDIAL_MAX_IN_FLIGHT``.
- ``sundial.consumer.pending`` and ``sundial.consumer.ack_pending`` (executor): messages
  of the shared durable consumer not yet delivered to any executor, and delivered but
  not acknowledged, as of its last consumer check.

- ``rpc.server.duration`` (every service's gRPC server, and the API's Connect port,
  which runs the same handlers): each unary RPC served, by ``rpc.service``,
  ``rpc.method`` and ``rpc.grpc.status_code`` (OpenTelemetry's RPC semantic
  conventions; the gRPC instrumentation makes spans only). Streams are not timed.

Retries and dead letters are ``sundial.runs.completed`` with ``outcome`` ``retrying``
and ``dead`` (plus ``sundial.leases.expired`` with ``outcome`` ``dead``).
"""

from __future__ import annotations

import importlib.metadata
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

from sundial.core import tracing
from sundial.core.config import ConfigError, EnvConfig

DISPATCH_LATENESS = "sundial.dispatch.lateness"
RUN_START_LATENESS = "sundial.run.start_lateness"
RUNS_COMPLETED = "sundial.runs.completed"
RUNS_FENCED = "sundial.runs.fenced"
LEASES_EXPIRED = "sundial.leases.expired"
PARTITIONS_OWNED = "sundial.partitions.owned"
TARGET_DURATION = "sundial.target.duration"
EXECUTOR_IN_FLIGHT = "sundial.executor.in_flight"
EXECUTOR_FREE_SLOTS = "sundial.executor.free_slots"
EXECUTOR_LOOP_LAG = "sundial.executor.loop_lag"
EXECUTOR_PACED_TENANTS = "sundial.executor.paced_tenants"
BUILD_INFO = "sundial.build.info"
DISPATCH_LAG = "sundial.dispatch.lag"
OCCURRENCES_SKIPPED = "sundial.occurrences.skipped"
OCCURRENCES_STARTED = "sundial.occurrences.started"
RUNS_HELD = "sundial.runs.held"
RUNS_ADMITTED = "sundial.runs.admitted"
PARTITION_CHANGES = "sundial.partitions.changes"
STREAM_MESSAGES = "sundial.stream.messages"
CONSUMER_PENDING = "sundial.consumer.pending"
CONSUMER_ACK_PENDING = "sundial.consumer.ack_pending"
RPC_SERVER_DURATION = "rpc.server.duration"
NOTIFICATIONS_DELIVERED = "sundial.notifications.delivered"
NOTIFICATIONS_FAILED = "sundial.notifications.failed"

# An RPC served: a millisecond for a cached read up to the longest calls.
RPC_DURATION_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)

# Bucket bounds in seconds: "on time" (under a second) in detail, then the tail.
LATENESS_BUCKETS_S = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600)
# A target call: milliseconds for a fast webhook up to the longest run timeouts.
TARGET_DURATION_BUCKETS_S = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    30,
    60,
    300,
    900,
    3600,
)


@dataclass(frozen=True, kw_only=True)
class TelemetryConfig(EnvConfig):
    """Where metrics and traces are exported."""

    otlp_endpoint: str = ""
    """OTLP/gRPC collector for metrics and traces, e.g. ``http://otel-collector:4317``;
    empty: nothing is exported."""

    metrics_interval_s: float = 15.0
    """Seconds between metric exports."""

    metrics_tenant_attribute: bool = False
    """Give the run counters (the started occurrences included) and the executor's
    histograms a ``tenant`` attribute (one series per tenant: for a deployment with a few
    tenants, not thousands)."""
    trace_sample_ratio: float = 1.0
    """Share of runs (and of API calls and ledger batches) traced, 0-1, decided where a
    trace starts; every later span of a run follows that decision (it is stored with
    the run). Only with ``otlp_endpoint``."""

    metrics_listen: str = ""
    """host:port of the Prometheus endpoint (``GET /metrics``), e.g. ``0.0.0.0:9464``;
    empty: none. An executor with several worker processes serves one per worker, at
    this port plus the worker's index."""

    def __post_init__(self) -> None:
        if self.otlp_endpoint and not self.otlp_endpoint.startswith(("http://", "https://")):
            raise ConfigError("otlp_endpoint", "expected an http:// or https:// URL")
        if self.metrics_listen:
            metrics_address(self.metrics_listen)
        if self.metrics_interval_s <= 0:
            raise ConfigError("metrics_interval_s", "must be > 0")
        if not 0 <= self.trace_sample_ratio <= 1:
            raise ConfigError("trace_sample_ratio", "must be between 0 and 1")


def metrics_listen_for_worker(listen: str, index: int) -> str:
    """An executor worker's ``SUNDIAL_METRICS_LISTEN``: the port plus its index."""
    host, port = metrics_address(listen, index)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def metrics_address(listen: str, offset: int = 0) -> tuple[str, int]:
    """``SUNDIAL_METRICS_LISTEN`` as (host, port), the port moved by ``offset``.

    Raises:
        ConfigError: Not host:port with a port in 1-65535 (after the offset).
    """
    host, colon, port = listen.rpartition(":")
    if not colon or not port.isdigit() or not 0 < int(port) + offset < 65536:
        raise ConfigError("metrics_listen", "expected host:port, e.g. 0.0.0.0:9464")
    return host.strip("[]") or "0.0.0.0", int(port) + offset


def service_version() -> str:
    """The installed package's version (``service.version``)."""
    try:
        return importlib.metadata.version("sundial")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def lateness_histogram(meter: metrics.Meter, name: str, description: str) -> metrics.Histogram:
    """A lateness histogram in seconds with Sundial's bucket bounds."""
    return meter.create_histogram(
        name,
        unit="s",
        description=description,
        explicit_bucket_boundaries_advisory=LATENESS_BUCKETS_S,
    )


class _OncePerInterval(logging.Filter):
    """Lets one "Queue full" record of the SDK's batch processor through per interval.

    The processor logs a WARNING for every span it drops when its queue is full: in a
    herd that outruns the export, thousands of lines a second about one condition.
    """

    def __init__(self, interval_s: float = 60.0) -> None:
        super().__init__()
        self._interval_s = interval_s
        self._next = 0.0

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith("Queue full"):
            return True
        now = time.monotonic()
        if now < self._next:
            return False
        self._next = now + self._interval_s
        record.msg = f"{record.msg} (said once a minute; lower SUNDIAL_TRACE_SAMPLE_RATIO)"
        return True


_BATCH_LOGGER = "opentelemetry.sdk._shared_internal"


@dataclass(frozen=True)
class Telemetry:
    """What :func:`configure_telemetry` installed."""

    meter_provider: MeterProvider
    metrics_port: int | None = None
    """The port /metrics is served on (None: not served)."""
    _close: Callable[[], None] | None = None
    tracer_provider: TracerProvider | None = None
    """The tracer provider (None: tracing off)."""
    _span_exporter: SpanExporter | None = None

    def shutdown(self, timeout_millis: float = 30_000) -> None:
        """Flush the last spans and metrics within ``timeout_millis`` in all, and stop
        serving /metrics.

        The SDK bounds neither a span flush (its batch processor waits 30 s for an
        export that retries for up to 10 s per batch) nor an unreachable collector's
        export: half the time goes to the spans, then the exporter is shut down, which
        ends its retries and its pending call, and the rest goes to the metrics.
        """
        deadline = time.monotonic() + timeout_millis / 1000
        if self.tracer_provider is not None:
            flush = threading.Thread(
                target=self.tracer_provider.shutdown, name="sundial-span-flush", daemon=True
            )
            flush.start()
            flush.join(timeout_millis / 2000)
            if flush.is_alive() and self._span_exporter is not None:
                self._span_exporter.shutdown()  # interrupts the export's retry wait
                flush.join(max(0.0, min(0.5, deadline - time.monotonic())))
        left_ms = max(100.0, (deadline - time.monotonic()) * 1000)
        self.meter_provider.shutdown(timeout_millis=left_ms)
        if self._close is not None:
            self._close()


def configure_telemetry(
    config: TelemetryConfig,
    service: str,
    *,
    readers: tuple[MetricReader, ...] = (),
    install: bool = True,
) -> Telemetry | None:
    """Install the global meter and tracer providers for ``service``.

    Args:
        config: Where to export.
        service: ``api``, ``scheduler`` or ``executor`` (``service.name`` is
            ``sundial-<service>``).
        readers: Extra metric readers (tests).
        install: False builds the providers without making them the global ones (tests).

    Returns:
        What was installed (shut it down on exit to flush), or None when nothing is
        exported and no reader was given.
    """
    if not config.otlp_endpoint and not config.metrics_listen and not readers:
        return None
    resource = Resource.create(
        {"service.name": f"sundial-{service}", "service.version": service_version()}
    )
    all_readers = list(readers)
    close: Callable[[], None] | None = None
    metrics_port: int | None = None
    tracer_provider: TracerProvider | None = None
    span_exporter: SpanExporter | None = None
    if config.metrics_listen:
        # Imported here: only a service that serves /metrics needs prometheus_client.
        from opentelemetry.exporter.prometheus import PrometheusMetricReader  # noqa: PLC0415
        from prometheus_client import CollectorRegistry, start_http_server  # noqa: PLC0415

        host, port = metrics_address(config.metrics_listen)
        registry = CollectorRegistry()
        all_readers.append(PrometheusMetricReader(registry=registry))
        server, thread = start_http_server(port, addr=host, registry=registry)
        metrics_port = server.server_port

        def stop_serving() -> None:
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)

        close = stop_serving

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
        span_exporter = OTLPSpanExporter(endpoint=config.otlp_endpoint, insecure=insecure)
        tracer_provider = TracerProvider(
            resource=resource,
            sampler=ParentBased(TraceIdRatioBased(config.trace_sample_ratio)),
        )
        # Queue and batch sizes: the SDK's defaults (2,048 spans, batches of 512), which
        # its OTEL_BSP_* variables tune; a burst beyond the queue drops spans, never blocks.
        tracer_provider.add_span_processor(BatchSpanProcessor(span_exporter))
        batch_logger = logging.getLogger(_BATCH_LOGGER)
        if not any(isinstance(f, _OncePerInterval) for f in batch_logger.filters):
            batch_logger.addFilter(_OncePerInterval())
        if install:
            trace.set_tracer_provider(tracer_provider)
            tracing.install(tracer_provider)
    provider = MeterProvider(resource=resource, metric_readers=all_readers)
    if install:
        metrics.set_meter_provider(provider)
    # Every service exports at least this (Prometheus shows ``target_info`` only beside a
    # metric): 1, with the version, the usual "build info" series.
    version = service_version()
    provider.get_meter("sundial").create_observable_gauge(
        BUILD_INFO,
        callbacks=[lambda _options: [metrics.Observation(1, {"version": version})]],
        description="1, with the running version of Sundial",
    )
    return Telemetry(provider, metrics_port, close, tracer_provider, span_exporter)
