"""Long schedule computations run off the event loop, within each tenant's CPU share.

A preview of 1,000 fire times of a union of 16 specs takes a fifth of a second of pure
Python; on the event loop it would hold every other tenant's calls for as long
(``bench/bench_isolation.py``: four such calls at once made another tenant's GetJob p50
0.33 s). :class:`Offload` runs them in a small pool of worker processes instead, at a
lower scheduling priority (nice 10): unlike threads, they do not take the interpreter's
lock from the event loop (with threads, another tenant's GetJob p99 was 2.5x its p99
alone while one tenant previewed), and the operating system serves the replica's calls
first. And:

* each tenant has one computation at a time in the pool (the others of that tenant wait
  for theirs), so one tenant cannot fill it;
* each tenant's computations may use ``share`` of a core on this replica on average
  (a bucket of CPU seconds, refilled at ``share`` per second, up to ``burst_s``): a
  tenant past it is refused ``RESOURCE_EXHAUSTED`` (``RATE_LIMITED``) with the time
  until its bucket is positive again as ``RetryInfo``, which the clients honour.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from sundial.api.ratelimit import RateLimited
from sundial.core.errors import Unavailable

__all__ = ["Offload"]

P = ParamSpec("P")
T = TypeVar("T")


WORKER_NICENESS = 10
"""How much lower the workers' scheduling priority is than the API's."""


def _lower_priority() -> None:
    """A worker's initializer: yield the CPU to the API's own work."""
    with contextlib.suppress(OSError):
        os.nice(WORKER_NICENESS)


def _measured(
    fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[T | None, Exception | None, float]:
    """``fn(*args, **kwargs)`` in a worker: its result or the error it raised, with the
    CPU seconds it took there (a refused search costs its tenant what it used too)."""
    started = time.process_time()
    try:
        return fn(*args, **kwargs), None, time.process_time() - started
    except Exception as exc:  # re-raised by Offload.run, once charged
        return None, exc, time.process_time() - started


@dataclass(slots=True)
class _Budget:
    seconds: float
    at: float


class Offload:
    """A bounded pool for CPU-heavy pure computations, with one slot and a CPU share per
    tenant.

    The computations and their arguments and results cross a process boundary: ``fn``
    is a module-level function and everything it takes and returns pickles.

    Args:
        workers: Worker processes of the pool (computations of different tenants at
            once), started with the first computation.
        share: Fraction of a core each tenant's computations may use on average.
        burst_s: CPU seconds a quiet tenant may use at once.
    """

    def __init__(self, workers: int = 2, *, share: float = 0.25, burst_s: float = 1.0) -> None:
        self._workers = workers
        self._pool = self._new_pool()
        self._busy: dict[str, asyncio.Lock] = {}
        self._users: dict[str, int] = {}
        self._share = share
        self._burst_s = burst_s
        self._budgets: dict[str, _Budget] = {}

    async def run(
        self, tenant_id: str, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """``fn(*args, **kwargs)`` in the pool, after ``tenant_id``'s previous ones.

        Raises:
            RateLimited: The tenant used up its CPU share; retry after the delay.
        """
        async with self._slot(tenant_id):
            budget = self._refilled(tenant_id)
            if budget.seconds <= 0:
                wait_s = -budget.seconds / self._share + 0.01
                raise RateLimited(
                    f"tenant {tenant_id}'s schedule computations exceed their share of"
                    f" {self._share:g} of a core on this replica: retry in {wait_s:.2f}s",
                    retry_delay_s=round(wait_s, 3),
                )

            loop = asyncio.get_running_loop()
            pool = self._pool
            try:
                result, error, used_s = await loop.run_in_executor(
                    pool, _measured, fn, args, dict(kwargs)
                )
            except BrokenProcessPool:
                # A worker died (killed, out of memory): the pool refuses all work from
                # then on. The next call gets a new one; this one may be retried.
                if self._pool is pool:
                    self._pool = self._new_pool()
                raise Unavailable("a schedule computation's worker stopped; retry") from None
            budget.seconds -= used_s
            if error is not None:
                raise error
            return result  # type: ignore[return-value]

    def _new_pool(self) -> ProcessPoolExecutor:
        # spawn, not fork: the API process has threads (gRPC) that fork would copy badly.
        return ProcessPoolExecutor(
            max_workers=self._workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_lower_priority,
        )

    def _refilled(self, tenant_id: str) -> _Budget:
        now = time.monotonic()
        budget = self._budgets.get(tenant_id)
        if budget is None:
            if len(self._budgets) >= 100_000:  # forget the full ones
                for name in [t for t, b in self._budgets.items() if b.seconds >= self._burst_s]:
                    del self._budgets[name]
            budget = self._budgets[tenant_id] = _Budget(self._burst_s, now)
        budget.seconds = min(self._burst_s, budget.seconds + (now - budget.at) * self._share)
        budget.at = now
        return budget

    def close(self) -> None:
        """Stop the pool's workers once their work is done."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    @contextlib.asynccontextmanager
    async def _slot(self, tenant_id: str) -> AsyncIterator[None]:
        lock = self._busy.get(tenant_id)
        if lock is None:
            lock = self._busy[tenant_id] = asyncio.Lock()
        self._users[tenant_id] = self._users.get(tenant_id, 0) + 1
        try:
            async with lock:
                yield
        finally:
            self._users[tenant_id] -= 1
            if not self._users[tenant_id]:  # idle: forget the tenant
                del self._users[tenant_id], self._busy[tenant_id]
