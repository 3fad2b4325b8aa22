"""Admission: which due runs are published now and which wait their turn (pure).

Fair sharing, rate limits and priority are decided here, on the scheduler side, before
a run enters the shared SUNDIAL_RUNS stream (docs/design.md section 7, "Flow control"):

- **Window.** A tenant has at most ``window * weight`` runs in flight in the stream
  (published and not yet leased). The executors consume the stream in order, so another
  tenant's newly due run waits behind at most that many runs of a busy tenant, however
  large its backlog; with every tenant backlogged, each one's throughput is in
  proportion to its window (Little's law: the same time in the system for every run).
- **Priority.** A tenant's runs are admitted in priority order (1 first), then oldest
  due first, both at dispatch and from the waiting list.
- **Rate limits.** A run whose rate-limit key has a rate limit, or is blocked by a
  target's Retry-After, always waits and is admitted by the sweeper as the key's token
  bucket allows (shared by every scheduler: it lives in ``flow_limits``).

A due retry is admitted as a newly due run is, by the sweep that finds it due.

Runs that wait keep their row (``queued``, not published: a retry's earlier attempt was)
and get a ``run_waits`` row; nothing here fails or drops a run.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypeVar
from urllib.parse import urlsplit

from sundial.run import GrpcTarget, HttpTarget, Target
from sundial.scheduler.model import PlannedRun

T = TypeVar("T")

__all__ = [
    "KeyBucket",
    "TenantFlow",
    "admit_at_dispatch",
    "interleave",
    "origin_of",
    "take_tokens",
]


@dataclass(frozen=True, slots=True)
class KeyBucket:
    """A rate-limit key's token bucket (``flow_limits``) as read under the tenant's
    admission lock."""

    rate_per_s: float
    burst: int
    tokens: float
    refilled_at: datetime
    blocked_until: datetime | None = None

    @property
    def size(self) -> float:
        """The bucket's capacity: ``burst``, or one second's worth (at least 1)."""
        return float(self.burst) if self.burst > 0 else max(1.0, math.ceil(self.rate_per_s))

    def available(self, now: datetime) -> float:
        """Calls the key may start at ``now``: none while blocked, unbounded without a
        rate (only a Retry-After block holds such a key)."""
        if self.blocked_until is not None and self.blocked_until > now:
            return 0.0
        if self.rate_per_s <= 0:
            return math.inf
        elapsed = max(0.0, (now - self.refilled_at).total_seconds())
        return min(self.size, self.tokens + elapsed * self.rate_per_s)

    def holds(self, now: datetime) -> bool:
        """Whether the key's runs go through the waiting list at all."""
        return self.rate_per_s > 0 or (self.blocked_until is not None and self.blocked_until > now)


@dataclass(frozen=True, slots=True)
class TenantFlow:
    """One tenant's admission state, read under its admission lock."""

    window: int
    """Its window: the scheduler's ``tenant_window`` times its weight."""
    in_flight: int
    """Its runs published and not yet leased (in the stream or an executor's hands)."""
    waiting: bool = False
    """It has runs in the waiting list already (new ones queue behind them, in
    priority order)."""
    keys: Mapping[str, KeyBucket] = field(default_factory=dict)
    """Its rate-limit keys that have a limit or a block."""
    weight: int = 1
    """Its weight in fair sharing (executors share their call slots by it too)."""

    @property
    def free(self) -> int:
        """Runs the window takes now."""
        return max(0, self.window - self.in_flight)

    def held_keys(self, now: datetime) -> frozenset[str]:
        """Keys whose runs must wait for the sweeper's token bucket."""
        return frozenset(key for key, bucket in self.keys.items() if bucket.holds(now))


def origin_of(target: Target | None) -> str:
    """The default rate-limit key of a target: an HTTP URL's scheme, host and port
    (``https://crm.example.com:443``), a gRPC target's address."""
    if isinstance(target, HttpTarget):
        try:
            parts = urlsplit(target.url)
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            return target.url
        return f"{parts.scheme}://{(parts.hostname or '').lower()}:{port}"
    if isinstance(target, GrpcTarget):
        return target.address
    return ""


def admit_at_dispatch(
    runs: Sequence[PlannedRun], flows: Mapping[str, TenantFlow], now: datetime
) -> dict[PlannedRun, bool]:
    """The runs of ``runs`` (QUEUED and due now) that must wait instead of being
    published, each with whether its rate-limit key holds it (it is *throttled*: late
    by the tenant's own limits, not by Sundial): per tenant, in priority then due order,
    every one under a held key, those past the window's free room, and every one of a
    tenant that already has waiting runs (they are admitted in priority order with
    those). A tenant absent from ``flows`` is not limited."""
    by_tenant: dict[str, list[PlannedRun]] = defaultdict(list)
    for run in runs:
        by_tenant[run.tenant_id].append(run)
    wait: dict[PlannedRun, bool] = {}
    for tenant, mine in by_tenant.items():
        flow = flows.get(tenant)
        if flow is None:
            continue
        held = flow.held_keys(now)
        free = 0 if flow.waiting else flow.free
        for run in sorted(mine, key=lambda r: (r.priority, r.due_at)):
            if run.rate_key in held:
                wait[run] = True
            elif free <= 0:
                wait[run] = False
            else:
                free -= 1
    return wait


def take_tokens(bucket: KeyBucket, wanted: int, now: datetime) -> tuple[int, float]:
    """How many of ``wanted`` runs a key's bucket lets start at ``now``, and the tokens
    left after them (to store with ``refilled_at = now``)."""
    available = bucket.available(now)
    if math.isinf(available):
        return wanted, bucket.tokens
    taken = min(wanted, int(available))
    return taken, available - taken


def interleave(groups: Sequence[Sequence[T]]) -> list[T]:
    """The items of ``groups`` as one list, each group spread evenly over it and kept
    in its own order: the ``i``-th of a group of ``n`` stands at about ``(i + 0.5) / n``
    of the list (ties: the earlier group first).

    The order of the runs one admission pass publishes in one message, a group per
    tenant: an executor with fewer free slots than the message has runs leases them
    from its head, so a tenant whose runs came first would get its runs started first
    in every pass and, its runs spending less time in flight, more than its weight's
    share (measured with weights 1 and 3 and the tenants' runs one after the other:
    the weight 3 tenant's share was 0.80 when its id sorted first, 0.71 when it did
    not).
    """
    placed = [
        ((i + 0.5) / len(group), g, item)
        for g, group in enumerate(groups)
        for i, item in enumerate(group)
    ]
    placed.sort(key=lambda p: (p[0], p[1]))
    return [item for _, _, item in placed]
