"""End to end: the three services as real processes, real HTTP targets. A job whose
target fails three times in a row is paused by its failure policy with the reason, and
the tenant's notification target gets one signed notification of it; a notification
target that hangs is retried and costs dispatch nothing (docs/design.md section 12)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from sundial.client import verify_signature
from sundial.v1 import job_pb2, run_pb2
from sundial.v1 import job_service_pb2 as pb
from tests.e2e.test_executor_runs import DEAD, SUCCEEDED, every, http_job, runs_with
from tests.helpers.cluster import Cluster, Tenant
from tests.helpers.eventually import assert_eventually
from tests.helpers.target_server import RecordingTarget

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


@pytest.fixture
def cluster(shared_cluster: Cluster) -> Cluster:
    """The tests of this module share one set of processes, each with tenants of its own."""
    return shared_cluster


async def add_channel(
    tenant: Tenant, url: str, kinds: list[int], window_s: int = 0
) -> pb.NotificationChannel:
    request = pb.CreateNotificationChannelRequest(
        channel=pb.NotificationChannel(
            display_name=f"channel-{len(kinds)}-{window_s}",
            target=job_pb2.Target(http=job_pb2.HttpTarget(url=url)),
            event_kinds=kinds,
        )
    )
    request.channel.digest_window.FromTimedelta(timedelta(seconds=window_s))
    answer = await tenant.call("CreateNotificationChannel", request)
    return answer.channel


async def test_three_dead_runs_pause_the_job_and_one_signed_notification_says_so(
    cluster: Cluster, target: RecordingTarget
) -> None:
    target.script("/broken", status=500, body=b"database is down")
    tenant = await cluster.tenant()
    await add_channel(tenant, f"{target.url}/paused", [pb.NOTIFICATION_EVENT_KIND_AUTO_PAUSED])
    await add_channel(
        tenant, f"{target.url}/dead", [pb.NOTIFICATION_EVENT_KIND_DEAD_RUN], window_s=2
    )
    job = http_job("broken", f"{target.url}/broken", every(1), max_attempts=1)
    job.policies.failure.pause_after_consecutive_dead = 3
    created = await tenant.create_job(job)
    job_id = created.job_id

    async def paused() -> job_pb2.Job:
        answer = await tenant.call("GetJob", pb.GetJobRequest(job_id=job_id))
        got: job_pb2.Job = answer.job
        assert got.paused
        return got

    got = await assert_eventually(paused, timeout_s=30, interval_s=0.3, what="the auto-pause")
    assert got.pause_note.startswith("paused by failure policy after 3 consecutive dead runs")
    assert "last error: HTTP 500" in got.pause_note and "database is down" in got.pause_note
    dead = await runs_with(tenant, job_id, DEAD, 3)
    revisions = await tenant.call("ListJobRevisions", pb.ListJobRevisionsRequest(job_id=job_id))
    newest = revisions.revisions[0]
    assert newest.changed_by == "failure-policy" and newest.job.paused

    async def notified() -> list[object]:
        calls = target.calls_to("/paused")
        assert calls and all(c.status == 200 for c in calls)
        return calls

    [call] = await assert_eventually(notified, timeout_s=20, interval_s=0.3, what="the notice")
    verify_signature(
        call.request.headers["sundial-signature"],
        secrets=[tenant.signing_secret],
        idempotency_key=call.key or "",
        attempt=call.attempt,
        body=call.request.body,
    )
    body = json.loads(call.request.body)
    assert body["tenant_id"] == tenant.tenant_id and body["notification_id"] == call.key
    [event] = body["events"]
    assert event["kind"] == "auto_paused" and event["job_id"] == created.uid
    assert event["pause_note"] == got.pause_note and event["consecutive_dead"] == 3

    # The dead runs, digested: every one is reported, in fewer notifications than runs.
    async def all_dead_reported() -> list[dict[str, object]]:
        bodies = [json.loads(c.request.body) for c in target.calls_to("/dead")]
        keys = {e["run_key"] for b in bodies for e in b["events"]}
        assert {r.run_key for r in dead} <= keys
        return bodies

    bodies = await assert_eventually(all_dead_reported, timeout_s=20, interval_s=0.3)
    assert len(bodies) < sum(int(str(b["event_count"])) for b in bodies)
    # Exactly once: one notification for the pause, whatever the retries and passes.
    assert len(target.calls_to("/paused")) == 1


async def test_a_hanging_notification_target_is_retried_and_does_not_slow_dispatch(
    cluster: Cluster, target: RecordingTarget
) -> None:
    """Every dead run of one job is sent to a target that never answers (each delivery
    waits for the notifier's 10 s timeout, then backs off); another job every second
    starts on time meanwhile."""
    target.hold("/hung")
    target.script("/broken", status=400)
    tenant = await cluster.tenant()
    await add_channel(tenant, f"{target.url}/hung", [pb.NOTIFICATION_EVENT_KIND_DEAD_RUN])
    await tenant.create_job(http_job("broken", f"{target.url}/broken", every(1)))
    healthy = await tenant.create_job(http_job("healthy", f"{target.url}/ok", every(1)))

    async def hung_deliveries() -> None:
        assert len(target.calls_to("/hung")) >= 5

    await assert_eventually(hung_deliveries, timeout_s=30, interval_s=0.3)
    runs = await runs_with(tenant, healthy.job_id, SUCCEEDED, 5)
    scheduled = [r for r in runs if r.kind == run_pb2.RUN_KIND_SCHEDULED]
    late = [r.lateness.ToTimedelta() for r in scheduled]
    assert max(late) < timedelta(seconds=1), late

    # Released, the held deliveries are answered; each notification is retried under
    # its own key until one attempt lands, and none is lost.
    target.release("/hung")

    async def delivered_again() -> None:
        keys = [c.key for c in target.calls_to("/hung")]
        retried = {k for k in keys if keys.count(k) > 1}
        assert retried, "no notification was retried"

    await assert_eventually(delivered_again, timeout_s=40, interval_s=0.5)
