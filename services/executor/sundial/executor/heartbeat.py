"""The executor's one Heartbeat stream to the ledger (RunLedgerService.Heartbeat).

Every ``interval`` (10 s by default; the ledger's announced interval wins) the stream
carries the full list of held runs; the ledger extends their leases and answers with
runs to cancel (also unsolicited, between beats) and runs whose lease is lost. A beat is
also sent right after the stream opens, so a reconnect (scheduler restart, another
ledger replica) re-extends every held lease at once. A broken stream is reopened with
the ledger client's jittered exponential backoff, forever, whatever the error: losing
the ledger for longer than a lease means the leases expire and the runs are retried
elsewhere, which is the design. The backoff starts over once a stream was answered.

The ledger answers every beat. A stream that stays silent for an interval plus a margin
after a beat is treated as dead and reopened: a half-open TCP connection (a ledger host
gone without a FIN, a NAT or proxy that forgot the flow) never raises on its own, and
without this the beats would go nowhere while every held lease expired. The channel's
keepalive pings (app.py) catch the same at the transport; this catches it per stream.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from sundial.core.clock import Clock, SystemClock
from sundial.executor.config import ExecutorConfig
from sundial.executor.inflight import InFlight
from sundial.executor.ledger import HeartbeatStream, LedgerClient, LedgerError
from sundial.executor.model import HeartbeatAnswer
from sundial.executor.timing import sleep_unless

__all__ = ["Heartbeat"]

log = logging.getLogger(__name__)

_MIN_INTERVAL_S = 0.05
# How much longer than an interval a beat's answer may take before the stream counts as
# dead: a ledger busy extending 10 000 leases answers in well under a second.
_ANSWER_MARGIN_S = 2.0


class _Silent(Exception):
    """The ledger did not answer a beat in time."""


class Heartbeat:
    """Lifecycle component keeping held leases alive.

    Args:
        config: Supplies ``heartbeat_interval_s`` (until the ledger announces its own)
            and ``run_lease_s`` (the slowest the beat may get: a third of it).
        ledger: Opens the streams and paces the reconnects.
        inflight: What is held (each beat lists it); takes cancel orders and lost leases.
        clock: Times the beats and the answer deadline.
    """

    name = "heartbeat"

    def __init__(
        self,
        config: ExecutorConfig,
        ledger: LedgerClient,
        inflight: InFlight,
        *,
        clock: Clock | None = None,
    ) -> None:
        self._ledger = ledger
        self._inflight = inflight
        self._clock = clock or SystemClock()
        self.interval_s = config.heartbeat_interval_s
        self._lease_ttl_s = config.run_lease_s
        self._stopping = asyncio.Event()
        self._beat_now = asyncio.Event()
        self.connected = asyncio.Event()
        """Set while a stream is open and answered (tests wait for it)."""
        self.beats = 0
        """Heartbeats sent since start (all streams)."""
        self._unanswered_since: float | None = None  # clock time of the oldest unanswered beat

    def beat_soon(self) -> None:
        """Send the next heartbeat now instead of at the end of the interval."""
        self._beat_now.set()

    async def run(self, started: Callable[[], None]) -> None:
        """Keep a stream open until stopped; reconnect after failures."""
        started()  # the ledger may start later: that is what the reconnect loop is for
        failures = 0
        while not self._stopping.is_set():
            # Why the stream is being reopened, logged once the wait is known (None: a
            # stream the ledger ended, or an error already logged with its traceback).
            reason: str | None = None
            level, extra = logging.WARNING, {}
            try:
                await self._session()
            except _Silent as exc:
                reason, extra = f"silent ({exc})", {"reason": "silent"}
            except LedgerError as exc:
                reason, extra = f"broke ({exc.code_name})", {"grpc_code": exc.code_name}
                if not exc.retryable:
                    # A refusal (UNIMPLEMENTED, PERMISSION_DENIED): likely misconfigured,
                    # but reopened anyway, since the stream is what keeps leases alive.
                    level = logging.ERROR
            except Exception:
                log.exception("heartbeat stream failed", extra={"action": "heartbeat.error"})
            finally:
                if self.connected.is_set():
                    failures = 0  # the stream worked: a new outage starts the backoff over
                self.connected.clear()
            if self._stopping.is_set():
                return
            failures += 1
            delay = self._ledger.backoff(failures)
            if reason is not None:
                log.log(
                    level,
                    "heartbeat stream %s; reconnecting in %.1f s",
                    reason,
                    delay,
                    extra={"action": "heartbeat.reconnect", **extra},
                )
            await sleep_unless(self._clock, delay, self._stopping)

    async def stop(self) -> None:
        """Close the stream; idempotent."""
        self._stopping.set()
        self._beat_now.set()

    async def _session(self) -> None:
        stream = self._ledger.heartbeat()
        self._unanswered_since = None
        reader = asyncio.create_task(self._read(stream))
        try:
            while not self._stopping.is_set():
                await stream.send(self._inflight.held(), draining=self._inflight.draining)
                self.beats += 1
                self._beat_now.clear()
                now = self._clock.monotonic()
                if self._unanswered_since is None:
                    self._unanswered_since = now
                interval = max(self.interval_s, _MIN_INTERVAL_S)
                answer_by = self._unanswered_since + interval + _ANSWER_MARGIN_S
                wait = max(min(interval, answer_by - now), 0.0)
                await sleep_unless(self._clock, wait, self._beat_now, reader)
                if reader.done():
                    reader.result()  # raises the stream's error
                    return  # the server ended the stream: reconnect
                if self._unanswered_since is not None and self._clock.monotonic() >= answer_by:
                    raise _Silent(f"no answer within {answer_by - self._unanswered_since:.1f} s")
            await stream.close()
        finally:
            if not reader.done():
                reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
            stream.cancel()

    async def _read(self, stream: HeartbeatStream) -> None:
        async for answer in stream.answers():
            self._unanswered_since = None  # any answer shows the stream is alive
            self.connected.set()
            self._handle(answer)

    def _handle(self, answer: HeartbeatAnswer) -> None:
        if answer.interval_s is not None and answer.interval_s > 0:
            # Never beat slower than a third of our lease: one lost beat is survived.
            self.interval_s = min(answer.interval_s, self._lease_ttl_s / 3)
        for order in answer.cancel:
            self._inflight.cancel(order.run, order.attempt, order.reason)
        for run, attempt in answer.lost:
            self._inflight.lose(run, attempt)
