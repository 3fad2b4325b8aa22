"""Run-history partitions: daily ``job_runs`` partitions ahead, old ones dropped.

One maintainer at a time: the owner of partition 0 runs the pass (and the SQL functions
serialise on an advisory lock anyway, so an overlap during a hand-over is harmless).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection

from sundial.core.clock import Clock, SystemClock
from sundial.core.loop import PassLoop
from sundial.scheduler.config import SchedulerConfig
from sundial.scheduler.store import TRANSIENT_ERRORS, SchedulerStore

log = logging.getLogger(__name__)

MAINTAINER_PARTITION = 0


class Maintenance(PassLoop):
    """Lifecycle component creating and dropping daily run partitions.

    Args:
        store: The scheduler store.
        owned: Returns the partitions this scheduler owns now.
        config: ``partitions_ahead_days``, ``retention_days``, ``maintenance_interval_s``.
        clock: The source of "now".
    """

    name = "maintenance"
    transient = TRANSIENT_ERRORS

    def __init__(
        self,
        store: SchedulerStore,
        owned: Callable[[], Collection[int]],
        config: SchedulerConfig,
        clock: Clock | None = None,
    ) -> None:
        super().__init__()
        self._store = store
        self._owned = owned
        self._config = config
        self._clock = clock or SystemClock()

    @property
    def error_wait_s(self) -> float:
        """A failed pass is retried after the usual wait."""
        return self._config.maintenance_interval_s

    async def pass_once(self) -> float:
        """One pass; the wait before the next (0 when the pass was full)."""
        if MAINTAINER_PARTITION not in self._owned():
            return min(self._config.maintenance_interval_s, 5.0)  # maybe we own it soon
        await self.maintain_once()
        return self._config.maintenance_interval_s

    async def maintain_once(self) -> tuple[list[str], list[str]]:
        """Create the partitions ahead and drop those past retention; returns the names."""
        today = self._clock.now().date()
        created, dropped = await self._store.maintain_partitions(
            today, self._config.partitions_ahead_days, self._config.retention_days
        )
        if created or dropped:
            log.info(
                "run partitions: created %d, dropped %d",
                len(created),
                len(dropped),
                extra={
                    "action": "maintenance",
                    "partitions_created": created,
                    "partitions_dropped": dropped,
                },
            )
        return created, dropped
