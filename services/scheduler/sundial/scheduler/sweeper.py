"""The sweeper: acts on owned runs whose ``check_at`` passed (DESIGN.md sections 5-6).

One index, ``(partition_id, check_at) WHERE status IN (queued, running, retrying)``,
serves every sweep: unconfirmed or never-leased publishes are republished under a new
dispatch sequence, expired leases make their run leasable again (and republish it),
retries that are due are published, and buffered runs whose blocker ended are released.
The transitions are in :meth:`SchedulerStore.sweep`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Collection
from datetime import timedelta

from sundial.core.clock import Clock, SystemClock
from sundial.scheduler.config import SchedulerConfig
from sundial.scheduler.publisher import RunPublisher, publish_dead_letter
from sundial.scheduler.store import TRANSIENT_ERRORS, SchedulerStore, SweepOutcome

log = logging.getLogger(__name__)


class Sweeper:
    """Lifecycle component running the sweep loop.

    Args:
        store: The scheduler store.
        publisher: Sends the republished batches.
        owned: Returns the partitions this scheduler may act on now.
        config: ``sweep_interval_s``, ``batch_size``, ``publish_confirm_s``,
            ``unleased_republish_s``.
        clock: The source of "now".
    """

    name = "sweeper"

    def __init__(
        self,
        store: SchedulerStore,
        publisher: RunPublisher,
        owned: Callable[[], Collection[int]],
        config: SchedulerConfig,
        clock: Clock | None = None,
    ) -> None:
        self._store = store
        self._publisher = publisher
        self._owned = owned
        self._config = config
        self._clock = clock or SystemClock()
        self._stopping = asyncio.Event()

    async def run(self, started: Callable[[], None]) -> None:
        """Sweep until stopped."""
        started()
        while not self._stopping.is_set():
            busy = False
            try:
                outcome = await self.sweep_once()
                busy = sum(len(b.runs) for b in outcome.batches) >= self._config.batch_size
            except TRANSIENT_ERRORS as exc:
                log.warning("sweep failed: %s", exc, extra={"action": "sweep"})
            if not busy:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._config.sweep_interval_s):
                        await self._stopping.wait()

    async def stop(self) -> None:
        """Make ``run`` return after the current pass."""
        self._stopping.set()

    async def sweep_once(self) -> SweepOutcome:
        """One pass: release buffered runs, act on due checks, publish, confirm."""
        owned = sorted(self._owned())
        if not owned:
            return SweepOutcome([], 0, 0)
        now = self._clock.now()
        outcome = await self._store.sweep(
            owned,
            self._config.batch_size,
            now,
            confirm_until=now + timedelta(seconds=self._config.publish_confirm_s),
        )
        for row in outcome.dead:
            await publish_dead_letter(
                self._publisher.jetstream,
                row,
                attempt=row["attempt"],
                last_error=row["last_error"] or "",
                error_class="lease_expired",
                now=now,
            )
        if outcome.batches:
            acked = await self._publisher.publish_all(outcome.batches, now)
            if acked:
                await self._store.confirm_published(
                    acked, now + timedelta(seconds=self._config.unleased_republish_s)
                )
            log.info(
                "republished %d runs",
                sum(len(b.runs) for b in acked),
                extra={"action": "sweep", "runs": sum(len(b.runs) for b in acked)},
            )
        return outcome
