"""Calling gRPC targets: ``sundial.v1.TargetService/Execute`` with a deadline.

The address is resolved and checked at every call (:class:`CallRules`: the operator's
deny list and the egress policy of the call's tenant), before a cached channel is picked,
so a changed policy stops the next call even over an open channel; the channel dials
the checked IP: plaintext channels keep the target's ``host:port`` as
``:authority``; TLS channels verify the certificate against the target's host name
(``grpc.ssl_target_name_override``). Channels are cached per (target, resolved IP) and
reused by every call to it.
"""

from __future__ import annotations

from collections import OrderedDict

import grpc

from sundial.core.clock import Clock, SystemClock
from sundial.core.config import MAX_MESSAGE_BYTES
from sundial.core.egress import EgressPolicy, Protocol
from sundial.core.tracing import client_interceptors
from sundial.run import ErrorClass, GrpcTarget, Outcome, OutcomeStatus
from sundial.targets.address import AddressPolicy, TargetRefused, split_host_port
from sundial.targets.classify import classify_grpc, failure, parse_retry_after
from sundial.v1 import target_pb2, target_pb2_grpc

__all__ = ["TARGET_ANSWER_MAX_BYTES", "GrpcCaller", "target_message_limits"]

_MAX_CHANNELS = 512  # least recently used channels beyond this are closed

TARGET_ANSWER_MAX_BYTES = 1024 * 1024
"""Largest ExecuteResponse read from a tenant's gRPC target: the answer only carries a
short result, and a target that sends more cannot make a caller hold more than this."""


def target_message_limits() -> list[tuple[str, int]]:
    """Channel options of a call to a tenant's target: requests up to Sundial's message
    limit (a payload and metadata always fit), answers up to
    :data:`TARGET_ANSWER_MAX_BYTES` (a larger one fails the call RESOURCE_EXHAUSTED)."""
    return [
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_receive_message_length", TARGET_ANSWER_MAX_BYTES),
    ]


def _trailing(error: grpc.aio.AioRpcError, key: str) -> str | None:
    for name, value in error.trailing_metadata() or ():
        if name.lower() == key and isinstance(value, str):
            return value
    return None


class GrpcCaller:
    """Makes one Execute call per attempt over cached channels.

    Args:
        policy: The SSRF rules, applied at every call.
        clock: Stamps the outcomes and tells our deadline from the target's.
    """

    def __init__(self, policy: AddressPolicy, *, clock: Clock | None = None) -> None:
        self._policy = policy
        self._clock = clock or SystemClock()
        self._channels: OrderedDict[tuple[str, bool, str], grpc.aio.Channel] = OrderedDict()

    async def aclose(self) -> None:
        """Close every cached channel."""
        channels = list(self._channels.values())
        self._channels.clear()
        for channel in channels:
            await channel.close()

    async def _channel(
        self, target: GrpcTarget, egress: EgressPolicy | None, tenant: str | None
    ) -> grpc.aio.Channel:
        host, port = split_host_port(target.address)
        rules = self._policy.rules(egress, Protocol.GRPC, tenant)
        ip = (await rules.resolve(host, port))[0]
        key = (target.address, target.plaintext, ip)
        channel = self._channels.get(key)
        if channel is not None:
            self._channels.move_to_end(key)
            return channel
        dial = f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"
        options: list[tuple[str, str | int]] = [
            ("grpc.default_authority", target.address),
            *target_message_limits(),
        ]
        # Traced by the gRPC instrumentation while tracing is on: its client span is the
        # attempt's child and its traceparent the one the target receives.
        interceptors = client_interceptors(target.address)
        if target.plaintext:
            channel = grpc.aio.insecure_channel(dial, options=options, interceptors=interceptors)
        else:
            options.append(("grpc.ssl_target_name_override", host))
            channel = grpc.aio.secure_channel(
                dial, grpc.ssl_channel_credentials(), options, interceptors=interceptors
            )
        self._channels[key] = channel
        while len(self._channels) > _MAX_CHANNELS:
            _, oldest = self._channels.popitem(last=False)
            await oldest.close(grace=5.0)
        return channel

    async def call(
        self,
        target: GrpcTarget,
        request: target_pb2.ExecuteRequest,
        metadata: dict[str, str],
        *,
        timeout_s: float,
        egress: EgressPolicy | None = None,
        tenant: str | None = None,
    ) -> Outcome:
        """Call Execute with ``request`` and ``metadata`` (Sundial's, added to the job's).

        ``timeout_s`` is the deadline (the run timeout): a DEADLINE_EXCEEDED once it ran
        out is a timeout, an earlier one the target's answer. The address is checked
        under ``egress`` (the tenant's policy from the grant; None: the operator's
        default). Never raises for a failed call: the failure is the outcome.
        Cancellation propagates (and cancels the RPC).
        """
        started = self._clock.now()
        try:
            channel = await self._channel(target, egress, tenant)
        except TargetRefused as exc:
            return failure(
                started, self._clock.now(), OutcomeStatus.FAILED_FINAL, exc.error_class, str(exc)
            )
        except OSError as exc:
            return failure(
                started,
                self._clock.now(),
                OutcomeStatus.FAILED_RETRYABLE,
                ErrorClass.CONNECTION,
                str(exc),
            )
        stub = target_pb2_grpc.TargetServiceStub(channel)
        # Sundial's keys win over the job's (the API refuses those names anyway).
        pairs = [(k, v) for k, v in sorted(target.metadata.items()) if k.lower() not in metadata]
        pairs.extend(metadata.items())
        began = self._clock.monotonic()
        try:
            await stub.Execute(request, timeout=timeout_s, metadata=pairs)
        except grpc.aio.AioRpcError as exc:
            finished = self._clock.now()
            code = exc.code()
            elapsed = self._clock.monotonic() - began
            message = f"gRPC {code.name}: {exc.details() or ''}".rstrip(": ")
            if code == grpc.StatusCode.DEADLINE_EXCEEDED and elapsed >= timeout_s * 0.99:
                # Our own deadline (the run timeout) ran out, not the target's.
                return Outcome(
                    status=OutcomeStatus.TIMED_OUT,
                    started_at=started,
                    finished_at=finished,
                    error=f"run timeout of {timeout_s:g} s exceeded",
                    error_class=ErrorClass.TIMEOUT,
                    grpc_code=code.value[0],
                )
            status, error_class = classify_grpc(code)
            if code == grpc.StatusCode.UNAVAILABLE and _no_answer(exc):
                error_class = ErrorClass.CONNECTION
            return Outcome(
                status=status,
                started_at=started,
                finished_at=finished,
                error=message,
                error_class=error_class,
                retry_after=parse_retry_after(_trailing(exc, "retry-after"), finished),
                grpc_code=code.value[0],
            )
        return Outcome(
            status=OutcomeStatus.SUCCEEDED,
            started_at=started,
            finished_at=self._clock.now(),
            grpc_code=grpc.StatusCode.OK.value[0],
        )


def _no_answer(error: grpc.aio.AioRpcError) -> bool:
    """True when UNAVAILABLE came from the transport (no connection), not from the target."""
    details = (error.details() or "").lower()
    return any(
        marker in details
        for marker in ("failed to connect", "connection refused", "connect failed", "dns")
    )
