"""Traces: one trace per run, and spans of every gRPC server and client.

A run's trace context (its W3C ``traceparent``) is born with the run and stored with it
(``job_runs.traceparent``, migration 0010), so every later step joins the same trace
however much later and on whichever process it happens (docs/design.md section 9):

- a scheduled run's trace starts at dispatch (a ``sundial.dispatch`` span per run; a
  new job's first runs link to the ``CreateJob`` call, whose context the job row keeps
  until then);
- a ``TriggerJob`` run continues the API call's trace (the call's server span, which
  honours an incoming ``traceparent``), a ``BackfillJob`` run starts its own trace
  (``sundial.backfill``) linked to the call;
- the sweeper's publish, retry and lease-expiry spans, the dead-letter span and the
  executor's ``sundial.attempt`` spans are children of the stored context; the grant
  carries it to the executor. An attempt links to the ``sundial.lease`` span of the
  LeaseRuns batch that granted it; its target call (the gRPC instrumentation's client
  span, or the HTTP caller's) is its child and carries the ``traceparent`` the target
  receives.

gRPC servers and clients get the OpenTelemetry gRPC instrumentation's aio interceptors
(:func:`server_interceptors`, :func:`client_interceptors`): ``rpc.*`` attributes,
context propagation in metadata, ERROR status on failed calls. Health checks and
reflection are left out (probes would make a trace every few seconds).

When no tracer provider is configured (``SUNDIAL_OTLP_ENDPOINT`` empty) nothing here
does any work: no interceptor is installed, no span is made, no context is stored, and
:func:`enabled` is the one check callers make.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import grpc
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.semconv.attributes.server_attributes import SERVER_ADDRESS, SERVER_PORT
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

__all__ = [
    "batch_span",
    "client_interceptors",
    "context_of",
    "enabled",
    "install",
    "sampled",
    "server_interceptors",
    "span_context_of",
    "start_span",
    "traceparent_of",
    "tracer",
]

tracer: trace.Tracer = trace.NoOpTracer()
"""Sundial's own spans: the installed provider's tracer (a no-op one until then)."""

_provider: trace.TracerProvider | None = None
_PROPAGATOR = TraceContextTextMapPropagator()

Attributes = Mapping[str, str | int | float | bool]


def install(provider: trace.TracerProvider | None) -> None:
    """Trace with ``provider`` from now on (None: tracing off again, for tests).

    :func:`~sundial.core.telemetry.configure_telemetry` installs the service's provider
    before the service is built, so its servers and channels get the interceptors.
    """
    global tracer, _provider  # noqa: PLW0603 (the process's one tracing switch)
    _provider = provider
    tracer = provider.get_tracer("sundial") if provider is not None else trace.NoOpTracer()


def enabled() -> bool:
    """True while a tracer provider is installed (``SUNDIAL_OTLP_ENDPOINT`` set)."""
    return _provider is not None


def traceparent_of(span: trace.Span) -> str:
    """The W3C ``traceparent`` of ``span`` (empty for an invalid one)."""
    ctx = span.get_span_context()
    if not ctx.is_valid:
        return ""
    # Formatted directly: a herd formats one per run, and the propagator's inject
    # (context, carrier, setter) costs several times more for the same string.
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


_TRACEPARENT = re.compile(r"00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")


def sampled(traceparent: str | None) -> bool | None:
    """What a stored ``traceparent``'s flags say of its trace: True sampled, False not
    (the services' sampler follows its parent, so no span of it is recorded), None when
    there is none or it is malformed (a span of it would start a trace of its own).

    A string check, not the propagator's parse: it lets the executor skip an unsampled
    run's attempt span, whose making cost more than the rest of the run's tracing."""
    if not traceparent or not _TRACEPARENT.fullmatch(traceparent):
        return None
    if traceparent[3:35] == "0" * 32 or traceparent[36:52] == "0" * 16:
        return None  # invalid ids (W3C): the context is not used
    return bool(int(traceparent[53:], 16) & 1)


def context_of(traceparent: str | None) -> otel_context.Context | None:
    """The context a stored ``traceparent`` names, or None when there is none (empty,
    malformed, or a run created while tracing was off)."""
    if not traceparent:
        return None
    ctx = _PROPAGATOR.extract({"traceparent": traceparent})
    if not trace.get_current_span(ctx).get_span_context().is_valid:
        return None
    return ctx


def span_context_of(traceparent: str | None) -> trace.SpanContext | None:
    """The span a stored ``traceparent`` names (for a link), or None."""
    ctx = context_of(traceparent)
    return None if ctx is None else trace.get_current_span(ctx).get_span_context()


def start_span(
    name: str,
    *,
    parent: str | None = None,
    kind: trace.SpanKind = trace.SpanKind.INTERNAL,
    attributes: Attributes | None = None,
    links: Sequence[trace.SpanContext | None] = (),
    start_time: int | None = None,
) -> trace.Span:
    """Start a span of a run's trace: a child of the stored ``parent`` context, or, when
    it has none, the root of a new trace (never a child of whatever span is current:
    a run's spans belong to the run). The caller ends it."""
    ctx = context_of(parent) or otel_context.Context()
    return tracer.start_span(
        name,
        context=ctx,
        kind=kind,
        attributes=attributes,
        links=[trace.Link(link) for link in links if link is not None and link.is_valid],
        start_time=start_time,
    )


@contextlib.contextmanager
def batch_span(name: str, attributes: Attributes) -> Iterator[trace.SpanContext | None]:
    """A current span for one batched call (LeaseRuns of many runs): the gRPC client
    spans of its tries are its children and each run's span links to it. Yields its
    context, or None (and makes no span) while tracing is off."""
    if not enabled():
        yield None
        return
    with tracer.start_as_current_span(name, attributes=attributes) as span:
        yield span.get_span_context()


def server_interceptors() -> list[grpc.aio.ServerInterceptor]:
    """The instrumentation's aio server interceptor, or none while tracing is off.

    It must run outside :class:`~sundial.core.grpc.ErrorInterceptor` so the status
    that interceptor aborts with is the one the span records.
    """
    if not enabled():
        return []
    # Imported here: a service without tracing never loads the instrumentation.
    from opentelemetry.instrumentation.grpc import (  # noqa: PLC0415
        aio_server_interceptor,
        filters,
    )

    quiet = filters.any_of(filters.health_check(), filters.service_prefix("grpc.reflection"))
    interceptor: grpc.aio.ServerInterceptor = aio_server_interceptor(filter_=filters.negate(quiet))
    return [interceptor]


def client_interceptors(address: str) -> list[grpc.aio.ClientInterceptor]:
    """The instrumentation's aio client interceptors for a channel to ``address``
    (``host:port``), or none while tracing is off; unary calls' spans also get
    ``server.address`` and ``server.port``."""
    if not enabled():
        return []
    from opentelemetry.instrumentation.grpc import aio_client_interceptors  # noqa: PLC0415

    target = address.split("://", 1)[-1]
    host, colon, port = target.rpartition(":")
    server: dict[str, Any] = {SERVER_ADDRESS: host.strip("[]") if colon else target}
    if colon and port.isdigit() and "," not in target:
        server[SERVER_PORT] = int(port)

    def add_server(span: trace.Span, _request: object) -> None:
        span.set_attributes(server)

    interceptors: list[grpc.aio.ClientInterceptor] = aio_client_interceptors(
        tracer_provider=_provider, request_hook=add_server
    )
    return interceptors
