"""The executor's one Heartbeat stream to the ledger (RunLedger.Heartbeat).

Every ``interval`` (10 s by default; the ledger's announced interval wins) the stream
carries the full list of held runs; the ledger extends their leases and answers with
runs to cancel (also unsolicited, between beats) and runs whose lease is lost. A beat is
also sent right after the stream opens, so a reconnect (scheduler restart, another
ledger replica) re-extends every held lease at once. A broken stream is reopened with
jittered exponential backoff, forever: losing the ledger for longer than a lease means
the leases expire and the runs are retried elsewhere, which is the design.

The ledger answers every beat. A stream that stays silent for an interval plus a margin
after a beat is treated as dead and reopened: a half-open TCP connection (a ledger host
gone without a FIN, a NAT or proxy that forgot the flow) never raises on its own, and
without this the beats would go nowhere while every held lease expired. The channel's
keepalive pings (app.py) catch the same at the transport; this catches it per stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable

import grpc

from sundial.executor.convert import run_from_ref, run_to_ref, seconds, to_duration
from sundial.executor.inflight import InFlight
from sundial.v1 import ledger_pb2, ledger_pb2_grpc

__all__ = ["Heartbeat"]

log = logging.getLogger(__name__)

_MIN_INTERVAL_S = 0.05
_MAX_BACKOFF_S = 5.0
# How much longer than an interval a beat's answer may take before the stream counts as
# dead: a ledger busy extending 10 000 leases answers in well under a second.
_ANSWER_MARGIN_S = 2.0


class _Silent(Exception):
    """The ledger did not answer a beat in time."""


class Heartbeat:
    """Lifecycle component keeping held leases alive."""

    name = "heartbeat"

    def __init__(
        self,
        stub: ledger_pb2_grpc.RunLedgerStub,
        inflight: InFlight,
        *,
        executor_id: str,
        interval_s: float = 10.0,
        lease_ttl_s: float = 30.0,
    ) -> None:
        self._stub = stub
        self._inflight = inflight
        self._executor_id = executor_id
        self.interval_s = interval_s
        self._lease_ttl_s = lease_ttl_s
        self._stopping = asyncio.Event()
        self._beat_now = asyncio.Event()
        self.connected = asyncio.Event()
        """Set while a stream is open (tests wait for it)."""
        self.beats = 0
        """Heartbeats sent since start (all streams)."""
        self._unanswered_since: float | None = None  # loop time of the oldest unanswered beat

    def beat_soon(self) -> None:
        """Send the next heartbeat now instead of at the end of the interval."""
        self._beat_now.set()

    async def run(self, started: Callable[[], None]) -> None:
        """Keep a stream open until stopped; reconnect after failures."""
        started()  # the ledger may start later: that is what the reconnect loop is for
        backoff = 0.1
        while not self._stopping.is_set():
            try:
                await self._session()
                backoff = 0.1
            except _Silent as exc:
                log.warning(
                    "heartbeat stream silent (%s); reconnecting in about %.1f s",
                    exc,
                    backoff,
                    extra={"action": "heartbeat.reconnect", "reason": "silent"},
                )
            except grpc.aio.AioRpcError as exc:
                log.warning(
                    "heartbeat stream broke (%s); reconnecting in about %.1f s",
                    exc.code().name,
                    backoff,
                    extra={"action": "heartbeat.reconnect", "grpc_code": exc.code().name},
                )
            except Exception:
                log.exception("heartbeat stream failed", extra={"action": "heartbeat.error"})
            finally:
                self.connected.clear()
            if self._stopping.is_set():
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), backoff * random.uniform(0.5, 1.0))
            backoff = min(backoff * 2, _MAX_BACKOFF_S)

    async def stop(self) -> None:
        """Close the stream; idempotent."""
        self._stopping.set()
        self._beat_now.set()

    def _request(self) -> ledger_pb2.HeartbeatRequest:
        return ledger_pb2.HeartbeatRequest(
            executor_id=self._executor_id,
            runs=[
                ledger_pb2.HeldRun(run=run_to_ref(run), attempt=attempt)
                for run, attempt in self._inflight.held()
            ],
            lease_ttl=to_duration(self._lease_ttl_s),
            draining=self._inflight.draining,
        )

    async def _session(self) -> None:
        call = self._stub.Heartbeat()
        loop = asyncio.get_running_loop()
        self._unanswered_since = None
        reader = asyncio.create_task(self._read(call))
        try:
            while not self._stopping.is_set():
                await call.write(self._request())
                self.beats += 1
                self._beat_now.clear()
                if self._unanswered_since is None:
                    self._unanswered_since = loop.time()
                interval = max(self.interval_s, _MIN_INTERVAL_S)
                answer_by = self._unanswered_since + interval + _ANSWER_MARGIN_S
                wait = max(min(interval, answer_by - loop.time()), 0.0)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(_first(self._beat_now, reader), wait)
                if reader.done():
                    reader.result()  # raises the stream's error
                    return  # the server ended the stream: reconnect
                if self._unanswered_since is not None and loop.time() >= answer_by:
                    raise _Silent(f"no answer within {answer_by - self._unanswered_since:.1f} s")
            await call.done_writing()
        finally:
            if not reader.done():
                reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
            call.cancel()

    async def _read(self, call: grpc.aio.StreamStreamCall) -> None:
        async for response in call:
            self._unanswered_since = None  # any answer shows the stream is alive
            self.connected.set()
            self._handle(response)

    def _handle(self, response: ledger_pb2.HeartbeatResponse) -> None:
        if response.HasField("heartbeat_interval"):
            announced = seconds(response.heartbeat_interval)
            if announced > 0:
                # Never beat slower than a third of our lease: one lost beat is survived.
                self.interval_s = min(announced, self._lease_ttl_s / 3)
        for order in response.cancel:
            self._inflight.cancel(run_from_ref(order.run), order.attempt, order.reason)
        for lost in response.lost:
            self._inflight.lose(run_from_ref(lost.run), lost.attempt)


async def _first(event: asyncio.Event, task: asyncio.Task[None]) -> None:
    waiter = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait([waiter, task], return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
