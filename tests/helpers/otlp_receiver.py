"""An OTLP/gRPC receiver for tests: a threaded gRPC server implementing the collector's
TraceService (and MetricsService, whose exports it drops) from opentelemetry-proto.

Services pointed at it with ``SUNDIAL_OTLP_ENDPOINT=receiver.endpoint`` export their
spans here; the test reads them back as :class:`ReceivedSpan`::

    with OtlpReceiver() as receiver:
        ... services with SUNDIAL_OTLP_ENDPOINT=receiver.endpoint ...
        spans = receiver.trace(trace_id)
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import grpc
from opentelemetry.proto.collector.metrics.v1 import (
    metrics_service_pb2,
    metrics_service_pb2_grpc,
)
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

STATUS_ERROR = trace_pb2.Status.STATUS_CODE_ERROR


@dataclass(frozen=True)
class ReceivedSpan:
    """One exported span, ids as lowercase hex."""

    service: str
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    status_code: int
    attributes: dict[str, Any]
    links: tuple[tuple[str, str], ...] = field(default=())
    """(trace id, span id) of each link."""


def _value(value: common_pb2.AnyValue) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs}


class _Traces(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, received: list[ReceivedSpan]) -> None:
        self._received = received

    def Export(
        self,
        request: trace_service_pb2.ExportTraceServiceRequest,
        context: grpc.ServicerContext,
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        for resource_spans in request.resource_spans:
            service = str(_attributes(resource_spans.resource.attributes).get("service.name"))
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    self._received.append(
                        ReceivedSpan(
                            service=service,
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            kind=span.kind,
                            status_code=span.status.code,
                            attributes=_attributes(span.attributes),
                            links=tuple((ln.trace_id.hex(), ln.span_id.hex()) for ln in span.links),
                        )
                    )
        return trace_service_pb2.ExportTraceServiceResponse()


class _Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
    def Export(
        self,
        request: metrics_service_pb2.ExportMetricsServiceRequest,
        context: grpc.ServicerContext,
    ) -> metrics_service_pb2.ExportMetricsServiceResponse:
        return metrics_service_pb2.ExportMetricsServiceResponse()


class OtlpReceiver:
    """OTLP/gRPC on 127.0.0.1:<free port>, plaintext; keeps every span it is sent."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self._server: grpc.Server | None = None
        self.endpoint = ""

    def __enter__(self) -> OtlpReceiver:
        # A threaded server, bound to no event loop: it outlives a test's loop, so a
        # module's tests can share it (and the services exporting to it).
        self._server = grpc.server(
            ThreadPoolExecutor(max_workers=4, thread_name_prefix="otlp"),
            options=[("grpc.so_reuseport", 0)],
        )
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_Traces(self.spans), self._server)
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(_Metrics(), self._server)
        port = self._server.add_insecure_port("127.0.0.1:0")
        self.endpoint = f"http://127.0.0.1:{port}"
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop serving: nothing listens at ``endpoint`` any more. Idempotent."""
        if self._server is not None:
            self._server.stop(0).wait()
            self._server = None

    def forget(self) -> None:
        """Drop the spans received so far (a test sharing the receiver starts anew)."""
        self.spans.clear()

    def trace(self, trace_id: str) -> list[ReceivedSpan]:
        """The spans received so far of one trace."""
        return [span for span in self.spans if span.trace_id == trace_id]

    def span(self, span_id: str) -> ReceivedSpan | None:
        """The span with this id, if received."""
        return next((span for span in self.spans if span.span_id == span_id), None)
