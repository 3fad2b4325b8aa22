"""Two tenants on one stack (API, scheduler and executor as real processes): what tenant A
does within its rights never stalls or breaks tenant B (docs/design.md section 7,
"Tenants and their limits").
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from sundial.v1 import job_pb2, job_service_pb2, run_pb2
from tests.helpers.cluster import Cluster, Tenant
from tests.helpers.eventually import assert_eventually
from tests.helpers.target_server import RecordingTarget

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


@pytest.fixture
def cluster(shared_cluster: Cluster) -> Cluster:
    """The tests of this module share one set of processes, each with tenants of its own."""
    return shared_cluster


SUCCEEDED = run_pb2.RUN_STATUS_SUCCEEDED
MAX_PAYLOAD = 256 * 1024  # the API's own limit (CreateJob refuses one byte more)


def every_minute(url: str, payload: bytes) -> job_pb2.Job:
    return job_pb2.Job(
        name=f"job-{uuid.uuid4().hex[:6]}",
        schedule=job_pb2.Schedule(cron="* * * * *"),
        target=job_pb2.Target(http=job_pb2.HttpTarget(url=url)),
        payload=payload,
    )


async def statuses(tenant: Tenant, job_id: str) -> list[int]:
    return [r.status for r in await tenant.runs(job_id)]


async def test_twenty_runs_of_the_largest_payload_and_another_tenants_run_all_succeed(
    cluster: Cluster, target: RecordingTarget
) -> None:
    a, b = await cluster.tenant(), await cluster.tenant()
    big = await a.create_job(every_minute(f"{target.url}/a", b"x" * MAX_PAYLOAD))
    small = await b.create_job(every_minute(f"{target.url}/b", b"{}"))
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    request = job_service_pb2.BackfillJobRequest(job_id=big.job_id)
    request.start_time.FromDatetime(now - timedelta(minutes=20))
    request.end_time.FromDatetime(now)
    backfilled = await a.call("BackfillJob", request)
    assert len(backfilled.runs) == 20
    # B's run falls due in the same second as A's herd of 5 MiB of payloads.
    await b.call("TriggerJob", job_service_pb2.TriggerJobRequest(job_id=small.job_id))

    async def all_succeeded() -> None:
        a_runs = [s for s in await statuses(a, big.job_id) if s != run_pb2.RUN_STATUS_PENDING]
        assert a_runs.count(SUCCEEDED) >= 20, a_runs
        assert SUCCEEDED in await statuses(b, small.job_id)

    await assert_eventually(all_succeeded, timeout_s=60, interval_s=0.5, what="every run done")
    bodies = [c.request.body for c in target.calls_to("/a")]
    assert len(bodies) >= 20 and all(len(body) == MAX_PAYLOAD for body in bodies)
    assert target.calls_to("/b")


async def test_a_tenant_whose_target_fails_leaves_another_tenants_calls_to_the_same_origin(
    cluster: Cluster, target: RecordingTarget
) -> None:
    target.script("/a-fails", status=502)
    a, b = await cluster.tenant(), await cluster.tenant()
    failing = every_minute(f"{target.url}/a-fails", b"{}")
    failing.policies.retry.max_attempts = 1
    failing = await a.create_job(failing)
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    request = job_service_pb2.BackfillJobRequest(job_id=failing.job_id)
    request.start_time.FromDatetime(now - timedelta(minutes=10))
    request.end_time.FromDatetime(now)
    await a.call("BackfillJob", request)

    async def all_dead(count: int) -> None:
        runs = await a.runs(failing.job_id)
        assert [r.status for r in runs].count(run_pb2.RUN_STATUS_DEAD) >= count, runs

    await assert_eventually(lambda: all_dead(10), timeout_s=30, interval_s=0.2, what="A dead")
    # Ten failures in a row: A's breaker for the origin is open, A's next run not called.
    await a.call("TriggerJob", job_service_pb2.TriggerJobRequest(job_id=failing.job_id))
    await assert_eventually(lambda: all_dead(11), timeout_s=30, interval_s=0.2, what="A's 11th")
    manual = [r for r in await a.runs(failing.job_id) if r.kind == run_pb2.RUN_KIND_MANUAL]
    assert [r.last_error.startswith("circuit breaker open") for r in manual] == [True]
    assert len(target.calls_to("/a-fails")) == 10
    # B's job at the same origin, while A's breaker there is open: called at once.
    fine = await b.create_job(every_minute(f"{target.url}/b-works", b"{}"))
    await b.call("TriggerJob", job_service_pb2.TriggerJobRequest(job_id=fine.job_id))

    async def b_succeeded() -> None:
        runs = await b.runs(fine.job_id)
        assert [(r.status, r.attempt) for r in runs if r.kind == run_pb2.RUN_KIND_MANUAL] == [
            (SUCCEEDED, 1)
        ], runs

    await assert_eventually(b_succeeded, timeout_s=20, interval_s=0.2, what="B's run")
    assert target.calls_to("/b-works")
