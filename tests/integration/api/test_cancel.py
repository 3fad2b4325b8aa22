"""Cancelling a run is one transition (``sundial.run.cancel``), whoever asks: CancelRun
(``cancel_run``), DeleteJob (``cancel_runs_of_job``) and the scheduler's
OVERLAP_POLICY_CANCEL_OTHER (``cancel_other_runs``) each write, on a run of every status,
exactly the columns the transition names (docs/design.md section 10)."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import pytest

from sundial.core.clock import ManualClock
from sundial.run import Cancel, RunStatus, cancel, run_key
from sundial.scheduler.store import queries as scheduler_queries
from sundial.v1 import job_service_pb2 as pb
from tests.integration.api.support import Api, StartApi, Tenant, make_job

NOW = datetime(2026, 6, 1, 12, tzinfo=UTC)
EARLIER = NOW - timedelta(hours=1)
SCHEDULER = scheduler_queries
COLUMNS = (
    "status",
    "cancel_requested",
    "last_error",
    "updated_at",
    "finished_at",
    "check_at",
    "next_attempt_at",
    "error_class",
    "skip_reason",
)


async def seed(api: Api, tenant: Tenant) -> tuple[str, dict[RunStatus, datetime]]:
    """A job with one run in every status, each with every column a cancel may write set."""
    job = (await api.jobs.CreateJob(pb.CreateJobRequest(job=make_job("c")), metadata=tenant.md)).job
    runs = {}
    for i, status in enumerate(RunStatus):
        at = EARLIER - timedelta(minutes=i)
        await api.sql(
            """INSERT INTO job_runs (job_id, scheduled_at, tenant_id, partition_id, kind, status,
                   attempt, check_at, next_attempt_at, lease_until, executor_id, finished_at,
                   error_class, skip_reason, last_error, created_at, updated_at)
               SELECT job_id, $2, tenant_id, partition_id, 'scheduled', $3, 1, $4, $4, $4,
                      'executor-1', $4, 'retryable', 'overlap', 'an earlier error', $4, $4
                 FROM jobs WHERE job_id = $1""",
            uuid.UUID(job.uid),
            at,
            status.value,
            EARLIER,
        )
        runs[status] = at
    return job.uid, runs


async def rows(api: Api, uid: str) -> dict[datetime, dict[str, Any]]:
    found = await api.sql(
        f"SELECT scheduled_at, {', '.join(COLUMNS)} FROM job_runs WHERE job_id = $1",
        uuid.UUID(uid),
    )
    return {row["scheduled_at"]: {c: row[c] for c in COLUMNS} for row in found}


def expected(before: dict[str, Any], change: Cancel | None) -> dict[str, Any]:
    """The row ``before`` after ``change`` (None: unchanged)."""
    if change is None:
        return before
    after = dict(before)
    after.update(
        status=change.status.value,
        cancel_requested=change.cancel_requested,
        last_error=change.last_error,
        updated_at=change.updated_at,
    )
    if change.status is RunStatus.CANCELLED:
        after.update(
            finished_at=change.finished_at,
            check_at=change.check_at,
            next_attempt_at=change.next_attempt_at,
            error_class=None if change.error_class is None else change.error_class.value,
            skip_reason=change.skip_reason,
        )
    return after


@pytest.fixture
async def api(start_api: StartApi) -> Api:
    return await start_api(clock=ManualClock(NOW))


async def cancel_runs(api: Api, tenant: Tenant, uid: str, runs: dict[RunStatus, datetime]) -> str:
    """CancelRun on every run (an ended one refused); the reason it gave."""
    for status, at in runs.items():
        try:
            await api.jobs.CancelRun(
                pb.CancelRunRequest(run_key=run_key(uid, at), reason="stop it"),
                metadata=tenant.md,
            )
        except grpc.aio.AioRpcError as exc:
            assert status.ended and exc.code() == grpc.StatusCode.FAILED_PRECONDITION
    return "stop it"


async def delete_job(api: Api, tenant: Tenant, uid: str, runs: dict[RunStatus, datetime]) -> str:
    await api.jobs.DeleteJob(pb.DeleteJobRequest(job_id=uid), metadata=tenant.md)
    return "job deleted"


async def cancel_other(api: Api, tenant: Tenant, uid: str, runs: dict[RunStatus, datetime]) -> str:
    counts = await api.sql(SCHEDULER.cancel_other_runs, [uuid.UUID(uid)], NOW)
    assert (counts[0]["asked"], counts[0]["cancelled"]) == (1, 3)
    # A running run already asked to stop is not asked (nor counted) twice.
    again = await api.sql(SCHEDULER.cancel_other_runs, [uuid.UUID(uid)], NOW)
    assert (again[0]["asked"], again[0]["cancelled"]) == (0, 0)
    return "cancelled by overlap policy CANCEL_OTHER"


@pytest.mark.parametrize("path", [cancel_runs, delete_job, cancel_other])
async def test_every_cancel_writes_the_one_transition(
    api: Api, tenant: Tenant, path: Callable[..., Awaitable[str]]
) -> None:
    uid, runs = await seed(api, tenant)
    before = await rows(api, uid)
    reason = await path(api, tenant, uid, runs)
    after = await rows(api, uid)
    for status, at in runs.items():
        assert after[at] == expected(before[at], cancel(status, reason, NOW)), status
