"""Flow control's checks: a key (a job's or a limit's) and a key's limits (flow.proto)."""

from __future__ import annotations

import dataclasses
import math

from sundial.api.model import FlowLimitSpec
from sundial.api.validation._fields import _fail

MAX_FLOW_KEY = 200
"""Longest flow key (job.proto FlowPolicy, flow.proto FlowLimit.key), in characters."""

MAX_FLOW_RATE = 10_000.0
"""Largest FlowLimit.rate_per_second, calls a second."""

MAX_FLOW_BURST = 10_000
"""Largest FlowLimit.burst."""

MAX_FLOW_RUNNING = 100_000
"""Largest FlowLimit.max_running."""


def check_flow_key(key: str, field: str) -> None:
    """A flow key: 1-200 printable characters (a job's empty key is its caller's to
    allow: the default)."""
    if not key:
        raise _fail(field, "is required")
    if len(key) > MAX_FLOW_KEY or not key.isprintable():
        raise _fail(field, f"must be 1-{MAX_FLOW_KEY} printable characters")


def effective_burst(rate_per_second: float, burst: int) -> int:
    """The bucket size a limit runs with: ``burst``, else one second's worth of the
    rate (at least 1); 0 without a rate limit."""
    if not rate_per_second:
        return 0
    return burst or max(1, math.ceil(rate_per_second))


def check_flow_limit(spec: FlowLimitSpec, field: str = "limit") -> FlowLimitSpec:
    """A key's limits within flow.proto's ranges, with the effective burst.

    Raises:
        InvalidArgument: Naming the field (``limit.rate_per_second``...).
    """
    check_flow_key(spec.key, f"{field}.key")
    rate = spec.rate_per_second
    if not (math.isfinite(rate) and 0 <= rate <= MAX_FLOW_RATE):
        raise _fail(
            f"{field}.rate_per_second",
            f"must be 0 (no rate limit) to {MAX_FLOW_RATE:,.0f} calls a second, got {rate}",
        )
    if not 0 <= spec.burst <= MAX_FLOW_BURST:
        raise _fail(f"{field}.burst", f"must be 0 to {MAX_FLOW_BURST:,}, got {spec.burst}")
    if not 0 <= spec.max_running <= MAX_FLOW_RUNNING:
        raise _fail(
            f"{field}.max_running",
            f"must be 0 (no concurrency limit) to {MAX_FLOW_RUNNING:,}, got {spec.max_running}",
        )
    if not rate and not spec.max_running:
        raise _fail(
            f"{field}.rate_per_second",
            "set rate_per_second, max_running or both (a limit of neither limits nothing)",
        )
    if not rate and spec.burst:
        raise _fail(f"{field}.burst", "sizes the rate limit's bucket: set rate_per_second too")
    # + 0.0: a -0.0 from the wire is stored and shown as 0.
    return dataclasses.replace(
        spec, rate_per_second=rate + 0.0, burst=effective_burst(rate, spec.burst)
    )
