"""End to end: fixed-delay intervals (docs/design.md section 4, "Fixed delay") with the
API, the scheduler and executors as real processes: each run starts at least the delay
after the previous one ended, and an executor killed mid-call does not stall the job."""

from __future__ import annotations

import asyncio
import itertools
from datetime import timedelta

import pytest

from sundial.devstack import ServiceProcess
from sundial.v1 import job_pb2, job_service_pb2, run_pb2
from tests.e2e.test_executor_faults import api_and_scheduler, cluster
from tests.e2e.test_executor_runs import SUCCEEDED, every, http_job, runs_with
from tests.helpers.cluster import Cluster
from tests.helpers.eventually import assert_eventually
from tests.helpers.target_server import RecordingTarget

pytestmark = [pytest.mark.timeout(150), pytest.mark.slow]
# The module's API and scheduler, an executor of each test's own (one is killed).
__all__ = ["api_and_scheduler", "cluster"]  # fixtures, imported

DEAD = run_pb2.RUN_STATUS_DEAD
DELAY = timedelta(seconds=2)


def fixed_delay(seconds: int) -> job_pb2.Schedule:
    schedule = every(seconds)
    schedule.interval.from_end = True
    return schedule


async def test_a_killed_executor_does_not_stall_a_fixed_delay_job(
    cluster: Cluster, target: RecordingTarget
) -> None:
    """The run's executor is killed mid-call: its lease expires, the sweeper ends the run
    (one attempt allowed: dead) and re-arms the job, whose next run comes the delay after."""
    target.hold("/held")
    tenant = await cluster.tenant()
    job = await tenant.create_job(
        http_job("held", f"{target.url}/held", fixed_delay(2), max_attempts=1)
    )
    await assert_eventually(lambda: len(target.calls_to("/held")) >= 1, timeout_s=20)
    first: ServiceProcess = cluster.services.processes["executor"]
    await asyncio.to_thread(cluster.services.add, "executor")
    assert first.process.proc is not None
    first.process.proc.kill()  # SIGKILL while the target holds the request
    first.process.proc.wait(10)
    [dead] = await assert_eventually(
        lambda: runs_with(tenant, job.job_id, DEAD, 1), timeout_s=40, interval_s=0.3
    )
    target.release("/held")
    succeeded = await assert_eventually(
        lambda: runs_with(tenant, job.job_id, SUCCEEDED, 1), timeout_s=30, interval_s=0.3
    )
    ended = dead.finished_at.ToDatetime()
    following = min(succeeded, key=lambda r: r.scheduled_at.ToDatetime())
    assert following.scheduled_at.ToDatetime() >= ended + DELAY
    assert following.started_at.ToDatetime() >= ended + DELAY


async def test_each_run_starts_at_least_the_delay_after_the_previous_ended(
    cluster: Cluster, target: RecordingTarget
) -> None:
    target.script("/work", delay_s=1.0)  # every call takes a second
    tenant = await cluster.tenant()
    job = await tenant.create_job(http_job("fixed", f"{target.url}/work", fixed_delay(2)))
    runs = await assert_eventually(
        lambda: runs_with(tenant, job.job_id, SUCCEEDED, 3), timeout_s=60, interval_s=0.3
    )
    runs = sorted(runs, key=lambda r: r.scheduled_at.ToDatetime())[:3]
    for previous, following in itertools.pairwise(runs):
        ended = previous.finished_at.ToDatetime()
        assert following.scheduled_at.ToDatetime() >= ended + DELAY
        assert following.started_at.ToDatetime() >= ended + DELAY, (previous, following)
    # Never two calls at once: each began after the previous one answered.
    calls = target.calls_to("/work")
    for previous_call, following_call in itertools.pairwise(calls[:3]):
        assert previous_call.finished is not None
        assert following_call.started >= previous_call.finished
    got = await tenant.call("GetJob", job_service_pb2.GetJobRequest(job_id=job.job_id))
    assert got.job.schedule.interval.from_end  # type: ignore[attr-defined]
