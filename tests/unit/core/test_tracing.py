"""Tracing: a run's spans live in its stored context, and with no tracer provider
installed nothing is traced at all (no interceptor, no span)."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

from sundial.core import tracing
from sundial.core.telemetry import TelemetryConfig, configure_telemetry


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Tracing on, into memory, for this test only."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.install(provider)
    try:
        yield exporter
    finally:
        tracing.install(None)


def test_with_no_provider_nothing_is_traced() -> None:
    assert not tracing.enabled()
    assert tracing.server_interceptors() == []
    assert tracing.client_interceptors("127.0.0.1:7") == []
    assert not tracing.start_span("x").get_span_context().is_valid


def test_a_span_of_a_stored_context_is_its_child(spans: InMemorySpanExporter) -> None:
    root = tracing.start_span("sundial.dispatch")
    stored = tracing.traceparent_of(root)
    root.end()
    child = tracing.start_span("sundial.attempt", parent=stored)
    child.end()
    first, second = spans.get_finished_spans()
    context = first.context
    flags = int(context.trace_flags)
    assert flags & 1  # sampled
    assert stored == f"00-{context.trace_id:032x}-{context.span_id:016x}-{flags:02x}"
    assert second.context.trace_id == first.context.trace_id
    assert second.parent is not None and second.parent.span_id == first.context.span_id


def test_a_run_without_a_context_starts_its_own_trace(spans: InMemorySpanExporter) -> None:
    """Not a child of whatever span happens to be current: a run's spans are the run's."""
    with tracing.tracer.start_as_current_span("unrelated") as current:
        for stored in ("", "not a traceparent", "00-" + "0" * 32 + "-" + "0" * 16 + "-01"):
            assert tracing.context_of(stored) is None
            span = tracing.start_span("sundial.attempt", parent=stored)
            span.end()
            assert span.get_span_context().trace_id != current.get_span_context().trace_id
    assert all(s.parent is None for s in spans.get_finished_spans() if s.name != "unrelated")


def test_sampled_reads_a_stored_contexts_flags() -> None:
    trace_id, span_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    assert tracing.sampled(f"00-{trace_id}-{span_id}-01") is True
    assert tracing.sampled(f"00-{trace_id}-{span_id}-03") is True
    for unsampled in (f"00-{trace_id}-{span_id}-00", f"00-{trace_id}-{span_id}-02"):
        assert tracing.sampled(unsampled) is False
        # The propagator reads it as the same unsampled context.
        context = tracing.span_context_of(unsampled)
        assert context is not None
        assert not context.trace_flags.sampled
    for unusable in (
        None,
        "",
        "not a traceparent",
        f"00-{'0' * 32}-{span_id}-00",  # invalid ids: no context, a trace of its own
        f"00-{trace_id}-{'0' * 16}-00",
        f"00-{trace_id}-{span_id}-00-extra",
    ):
        assert tracing.sampled(unusable) is None, unusable
        assert tracing.context_of(unusable) is None, unusable
    # Spellings Sundial never stores: not judged (a span is made as before).
    for other in (f"00-{trace_id.upper()}-{span_id}-00", f"01-{trace_id}-{span_id}-00"):
        assert tracing.sampled(other) is None, other


def test_an_unsampled_context_makes_no_recorded_span(spans: InMemorySpanExporter) -> None:
    """What lets the executor skip an unsampled run's attempt span: the services'
    sampler follows the parent, so a span of an unsampled context records nothing."""
    provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(0.0)))
    provider.add_span_processor(SimpleSpanProcessor(spans))
    tracing.install(provider)
    root = tracing.start_span("sundial.dispatch")
    stored = tracing.traceparent_of(root)
    assert tracing.sampled(stored) is False
    child = tracing.start_span("sundial.attempt", parent=stored)
    assert not child.is_recording()
    root.end()
    child.end()
    assert spans.get_finished_spans() == ()


def test_with_a_provider_servers_and_channels_get_the_interceptors(
    spans: InMemorySpanExporter,
) -> None:
    assert len(tracing.server_interceptors()) == 1
    assert len(tracing.client_interceptors("127.0.0.1:7")) == 4  # one per call shape


def test_the_flush_at_exit_is_bounded_when_the_collector_is_unreachable() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = TelemetryConfig(otlp_endpoint=f"http://127.0.0.1:{port}")
    telemetry = configure_telemetry(config, "executor", install=False)
    assert telemetry is not None and telemetry.tracer_provider is not None
    for i in range(3):
        telemetry.tracer_provider.get_tracer("t").start_span(f"span-{i}").end()
    started = time.monotonic()
    telemetry.shutdown(timeout_millis=1000)
    # The exporter alone retries an unreachable collector for 10 s per batch.
    assert time.monotonic() - started < 2.5


def test_a_full_span_queue_is_reported_once_not_per_dropped_span(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = TelemetryConfig(otlp_endpoint="http://127.0.0.1:9")
    telemetry = configure_telemetry(config, "executor", install=False)
    assert telemetry is not None
    sdk = logging.getLogger("opentelemetry.sdk._shared_internal")
    with caplog.at_level(logging.WARNING):
        for _ in range(100):
            sdk.warning("Queue full, dropping %s.", "Span")
        sdk.warning("Exception while exporting Span.")
    telemetry.shutdown(timeout_millis=200)
    messages = [r.getMessage() for r in caplog.records if r.name == sdk.name]
    assert len(messages) == 2
    assert messages[0].startswith("Queue full, dropping Span.")
    assert messages[1] == "Exception while exporting Span."
