"""Forgets idempotency records older than their retention (a lifecycle component).

Correctness does not depend on it: lookups ignore expired records and a new request
takes over an expired key. It only keeps ``job_requests`` from growing forever. Every
API replica runs it; the deletes are small batches, so replicas overlapping is harmless.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import timedelta

from sundial.api.store import Store
from sundial.core.clock import Clock
from sundial.core.errors import SundialError

log = logging.getLogger(__name__)

_BATCH = 5000


class RequestPurger:
    """Deletes expired ``job_requests`` rows every ``interval_s``.

    Args:
        store: Database access.
        clock: The source of "now".
        retention: Age after which a record is expired.
        interval_s: Seconds between purges.
    """

    name = "request-purger"

    def __init__(
        self, store: Store, clock: Clock, *, retention: timedelta, interval_s: float
    ) -> None:
        self._store = store
        self._clock = clock
        self._retention = retention
        self._interval_s = interval_s
        self._stop = asyncio.Event()

    async def purge_once(self) -> int:
        """Delete every expired record now, in batches; returns how many."""
        total = 0
        while not self._stop.is_set():
            deleted = await self._store.purge_requests(self._clock.now() - self._retention, _BATCH)
            total += deleted
            if deleted < _BATCH:
                break
        return total

    async def run(self, started: Callable[[], None]) -> None:
        """Purge periodically until :meth:`stop`."""
        started()
        while not self._stop.is_set():
            try:
                deleted = await self.purge_once()
                if deleted:
                    log.info(
                        "purged %d expired request ids",
                        deleted,
                        extra={"action": "purge_requests", "deleted": deleted},
                    )
            except SundialError as exc:  # the database may be briefly away: try next time
                log.warning(
                    "purging request ids failed: %s", exc, extra={"action": "purge_requests"}
                )
            except Exception:
                # Housekeeping must never take the API down: log it and try next time.
                log.exception("purging request ids failed", extra={"action": "purge_requests"})
            try:
                async with asyncio.timeout(self._interval_s):
                    await self._stop.wait()
            except TimeoutError:
                pass

    async def stop(self) -> None:
        """Stop after the current batch; idempotent."""
        self._stop.set()
