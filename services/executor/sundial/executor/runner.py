"""One attempt of one run: headers, circuit breaker, run timeout, the target call.

:meth:`Runner.run` never raises for a failed call (the failure is the outcome); it lets
cancellation through, which is how cancel orders, lost leases and shutdown stop a call.
"""

from __future__ import annotations

import asyncio
import functools
import os
from datetime import timedelta

from opentelemetry import metrics, trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from sundial.core import tracing
from sundial.core.clock import Clock, SystemClock
from sundial.core.telemetry import (
    RUN_START_LATENESS,
    TARGET_DURATION,
    TARGET_DURATION_BUCKETS_S,
    lateness_histogram,
)
from sundial.executor.convert import execute_request
from sundial.executor.model import Lease
from sundial.run import (
    ErrorClass,
    HttpTarget,
    Outcome,
    OutcomeStatus,
    RunKind,
    Target,
    format_timestamp,
)
from sundial.targets.breaker import CircuitBreaker
from sundial.targets.grpc import GrpcCaller
from sundial.targets.http import HttpCaller, breaker_key

__all__ = ["USER_AGENT", "Runner", "sundial_headers"]

USER_AGENT = "sundial-executor/1"
# gRPC calls carry the run timeout as their own deadline; the local timer gets a little
# more so the target's DEADLINE_EXCEEDED (with its metadata) wins the race.
_GRPC_SLACK_S = 1.0

_propagator = TraceContextTextMapPropagator()


def _traceparent(stored: str) -> dict[str, str]:
    """W3C trace context of the current span (the attempt's; the call's span replaces
    it with its own); the run's ``stored`` context when its trace is not sampled (no
    attempt span was made); or a fresh one when tracing is off."""
    carrier: dict[str, str] = {}
    # Off, no span can be current: skip the context lookup (a per-run cost).
    if tracing.enabled():
        if trace.get_current_span().get_span_context().is_valid:
            _propagator.inject(carrier)
        elif tracing.sampled(stored) is False:
            carrier["traceparent"] = stored
    if "traceparent" not in carrier:
        # No tracer provider configured: still give the target a unique trace id, so
        # its logs of this attempt can be correlated with ours.
        ids = os.urandom(24).hex()  # one read for the trace and the span id
        carrier = {"traceparent": f"00-{ids[:32]}-{ids[32:]}-01"}
    return carrier


# The runs of a herd, or of one second of steady load, share their scheduled instant.
_scheduled_at = functools.lru_cache(maxsize=1024)(format_timestamp)
# The breaker key of a URL (parsing it per call was a per-run cost; jobs share URLs).
_http_breaker_key = functools.lru_cache(maxsize=4096)(breaker_key)


def sundial_headers(lease: Lease) -> dict[str, str]:
    """The headers (and, lower-cased, gRPC metadata) every attempt carries."""
    headers = {
        "Idempotency-Key": lease.run_key,
        "Sundial-Scheduled-At": _scheduled_at(lease.run.scheduled_at),
        "Sundial-Attempt": str(lease.attempt),
        **_traceparent(lease.traceparent),
    }
    if lease.lease_id:
        headers["Sundial-Execution-Id"] = lease.execution_id
    if lease.signature:
        headers["Sundial-Signature"] = lease.signature
    if lease.headers:
        headers.update(lease.headers)
    return headers


class Runner:
    """Calls targets for granted runs.

    Args:
        http: Calls HTTP targets.
        grpc_caller: Calls gRPC targets.
        breaker: Holds calls to failing targets back.
        meter: Records the first attempts' start lateness and each target call's duration
            (the global meter if None).
        clock: Stamps the outcomes and measures the lateness.
        tenant_attribute: Give both histograms a ``tenant`` attribute
            (``SUNDIAL_METRICS_TENANT_ATTRIBUTE``).

    The attempt's span is the caller's (:class:`~sundial.executor.inflight.InFlight`);
    the call's own span is the HTTP caller's or the gRPC instrumentation's.
    """

    def __init__(
        self,
        http: HttpCaller,
        grpc_caller: GrpcCaller,
        breaker: CircuitBreaker,
        meter: metrics.Meter | None = None,
        *,
        clock: Clock | None = None,
        tenant_attribute: bool = False,
    ) -> None:
        self._http = http
        self._tenant_attribute = tenant_attribute
        self._grpc = grpc_caller
        self._breaker = breaker
        self._clock = clock or SystemClock()
        meter = meter or metrics.get_meter("sundial.executor")
        self._start_lateness = lateness_histogram(
            meter, RUN_START_LATENESS, "Nominal time to the first attempt's target call"
        )
        self._target_duration = meter.create_histogram(
            TARGET_DURATION,
            unit="s",
            description="One target call, by the attempt's outcome status",
            explicit_bucket_boundaries_advisory=TARGET_DURATION_BUCKETS_S,
        )

    async def run(self, lease: Lease) -> Outcome:
        """Perform the attempt ``lease`` and return how it ended.

        Raises:
            asyncio.CancelledError: The call was cancelled (nothing is recorded).
        """
        target = lease.target
        origin = (
            _http_breaker_key(target.url)
            if isinstance(target, HttpTarget)
            else f"grpc://{target.address}"
        )
        key = (lease.tenant_id, origin)  # one tenant's failures never hold back another's
        held_back_s = self._breaker.acquire(key)
        if held_back_s is not None:
            now = self._clock.now()
            return Outcome(
                status=OutcomeStatus.FAILED_RETRYABLE,
                started_at=now,
                finished_at=now,
                error=f"circuit breaker open for {origin}: not called",
                error_class=ErrorClass.CONNECTION,
                retry_after=timedelta(seconds=held_back_s),
            )
        started = self._clock.now()
        called_at = self._clock.monotonic()
        if lease.attempt == 1 and lease.kind is not RunKind.BACKFILL:
            # Backfills are in the past by design; retries measure the backoff, not us.
            self._start_lateness.record(
                max(0.0, (started - lease.run.scheduled_at).total_seconds()),
                {"tenant": lease.tenant_id} if self._tenant_attribute else None,
            )
        try:
            outcome = await self._call(lease, target)
        except TimeoutError:
            outcome = Outcome(
                status=OutcomeStatus.TIMED_OUT,
                started_at=started,
                finished_at=self._clock.now(),
                error=f"run timeout of {lease.run_timeout_s:g} s exceeded",
                error_class=ErrorClass.TIMEOUT,
            )
        except BaseException:  # cancelled (or a bug): the target gave no answer
            self._breaker.release(key)
            raise
        attributes = {"outcome": outcome.status.value}
        if self._tenant_attribute:
            attributes["tenant"] = lease.tenant_id
        self._target_duration.record(self._clock.monotonic() - called_at, attributes)
        # A final failure (a 4xx) is an answer: the target is up.
        self._breaker.record(key, failed=outcome.status.retryable)
        return outcome

    async def _call(self, lease: Lease, target: Target) -> Outcome:
        headers = sundial_headers(lease)
        if isinstance(target, HttpTarget):
            headers["User-Agent"] = USER_AGENT
            async with asyncio.timeout(lease.run_timeout_s):
                return await self._http.call(
                    target, lease.payload, headers, lease.egress, lease.tenant_id
                )
        metadata = {name.lower(): value for name, value in headers.items()}
        async with asyncio.timeout(lease.run_timeout_s + _GRPC_SLACK_S):
            return await self._grpc.call(
                target,
                execute_request(lease),
                metadata,
                timeout_s=lease.run_timeout_s,
                egress=lease.egress,
                tenant=lease.tenant_id,
            )
