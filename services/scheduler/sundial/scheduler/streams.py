"""Keeps SUNDIAL_RUNS and SUNDIAL_DEAD in existence (docs/design.md section 6, "A lost
stream").

A stream can go away under running services: deleted by an operator, or NATS restarted
without its store. Then every publish fails (no stream answers the subject) and
executors fetch from a consumer that went with it. The keeper recreates both streams
(idempotently: a scheduler that finds one present changes nothing) when a publish fails
that way (:meth:`StreamKeeper.after_failure`, called by the publisher, which then
publishes once more) and every ``stream_check_s`` seconds in its own loop, so an
idle cluster or a lost SUNDIAL_DEAD is noticed too.

Runs whose messages went with the stream are restored by the sweeper: when the keeper
sees a new incarnation of SUNDIAL_RUNS (its creation time changed, or it created it),
the published runs of this scheduler's partitions still waiting unleased become due for
republishing at once instead of ``unleased_republish_s`` after their publish.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection
from datetime import datetime
from typing import ClassVar

from nats.errors import Error as NatsError
from nats.errors import NoRespondersError
from nats.js import JetStreamContext
from nats.js.errors import NoStreamResponseError, NotFoundError, ServiceUnavailableError
from opentelemetry import metrics

from sundial.core.bus import DEAD_LETTERS_PER_TENANT, RUNS_STREAM, stream_configs
from sundial.core.clock import Clock, SystemClock
from sundial.core.loop import PassLoop
from sundial.core.telemetry import STREAM_MESSAGES
from sundial.scheduler.store import TRANSIENT_ERRORS, SchedulerStore

__all__ = ["StreamKeeper", "stream_missing"]

log = logging.getLogger(__name__)

_MISSING = (NoStreamResponseError, NoRespondersError, ServiceUnavailableError, NotFoundError)


def stream_missing(exc: BaseException) -> bool:
    """Whether a publish error may mean the stream is gone (nothing answered the subject,
    or JetStream said no such stream); also what a JetStream still electing a leader
    answers, which a check costs nothing to tell apart."""
    return isinstance(exc, _MISSING)


class StreamKeeper(PassLoop):
    """Lifecycle component recreating lost streams.

    Args:
        jetstream: The scheduler's JetStream context (its user may create the streams).
        store: Where the runs of a lost stream are made due for republishing.
        owned: The partitions this scheduler acts on now.
        check_interval_s: Seconds between checks.
        replicas: The streams' replica count when it creates them.
        dead_letters_per_tenant: SUNDIAL_DEAD's limit per tenant when it creates it.
        clock: The source of "now" for the republish.
        meter: Where the ``sundial.stream.messages`` gauge goes (default: global).
    """

    name = "streams"
    transient: ClassVar[tuple[type[BaseException], ...]] = (
        NatsError,
        TimeoutError,
        *TRANSIENT_ERRORS,
    )

    def __init__(
        self,
        jetstream: JetStreamContext,
        store: SchedulerStore,
        owned: Callable[[], Collection[int]],
        *,
        check_interval_s: float = 5.0,
        replicas: int = 1,
        dead_letters_per_tenant: int = DEAD_LETTERS_PER_TENANT,
        clock: Clock | None = None,
        meter: metrics.Meter | None = None,
    ) -> None:
        super().__init__()
        self._js = jetstream
        self._store = store
        self._owned = owned
        self._interval_s = check_interval_s
        self._replicas = replicas
        self._dead_letters_per_tenant = dead_letters_per_tenant
        self._clock = clock or SystemClock()
        self._lock = asyncio.Lock()
        self._checked_at = float("-inf")  # monotonic end of the last completed check
        self._runs_created: datetime | None = None  # SUNDIAL_RUNS's incarnation last seen
        self._republish_owed = False
        self.recreated = 0
        """Streams this keeper created (for tests)."""
        self._messages: dict[str, int] = {}  # by stream, as of the last check
        (meter or metrics.get_meter("sundial.scheduler")).create_observable_gauge(
            STREAM_MESSAGES,
            callbacks=[
                lambda _options: [
                    metrics.Observation(count, {"stream": name})
                    for name, count in self._messages.items()
                ]
            ],
            unit="{message}",
            description="Messages in each stream (SUNDIAL_RUNS: not yet acknowledged)",
        )

    @property
    def error_wait_s(self) -> float:
        """A failed check (NATS or the database unreachable) is retried after the usual wait."""
        return self._interval_s

    async def pass_once(self) -> float:
        """One check; the wait before the next."""
        await self.check()
        return self._interval_s

    async def after_failure(self, failed_at: float) -> bool:
        """Check the streams after a publish failed at ``failed_at`` (``time.monotonic``);
        concurrent failures share one check.

        Returns:
            True when a check ran after the failure and completed (publishing again may
            succeed now), False when it could not (NATS unreachable).
        """
        try:
            await self.check(unless_since=failed_at)
        except self.transient as exc:
            log.warning("stream check failed: %s", exc, extra={"action": "bus.stream"})
            return False
        return True

    async def check(self, *, unless_since: float | None = None) -> None:
        """Create whichever stream is missing; republish what a lost SUNDIAL_RUNS held.

        Args:
            unless_since: Skip the check if one completed after this monotonic time.
        """
        async with self._lock:
            if unless_since is not None and self._checked_at >= unless_since:
                return
            configs = stream_configs(
                self._replicas, dead_letters_per_tenant=self._dead_letters_per_tenant
            )
            for name, config in configs.items():
                created = False
                try:
                    info = await self._js.stream_info(name)
                except NotFoundError:
                    # Another scheduler creating it at the same moment is fine: adding a
                    # stream that exists with the same configuration is a no-op.
                    info = await self._js.add_stream(config)
                    created = True
                    self.recreated += 1
                    log.warning(
                        "stream %s was missing; created it again",
                        name,
                        extra={"action": "bus.stream_recreated", "stream": name},
                    )
                self._messages[name] = info.state.messages
                if name == RUNS_STREAM:
                    seen, self._runs_created = self._runs_created, info.created
                    if created or (seen is not None and seen != info.created):
                        self._republish_owed = True
            if self._republish_owed:
                await self._republish()
            self._checked_at = time.monotonic()

    async def _republish(self) -> None:
        owned = sorted(self._owned())
        count = await self._store.republish_queued(owned, self._clock.now())
        # Cleared only once written: a failed write is retried by the next check.
        self._republish_owed = False
        log.warning(
            "%s is a new stream: %d unleased runs due for republishing",
            RUNS_STREAM,
            count,
            extra={"action": "bus.stream_republish", "runs": count},
        )
