"""Per-tenant, per-target circuit breaker: a target that keeps failing is not hammered.

A breaker is keyed by (tenant, target origin): one tenant's failing calls never hold
back another tenant's calls to the same origin (two tenants' jobs at one host can be
different services behind one gateway, or one tenant's path may time out while another's
answers). After ``failures`` consecutive retryable failures (connection errors,
timeouts, 5xx, 429...) the breaker of that key opens: for ``open_s`` seconds no call is
made and each attempt is reported FAILED_RETRYABLE at once, with the remaining open time
as retry_after. The ledger's retry policy still decides when (and whether) a run is
tried again; the breaker only spares the target the calls. After the open period ONE
call is let through (half-open): success closes the breaker, failure opens it again.
While that probe is in flight the breaker counts as open for another ``open_s`` from the
probe's start, and held attempts report what is left of that as retry_after: a probe can
take as long as the run timeout, and a short wait would only burn the runs' attempts
(each held attempt is a failed one) before the probe has an answer.

A final failure (a 4xx) counts as an answer, not as trouble: the target is up.
"""

from __future__ import annotations

from dataclasses import dataclass

from sundial.core.clock import Clock, SystemClock

__all__ = ["BreakerKey", "CircuitBreaker"]

BreakerKey = tuple[str, str]
"""(tenant id, target origin: ``scheme://host:port`` or ``grpc://address``)."""

# While the half-open probe is in flight, other calls wait at least this long.
_PROBE_WAIT_S = 1.0


@dataclass
class _State:
    failures: int = 0
    open_until: float = 0.0
    probing: bool = False
    probe_open_until: float = 0.0  # held attempts wait until here while probing


class CircuitBreaker:
    """Consecutive-failure breakers keyed by :data:`BreakerKey` (tenant, target origin).

    Args:
        failures: Consecutive retryable failures that open a target's breaker.
        open_s: Seconds an open breaker holds calls back.
        clock: Its monotonic time measures the open periods.
    """

    def __init__(self, *, failures: int, open_s: float, clock: Clock | None = None) -> None:
        self._threshold = failures
        self._open_s = open_s
        self._clock = clock or SystemClock()
        self._states: dict[BreakerKey, _State] = {}

    def acquire(self, key: BreakerKey) -> float | None:
        """Ask to call target ``key``.

        Returns:
            None when the call may go ahead (the caller must then call :meth:`record` or
            :meth:`release`), else the seconds the breaker stays open.
        """
        state = self._states.get(key)
        if state is None or state.failures < self._threshold:
            return None
        now = self._clock.monotonic()
        if now < state.open_until:
            return state.open_until - now
        if state.probing:
            return max(state.probe_open_until - now, _PROBE_WAIT_S)
        state.probing = True  # half-open: this call is the probe
        state.probe_open_until = now + self._open_s
        return None

    def record(self, key: BreakerKey, *, failed: bool) -> None:
        """Record the result of a call allowed by :meth:`acquire`."""
        if not failed:
            self._states.pop(key, None)  # closed breakers hold no memory
            return
        state = self._states.setdefault(key, _State())
        state.failures += 1
        state.probing = False
        if state.failures >= self._threshold:
            state.open_until = self._clock.monotonic() + self._open_s

    def release(self, key: BreakerKey) -> None:
        """Forget a call allowed by :meth:`acquire` that ended without a result (cancelled)."""
        state = self._states.get(key)
        if state is not None:
            state.probing = False

    def is_open(self, key: BreakerKey) -> bool:
        """True while calls to ``key`` are held back."""
        state = self._states.get(key)
        return state is not None and state.failures >= self._threshold
