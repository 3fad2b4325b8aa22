"""Per-tenant API bounds on every JobService call: a token bucket (the rate), and a gate
on the calls executing at once (the share of the replica's database connections).

Each API replica keeps one bucket per tenant (``tenant_rate_per_s`` tokens a second, up
to ``tenant_rate_burst``); a call takes one token, and a call that finds none is refused
``RESOURCE_EXHAUSTED`` (reason ``RATE_LIMITED``) with a ``RetryInfo`` saying when a token
will be there, before its request is read. gRPC clients configured with
:data:`sundial.client.RETRY_SERVICE_CONFIG` (the Python client, the CLI) wait that long
and retry by themselves: the refusal carries ``grpc-retry-pushback-ms`` (see
:mod:`sundial.core.grpc`). The limit is per replica, so a tenant's share of the whole
API is the rate times the replicas its calls are balanced over; what it bounds is one
tenant's share of each replica (docs/design.md section 7, "Tenants and their limits").

The rate does not bound what calls cost: twelve concurrent PauseJobs of 5,000 jobs each
(legal, and far within the rate) held every connection of the replica's pool, and
another tenant's GetJob waited 1.2 s for one. :class:`TenantCallGate` lets a tenant's
calls execute ``calls`` at a time per replica; its further calls wait for its own (up
to :data:`MAX_WAITING_CALLS`, then ``RATE_LIMITED`` with a ``RetryInfo``), never for
another tenant's.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass

from sundial.core.clock import Clock
from sundial.core.errors import ResourceExhausted
from sundial.core.slots import TenantSlots

__all__ = ["MAX_BUCKETS", "MAX_WAITING_CALLS", "RateLimited", "TenantCallGate", "TenantRateLimiter"]

MAX_WAITING_CALLS = 100
"""Calls of one tenant waiting for its gate at most; further ones are refused at once."""

TOO_MANY_CALLS_RETRY_S = 1.0
"""The retry delay a call refused by a full gate is told."""

MAX_BUCKETS = 100_000
"""Tenants with a bucket in memory at once; the least recently used beyond it are
forgotten (a forgotten tenant starts again with a full bucket)."""


class RateLimited(ResourceExhausted):
    """A tenant's calls exceed its rate on this replica; retry after ``retry_delay_s``."""

    default_reason = "RATE_LIMITED"


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float


class TenantRateLimiter:
    """Token buckets by tenant id.

    Args:
        rate_per_s: Tokens added per second (calls a tenant may make per second, on
            average); 0 turns the limit off.
        burst: Most tokens a bucket holds (calls a quiet tenant may make at once).
        clock: Its monotonic time refills the buckets.
    """

    def __init__(self, rate_per_s: float, burst: int, clock: Clock) -> None:
        self._rate = rate_per_s
        self._burst = float(max(burst, 1))
        self._clock = clock
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()

    @property
    def enabled(self) -> bool:
        """Whether calls are limited at all."""
        return self._rate > 0

    def take(self, tenant_id: str) -> None:
        """Take one token of ``tenant_id``'s bucket.

        Raises:
            RateLimited: The bucket is empty; ``retry_delay_s`` says when a token will be.
        """
        if not self.enabled:
            return
        now = self._clock.monotonic()
        bucket = self._buckets.get(tenant_id)
        if bucket is None:
            bucket = self._buckets[tenant_id] = _Bucket(self._burst, now)
            if len(self._buckets) > MAX_BUCKETS:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(tenant_id)
            bucket.tokens = min(self._burst, bucket.tokens + (now - bucket.at) * self._rate)
            bucket.at = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return
        wait_s = (1.0 - bucket.tokens) / self._rate
        raise RateLimited(
            f"tenant {tenant_id} exceeds its API rate of {self._rate:g} calls/s"
            f" (burst {self._burst:g}) on this replica: retry in {wait_s:.2f}s",
            retry_delay_s=round(wait_s, 3),
            metadata={"rate_per_s": f"{self._rate:g}", "burst": f"{self._burst:g}"},
        )


class TenantCallGate:
    """At most ``calls`` calls of one tenant executing at once (0: no gate), and at most
    ``waiting`` more waiting for them.

    Args:
        calls: Calls of one tenant executing at once.
        waiting: Calls of one tenant waiting at most; further ones are refused.
    """

    def __init__(self, calls: int, waiting: int = MAX_WAITING_CALLS) -> None:
        self.calls = calls
        self.waiting = waiting
        self._slots = TenantSlots(max(calls, 1))

    @property
    def enabled(self) -> bool:
        """Whether calls are gated at all."""
        return self.calls > 0

    def users(self, tenant_id: str) -> int:
        """The tenant's calls executing and waiting now."""
        return self._slots.users(tenant_id)

    @contextlib.asynccontextmanager
    async def slot(self, tenant_id: str) -> AsyncIterator[None]:
        """Hold one of ``tenant_id``'s slots while the block runs (waiting for one first).

        Raises:
            RateLimited: ``calls`` of the tenant execute and ``waiting`` more wait already.
        """
        if self._slots.users(tenant_id) >= self.calls + self.waiting:
            raise RateLimited(
                f"tenant {tenant_id} has {self.calls} calls executing and {self.waiting}"
                f" waiting on this replica: retry in {TOO_MANY_CALLS_RETRY_S:g}s",
                retry_delay_s=TOO_MANY_CALLS_RETRY_S,
                metadata={"concurrent_calls": str(self.calls)},
            )
        async with self._slots.slot(tenant_id):
            yield
