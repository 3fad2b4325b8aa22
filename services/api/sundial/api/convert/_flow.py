"""Flow limits: wire <-> what a tenant sets and what is stored (flow.proto)."""

from __future__ import annotations

from sundial.api.model import FlowLimitSpec, StoredFlowLimit
from sundial.core import wire
from sundial.v1 import flow_pb2


def flow_limit_in(message: flow_pb2.FlowLimit) -> FlowLimitSpec:
    """The input fields of a wire limit (ranges checked by validation; the output-only
    state is ignored)."""
    return FlowLimitSpec(
        key=message.key,
        rate_per_second=message.rate_per_second,
        burst=message.burst,
        max_running=message.max_running,
    )


def flow_limit_out(limit: StoredFlowLimit) -> flow_pb2.FlowLimit:
    """A stored limit with its state."""
    spec = limit.spec
    message = flow_pb2.FlowLimit(
        key=spec.key,
        rate_per_second=spec.rate_per_second,
        burst=spec.burst,
        max_running=spec.max_running,
        waiting_runs=limit.waiting_runs,
        running_runs=limit.running_runs,
        available_tokens=limit.available_tokens,
        create_time=wire.timestamp(limit.create_time),
        update_time=wire.timestamp(limit.update_time),
    )
    if limit.blocked_until is not None:
        message.blocked_until.CopyFrom(wire.timestamp(limit.blocked_until))
    return message
