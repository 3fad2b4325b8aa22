"""The soak's HTTP target: records every call with what fencing checks need.

Each call is answered with a success status chosen from its ``Sundial-Execution-Id``
(:func:`status_for`), so the status a run row records (``last_http_status``) says which
execution's result the ledger wrote: the stale-write check compares it with the
execution the row's lease belongs to (see :mod:`._checks`).
"""

from __future__ import annotations

import asyncio
import time
import zlib
from dataclasses import dataclass

from sundial.devstack import HttpRequest, HttpResponse, HttpTargetServer

SUCCESS_STATUSES = (200, 201, 202, 203, 206, 207, 208)
"""2xx answers (all successes for the executor) that tell executions apart."""


def status_for(execution_id: str) -> int:
    """The status the target answers the execution ``execution_id`` with (stable)."""
    return SUCCESS_STATUSES[zlib.crc32(execution_id.encode()) % len(SUCCESS_STATUSES)]


def delay_for(key: str, max_delay_s: float) -> float:
    """A stable per-run call duration in [0, max_delay_s): runs are in flight when a
    fault hits, not only queued."""
    return (zlib.crc32(key.encode()) % 1000) / 1000 * max_delay_s


@dataclass(slots=True)
class TargetCall:
    """One call the target received."""

    key: str
    """Idempotency-Key: the run key."""
    attempt: int
    """Sundial-Attempt."""
    execution_id: str
    """Sundial-Execution-Id (uuid5 of the lease id)."""
    received_at: float
    """Wall-clock receipt (Unix seconds)."""
    status: int
    """The status it was answered with."""
    answered_at: float | None = None
    """Wall-clock time the answer was sent (Unix seconds); None while it is held."""


class SoakTarget:
    """An HTTP target on 127.0.0.1 answering every call 2xx after a short delay."""

    def __init__(self, *, max_delay_s: float = 0.8) -> None:
        self.calls: list[TargetCall] = []
        self.max_delay_s = max_delay_s
        self._server = HttpTargetServer(self._handle)

    @property
    def url(self) -> str:
        return self._server.url

    async def __aenter__(self) -> SoakTarget:
        await self._server.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._server.stop()

    async def _handle(self, request: HttpRequest) -> HttpResponse:
        headers = request.headers
        key = headers.get("idempotency-key", "")
        execution_id = headers.get("sundial-execution-id", "")
        call = TargetCall(
            key=key,
            attempt=int(headers.get("sundial-attempt", "0") or 0),
            execution_id=execution_id,
            received_at=request.received_at,
            status=status_for(execution_id),
        )
        self.calls.append(call)  # at receipt: a call whose caller dies still counts
        await asyncio.sleep(delay_for(key, self.max_delay_s))
        call.answered_at = time.time()
        return HttpResponse(call.status, b"{}")
