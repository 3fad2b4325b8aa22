"""The sweeper: acts on owned runs whose ``check_at`` passed (DESIGN.md sections 5-6).

One index, ``(partition_id, check_at) WHERE status IN (queued, running, retrying)``,
serves every sweep: unconfirmed or never-leased publishes are republished under a new
dispatch sequence, expired leases make their run leasable again (and republish it),
retries that are due are published, and buffered runs whose blocker ended are released.
Dead runs are an outbox of their own (``(partition_id, check_at) WHERE status = 'dead'
AND check_at IS NOT NULL``): each pass publishes the due DeadLetters and clears
``check_at`` once JetStream acknowledged them, so a crash or a NATS outage after a run
died delays its letter, never loses it.
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
from sundial.scheduler.publisher import RunPublisher, publish_due_dead_letters
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
                busy = self._config.batch_size <= max(
                    sum(len(b.runs) for b in outcome.batches), len(outcome.dead_letters)
                )
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
        # The republished batches and the dead-letter outbox go out together, each
        # publish bounded by a timeout, so a NATS outage stalls a pass by one timeout.
        acked, letters = await asyncio.gather(
            self._publisher.publish_all(outcome.batches, now),
            publish_due_dead_letters(
                self._publisher.jetstream,
                outcome.dead_letters,
                now,
                timeout_s=self._publisher.timeout_s,
            ),
        )
        if acked:
            await self._store.confirm_published(
                acked, now + timedelta(seconds=self._config.unleased_republish_s)
            )
            log.info(
                "republished %d runs",
                sum(len(b.runs) for b in acked),
                extra={"action": "sweep", "runs": sum(len(b.runs) for b in acked)},
            )
        if letters:
            await self._store.clear_dead_letters(letters)
        return outcome
