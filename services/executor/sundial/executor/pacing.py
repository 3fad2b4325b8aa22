"""Pacing: a busy tenant's call starts slowed while the executor's event loop lags.

An executor's processes are shared by every tenant whose runs it fetches. A tenant's herd
keeps them busy, and every other tenant's run then waits in the same event loop behind
the herd's callbacks (its fetch, LeaseRuns, call and report each a few of them), and on
a busy host for a core as well: asyncio has no priority between callbacks, so the order
of slots (:class:`~sundial.executor.inflight.InFlight`) cannot give the quiet tenant
back the time its callbacks wait (docs/design.md section 7, "Flow control").

So the executor measures how late its own loop wakes (a timer every
:data:`SAMPLE_S`) and, every :data:`WINDOW_S`, decides as an adaptive concurrency limit
does (AIMD, like TCP's congestion window). While the loop's mean lateness over the
window is above ``lag_s`` (``SUNDIAL_PACE_LAG_MS``) and at least two tenants started
calls in the last :data:`ACTIVE_S`, the busiest tenants are *paced*: those that started
more than :data:`OVER` times the calls (for its weight) of every less busy one (the
first such step from the busiest down; with none, the busiest alone when it started
more than OVER times the least busy). A paced tenant may start at
most ``rate`` calls a second, its tokens coming a chunk (:data:`CHUNK_S` of the rate)
at a time so that its runs still lease in batches. The rate starts at half what the
tenant started lately and halves again each window the lag stays above the bound, down
to :data:`MIN_RATE`; within the bound it grows by :data:`INCREASE` a window, and pacing
ends once the rate is twice what the paced tenant started lately (it no longer binds)
or no other tenant is active. A tenant alone is never paced, nor tenants sharing the
executor about as their weights say. What the executor gives up is the busy tenant's
throughput while a quiet one has runs, which is what keeps the quiet tenant's runs as
early as they are alone (``bench/bench_isolation.py``'s herd phase).

:class:`InFlight` asks :meth:`Pacer.allows` before it gives a tenant a slot and tells
:meth:`Pacer.started` after; the executor runs :meth:`Pacer.run` as a lifecycle
component (the loop's samples and the windows).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import Counter, deque
from collections.abc import Callable

from opentelemetry import metrics

from sundial.core.telemetry import EXECUTOR_LOOP_LAG, EXECUTOR_PACED_TENANTS

__all__ = [
    "ACTIVE_S",
    "CHUNK_S",
    "DECREASE",
    "INCREASE",
    "MIN_RATE",
    "OVER",
    "SAMPLE_S",
    "WINDOW_S",
    "Pacer",
]

log = logging.getLogger(__name__)

SAMPLE_S = 0.01
"""How often the loop's lateness is sampled (a sleep of this long, timed)."""

WINDOW_S = 0.1
"""How often the rate is decided, on the mean lateness of the samples since the last."""

ACTIVE_S = 2.0
"""A tenant counts as active while it started a call within this long; the shares are
its starts over the same span."""

DECREASE = 0.5
"""The rate's factor per window the loop lags beyond the bound."""

INCREASE = 1.02
"""The rate's factor per window the loop keeps within the bound (about 1.2x a second)."""

OVER = 2.0
"""A tenant is paced when it started more than this many times the calls (for its
weight) of the least busy active tenant: tenants sharing the executor about as their
weights say are left to the slots' order (:class:`InFlight`)."""

CHUNK_S = 0.05
"""A paced tenant's tokens come this long's worth at a time (one LeaseRuns)."""

MIN_RATE = 100.0
"""Calls a second a paced tenant may always start (its window of 128 runs, by default,
in about a second)."""


class Pacer:
    """Decides which tenants' call starts are paced, and how fast they may start.

    Args:
        lag_s: The loop's mean lateness per window above which busy tenants are slowed
            (``SUNDIAL_PACE_LAG_MS``); 0 turns pacing off.
        on_tokens: Called when a paced tenant got tokens (a waiting run of it may take
            a slot now); :class:`InFlight` sets it.
        meter: Where the ``sundial.executor.loop_lag`` and
            ``sundial.executor.paced_tenants`` gauges go (default: global).
    """

    name = "pacer"

    def __init__(
        self,
        lag_s: float,
        *,
        on_tokens: Callable[[], None] | None = None,
        meter: metrics.Meter | None = None,
    ) -> None:
        self.lag_s = lag_s
        self.on_tokens = on_tokens
        self.last_lag_s = 0.0
        """The loop's mean lateness over the last window."""
        self.rate: float | None = None
        """Starts a second each paced tenant may make; None while nobody is paced."""
        self.paced: frozenset[str] = frozenset()
        self._weights: dict[str, int] = {}
        self._window: Counter[str] = Counter()
        """Starts per tenant in the current window."""
        self._recent: deque[Counter[str]] = deque(maxlen=round(ACTIVE_S / WINDOW_S))
        """Starts per tenant in each of the last windows (:data:`ACTIVE_S` of them)."""
        self._tokens: dict[str, int] = {}
        """Per paced tenant: the calls it may start now."""
        self._credit: dict[str, float] = {}
        """Per paced tenant: credit not yet a chunk of tokens."""
        self._lags: list[float] = []
        self._stop = asyncio.Event()
        meter = meter or metrics.get_meter("sundial.executor")
        meter.create_observable_gauge(
            EXECUTOR_LOOP_LAG,
            callbacks=[lambda _options: [metrics.Observation(self.last_lag_s)]],
            unit="s",
            description="How late the event loop woke, on average over the last 0.1 s"
            " (sampled while SUNDIAL_PACE_LAG_MS is on)",
        )
        meter.create_observable_gauge(
            EXECUTOR_PACED_TENANTS,
            callbacks=[lambda _options: [metrics.Observation(len(self.paced))]],
            unit="{tenant}",
            description="Tenants whose call starts are paced now (a herd beside other"
            " tenants' runs while the event loop lags)",
        )

    # --- what InFlight asks ------------------------------------------------------------

    def allows(self, tenant: str) -> int:
        """How many calls ``tenant`` may start now (a large number when not paced)."""
        if tenant not in self.paced:
            return 1 << 30
        return self._tokens.get(tenant, 0)

    def started(self, tenant: str, count: int = 1, weight: int = 1) -> None:
        """``tenant`` (of fair-sharing ``weight``) was given ``count`` call slots."""
        self._window[tenant] += count
        self._weights[tenant] = weight
        if tenant in self.paced:
            self._tokens[tenant] = max(0, self._tokens.get(tenant, 0) - count)

    def accrue(self, elapsed_s: float) -> bool:
        """Credit each paced tenant ``elapsed_s`` of its rate; a whole chunk of credit
        (:data:`CHUNK_S` of the rate) becomes tokens at once, so a paced tenant's runs
        are leased a chunk per LeaseRuns, not one run per call. True when a tenant got
        tokens."""
        if self.rate is None:
            return False
        chunk = max(1.0, self.rate * CHUNK_S)
        gained = False
        for tenant in self.paced:
            credit = self._credit.get(tenant, 0.0) + elapsed_s * self.rate
            if credit >= chunk:
                whole = int(credit)
                self._tokens[tenant] = min(self._tokens.get(tenant, 0) + whole, 2 * int(chunk))
                credit -= whole
                gained = True
            self._credit[tenant] = credit
        return gained

    # --- the windows -------------------------------------------------------------------

    def window(self, lag_s: float) -> None:
        """Close a window whose loop lateness was ``lag_s`` (mean): decide who is paced
        and how fast for the next."""
        before = self.paced
        self._decide(lag_s)
        if self.paced != before:
            if self.paced:
                log.info(
                    "pacing the call starts of %s at %.0f a second: the event loop is"
                    " %.1f ms late while other tenants have runs",
                    ", ".join(sorted(self.paced)),
                    self.rate or 0.0,
                    lag_s * 1000,
                    extra={"action": "pace.start", "tenants": sorted(self.paced)},
                )
            else:
                log.info("pacing ended", extra={"action": "pace.end", "tenants": sorted(before)})

    def _decide(self, lag_s: float) -> None:
        self.last_lag_s = lag_s
        self._recent.append(self._window)
        self._window = Counter()
        starts: Counter[str] = Counter()
        for counts in self._recent:
            starts.update(counts)
        if len(starts) < 2:
            self._unpace()  # a tenant alone (or none): nobody to protect
            return
        weights = {t: max(self._weights.get(t, 1), 1) for t in starts}
        self._weights = weights  # a tenant idle for ACTIVE_S is forgotten
        over = _busiest({t: n / weights[t] for t, n in starts.items()})
        if not over:
            self._unpace()  # sharing about as their weights say: the slots' order decides
            return
        busiest = max(starts[t] for t in over) / (len(self._recent) * WINDOW_S)
        if lag_s > self.lag_s:
            base = self.rate if self.rate is not None else busiest
            self.rate = max(MIN_RATE, base * DECREASE)
        elif self.rate is not None:
            self.rate *= INCREASE
            if self.rate > 2 * busiest:
                self._unpace()  # the limit no longer binds
                return
        else:
            return
        for tenant in self.paced - over:
            self._tokens.pop(tenant, None)
            self._credit.pop(tenant, None)
        self.paced = over

    def _unpace(self) -> None:
        self.rate = None
        self.paced = frozenset()
        self._tokens.clear()
        self._credit.clear()

    # --- the component -----------------------------------------------------------------

    async def run(self, started: Callable[[], None]) -> None:
        """Sample the loop's lateness every :data:`SAMPLE_S` and close a window every
        :data:`WINDOW_S`, until stopped."""
        loop = asyncio.get_running_loop()
        started()
        if self.lag_s <= 0:
            await self._stop.wait()
            return
        window_end = loop.time() + WINDOW_S
        while not self._stop.is_set():
            before = loop.time()
            await asyncio.sleep(SAMPLE_S)
            now = loop.time()
            self._lags.append(max(0.0, now - before - SAMPLE_S))
            if now >= window_end:
                self.window(sum(self._lags) / len(self._lags))
                self._lags.clear()
                window_end = now + WINDOW_S
            if self.accrue(now - before) and self.on_tokens is not None:
                self.on_tokens()

    async def stop(self) -> None:
        self._stop.set()


def _busiest(shares: dict[str, float]) -> frozenset[str]:
    """The tenants to pace, given each active tenant's starts for its weight: those
    above the first step of more than :data:`OVER` between neighbours, from the busiest
    down (a herd, or herds); with no such step, the busiest alone when it started more
    than OVER times the least busy. Every tenant more than OVER times the least busy
    was paced before: beside a tenant starting a call a second, a quiet tenant's 20 a
    second counted as busy and was paced at the herd's rate, its 20 runs due at once
    leased 10, 5 and 5 over 70 ms (docs/design.md section 7, "Flow control")."""
    ranked = sorted(shares.items(), key=lambda item: item[1], reverse=True)
    over: set[str] = set()
    for (tenant, share), (_, below) in itertools.pairwise(ranked):
        over.add(tenant)
        if share > OVER * below:
            return frozenset(over)
    tenant, top = ranked[0]
    return frozenset({tenant}) if top > OVER * ranked[-1][1] else frozenset()
