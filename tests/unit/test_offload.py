"""The API's worker pool (sundial.api.offload) with real worker processes: what a
computation raises there comes back whole, and the pool serves on after it."""

from __future__ import annotations

import operator
import os
import pickle
from datetime import UTC, datetime

import pytest

from sundial.api.offload import Offload
from sundial.api.ratelimit import RateLimited
from sundial.core.errors import InvalidArgument, NotFound, SundialError, Unavailable
from sundial.schedule import SearchExceeded


def _die() -> None:
    os._exit(1)  # as a worker killed by the kernel for its memory


def _refuse(field: str) -> None:
    raise InvalidArgument(field, "must be shorter than the shortest gap", reason="TOO_LONG")


@pytest.mark.parametrize(
    "error",
    [
        InvalidArgument("schedule.jitter", "too long", reason="TOO_LONG"),
        SearchExceeded(datetime(2026, 1, 1, tzinfo=UTC), datetime(2031, 1, 2, tzinfo=UTC), 4096),
        NotFound("job j not found"),
        RateLimited("slow down", retry_delay_s=1.5),
    ],
    ids=lambda e: type(e).__name__,
)
def test_every_error_crosses_a_process_boundary_whole(error: SundialError) -> None:
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert (str(copy), copy.args, vars(copy)) == (str(error), error.args, vars(error))


async def test_an_error_raised_in_the_pool_comes_back_and_the_pool_serves_on() -> None:
    offload = Offload(workers=1, share=10, burst_s=10)
    try:
        with pytest.raises(InvalidArgument) as refused:
            await offload.run("tenant-a", _refuse, "jobs[3].schedule.jitter")
        assert refused.value.field == "jobs[3].schedule.jitter"
        assert refused.value.reason == "TOO_LONG"
        # An error that failed to unpickle here would have broken the pool for everyone.
        assert await offload.run("tenant-b", operator.add, 2, 3) == 5
    finally:
        offload.close()


async def test_a_pool_whose_worker_died_is_replaced() -> None:
    offload = Offload(workers=1, share=10, burst_s=10)
    try:
        with pytest.raises(Unavailable):
            await offload.run("tenant-a", _die)
        assert await offload.run("tenant-b", operator.add, 2, 3) == 5
    finally:
        offload.close()
