"""End to end: API, scheduler and executor as real processes, a real HTTP target in the
test recording every call. Scheduled runs on time, retries, dead letters and replay,
final failures, tenant capacity.
"""

from __future__ import annotations

import itertools
import time
import uuid
from datetime import UTC, datetime, timedelta

import nats
import pytest

from sundial.client import SignatureError, verify_signature
from sundial.core.bus import DEAD_STREAM, dead_subject
from sundial.internal.v1 import events_pb2
from sundial.v1 import job_pb2, job_service_pb2, run_pb2
from tests.helpers.cluster import Cluster, Tenant
from tests.helpers.eventually import assert_eventually
from tests.helpers.stack import nats_options
from tests.helpers.target_server import RecordingTarget

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


@pytest.fixture
def cluster(shared_cluster: Cluster) -> Cluster:
    """The tests of this module share one set of processes, each with tenants of its own."""
    return shared_cluster


SUCCEEDED = run_pb2.RUN_STATUS_SUCCEEDED
DEAD = run_pb2.RUN_STATUS_DEAD


def every(seconds: int) -> job_pb2.Schedule:
    schedule = job_pb2.Schedule(interval=job_pb2.IntervalSchedule())
    schedule.interval.every.FromSeconds(seconds)
    return schedule


def once(at: datetime) -> job_pb2.Schedule:
    schedule = job_pb2.Schedule()
    schedule.once.FromDatetime(at)
    return schedule


def http_job(
    name: str,
    url: str,
    schedule: job_pb2.Schedule,
    *,
    max_attempts: int = 0,
    base_delay_s: int = 0,
    max_delay_s: int = 0,
    payload: bytes = b"{}",
    overlap: int = 0,
) -> job_pb2.Job:
    job = job_pb2.Job(
        name=name,
        schedule=schedule,
        target=job_pb2.Target(http=job_pb2.HttpTarget(url=url)),
        payload=payload,
    )
    if overlap:
        job.policies.overlap = overlap
    if max_attempts:
        job.policies.retry.max_attempts = max_attempts
    if base_delay_s:
        job.policies.retry.base_delay.FromSeconds(base_delay_s)
    if max_delay_s:
        job.policies.retry.max_delay.FromSeconds(max_delay_s)
    return job


async def runs_with(tenant: Tenant, job_id: str, status: int, at_least: int) -> list[run_pb2.Run]:
    runs = [r for r in await tenant.runs(job_id) if r.status == status]
    assert len(runs) >= at_least, f"{len(runs)} runs with status {status}"
    return runs


async def test_a_job_every_second_and_a_one_time_job_run_on_time(
    cluster: Cluster, target: RecordingTarget
) -> None:
    tenant = await cluster.tenant()
    ticking = await tenant.create_job(http_job("tick", f"{target.url}/tick", every(1)))
    when = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=3)
    # Named by a client-chosen id: the scheduler and executor see only its uid.
    launch = http_job("once", f"{target.url}/once", once(when))
    launch.job_id = "launch-once"
    one = await tenant.create_job(launch)
    assert one.job_id == "launch-once" != one.uid  # type: ignore[attr-defined]

    async def enough() -> list[run_pb2.Run]:
        await runs_with(tenant, one.job_id, SUCCEEDED, 1)
        return await runs_with(tenant, ticking.job_id, SUCCEEDED, 5)

    ticks = await assert_eventually(enough, timeout_s=40, interval_s=0.5)
    for run in ticks:
        assert run.attempt == 1
        assert run.HasField("lateness")
        assert run.lateness.ToTimedelta() < timedelta(seconds=2), run.run_key
        assert run.HasField("started_at") and run.HasField("finished_at")
    [single] = await runs_with(tenant, one.job_id, SUCCEEDED, 1)
    assert single.scheduled_at.ToDatetime(tzinfo=UTC) == when
    assert single.lateness.ToTimedelta() < timedelta(seconds=2)
    # The target saw each run key exactly once, with the right headers.
    keys = target.keys()
    assert len(keys) == len(set(keys))
    for run in [*ticks, single]:
        assert run.run_key in keys
    call = target.calls_to("/once")[0]
    assert call.key == single.run_key
    assert single.job_id == one.uid and call.key.startswith(f"{one.uid}@")  # type: ignore[attr-defined]
    assert call.request.headers["sundial-attempt"] == "1"
    assert uuid.UUID(call.request.headers["sundial-execution-id"])
    assert call.request.headers["sundial-scheduled-at"] == single.scheduled_at.ToJsonString()
    # The signature verifies with the tenant's secret (the verifier targets use), and
    # with no other secret.
    signed = {
        "header": call.request.headers["sundial-signature"],
        "idempotency_key": call.request.headers["idempotency-key"],
        "attempt": call.request.headers["sundial-attempt"],
        "body": call.request.body,
    }
    verify_signature(**signed, secrets=["an-old-secret", tenant.signing_secret])
    with pytest.raises(SignatureError, match="matches none"):
        verify_signature(**signed, secrets=["not-the-secret"])
    with pytest.raises(SignatureError, match="tolerance"):
        verify_signature(**signed, secrets=[tenant.signing_secret], now=time.time() + 3600)


async def dead_letters(cluster: Cluster, tenant: Tenant, expected: int) -> list[object]:
    """Read the tenant's DeadLetters from SUNDIAL_DEAD (an ephemeral consumer)."""
    client = await nats.connect(**nats_options(cluster.services.stack))
    try:
        js = client.jetstream()
        sub = await js.pull_subscribe(dead_subject(tenant.tenant_id), stream=DEAD_STREAM)
        messages = await sub.fetch(batch=expected + 5, timeout=2)
        letters = []
        for message in messages:
            letter = events_pb2.DeadLetter()
            letter.ParseFromString(message.data)
            letters.append(letter)
        return letters
    finally:
        await client.close()


async def test_503_retries_with_growing_jittered_delays_then_dead_letter_and_replay(
    cluster: Cluster, target: RecordingTarget
) -> None:
    target.script("/flaky", status=503, body=b"try later")
    tenant = await cluster.tenant()
    when = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
    job = await tenant.create_job(
        http_job(
            "flaky",
            f"{target.url}/flaky",
            once(when),
            max_attempts=3,
            base_delay_s=1,
            max_delay_s=8,
        )
    )
    [run] = await assert_eventually(
        lambda: runs_with(tenant, job.job_id, DEAD, 1), timeout_s=40, interval_s=0.5
    )
    calls = target.calls_to("/flaky")
    assert [c.attempt for c in calls] == [1, 2, 3]
    assert {c.key for c in calls} == {run.run_key}
    # Full jitter: after failure n the wait is random(0, min(8, 1 * 2^n)) s, i.e. at most
    # 2 s, then 4 s (plus the sweep that republishes a due retry).
    gaps = [b.started - a.started for a, b in itertools.pairwise(calls)]
    for n, gap in enumerate(gaps, start=1):
        assert 0 <= gap <= min(8, 2**n) + 2.0, gaps
    assert run.attempt == 3
    assert "503" in run.last_error
    assert run.error_class == run_pb2.ERROR_CLASS_RETRYABLE
    # (run.last_http_status is not stored by the ledger yet: see the executor report.)

    [letter] = await assert_eventually(
        lambda: dead_letters(cluster, tenant, 1), timeout_s=10, interval_s=0.5
    )
    assert letter.run.run_key == run.run_key
    assert letter.run.attempt == 3
    assert letter.tenant_id == tenant.tenant_id
    assert "503" in letter.last_error
    assert letter.target.http.url == f"{target.url}/flaky"

    # Replay: the same run key runs again, and succeeds now.
    target.script("/flaky", status=200)
    await tenant.call("ReplayRun", job_service_pb2.ReplayRunRequest(run_key=run.run_key))
    [replayed] = await assert_eventually(
        lambda: runs_with(tenant, job.job_id, SUCCEEDED, 1), timeout_s=30, interval_s=0.5
    )
    assert replayed.run_key == run.run_key
    assert replayed.attempt == 4
    assert replayed.replay_count == 1
    last = target.calls_to("/flaky")[-1]
    assert (last.key, last.attempt, last.status) == (run.run_key, 4, 200)


async def test_400_is_dead_after_one_attempt(cluster: Cluster, target: RecordingTarget) -> None:
    target.script("/bad", status=400, body=b"no such customer")
    tenant = await cluster.tenant()
    when = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
    job = await tenant.create_job(
        http_job("bad", f"{target.url}/bad", once(when), max_attempts=5, base_delay_s=1)
    )
    [run] = await assert_eventually(
        lambda: runs_with(tenant, job.job_id, DEAD, 1), timeout_s=30, interval_s=0.5
    )
    assert run.attempt == 1
    assert run.error_class == run_pb2.ERROR_CLASS_FINAL
    assert "no such customer" in run.last_error
    assert len(target.calls_to("/bad")) == 1


async def test_tenant_capped_at_two_runs_ten_due_at_once(
    cluster: Cluster, target: RecordingTarget
) -> None:
    target.script("/capped", delay_s=0.5)
    tenant = await cluster.tenant(max_concurrent_runs=2)
    when = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=3)
    jobs = [
        await tenant.create_job(http_job(f"capped-{i}", f"{target.url}/capped", once(when)))
        for i in range(10)
    ]

    async def all_succeeded() -> None:
        for job in jobs:
            await runs_with(tenant, job.job_id, SUCCEEDED, 1)

    await assert_eventually(all_succeeded, timeout_s=60, interval_s=0.5)
    assert target.max_active_by_path["/capped"] <= 2
    assert len(target.calls_to("/capped")) == 10
    assert len(set(target.keys("/capped"))) == 10
