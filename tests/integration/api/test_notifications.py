"""Notification channels through JobService, and the API's notifier delivering what the
outbox holds to a real HTTP target (docs/design.md section 12): validation naming the
field, tenancy, the failure policy read back with its default, signed deliveries with a
stable idempotency key, retries with backoff, digests."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime
from typing import Any

import grpc
import pytest
from google.protobuf import duration_pb2, field_mask_pb2

from sundial.client import verify_signature
from sundial.v1 import admin_pb2, egress_pb2, job_pb2
from sundial.v1 import job_service_pb2 as pb
from tests.helpers.eventually import assert_eventually
from tests.helpers.grpc_target import GrpcTargetServer
from tests.helpers.target_server import RecordingTarget
from tests.integration.api.support import Api, StartApi, Tenant, expect_error, make_job
from tests.integration.api.test_client_ids import details

pytestmark = pytest.mark.timeout(60)

INVALID = grpc.StatusCode.INVALID_ARGUMENT
DEAD = pb.NOTIFICATION_EVENT_KIND_DEAD_RUN
PAUSED = pb.NOTIFICATION_EVENT_KIND_AUTO_PAUSED


def channel(
    name: str = "ops", url: str = "http://127.0.0.1:9/notify", *, window_s: int = 0, **fields: Any
) -> pb.NotificationChannel:
    message = pb.NotificationChannel(
        display_name=name,
        target=job_pb2.Target(http=job_pb2.HttpTarget(url=url)),
        event_kinds=fields.pop("kinds", [DEAD, PAUSED]),
        digest_window=duration_pb2.Duration(seconds=window_s),
    )
    for key, value in fields.items():
        setattr(message, key, value)
    return message


async def create(
    api: Api, tenant: Tenant, message: pb.NotificationChannel
) -> pb.NotificationChannel:
    answer = await api.jobs.CreateNotificationChannel(
        pb.CreateNotificationChannelRequest(channel=message), metadata=tenant.md
    )
    return answer.channel


async def test_channels_are_created_read_listed_updated_and_deleted_per_tenant(
    api: Api, tenant: Tenant
) -> None:
    made = await create(api, tenant, channel("ops", window_s=60))
    assert uuid.UUID(made.channel_id) and made.version == 1
    assert list(made.event_kinds) == [DEAD, PAUSED]
    assert made.digest_window.seconds == 60
    got = await api.jobs.GetNotificationChannel(
        pb.GetNotificationChannelRequest(channel_id=made.channel_id), metadata=tenant.md
    )
    assert got.channel == made
    await create(api, tenant, channel("billing"))
    listed = await api.jobs.ListNotificationChannels(
        pb.ListNotificationChannelsRequest(page_size=1), metadata=tenant.md
    )
    assert [c.display_name for c in listed.channels] == ["billing"]
    rest = await api.jobs.ListNotificationChannels(
        pb.ListNotificationChannelsRequest(page_size=1, page_token=listed.next_page_token),
        metadata=tenant.md,
    )
    assert [c.display_name for c in rest.channels] == ["ops"] and not rest.next_page_token
    await expect_error(
        create(api, tenant, channel("ops")),
        grpc.StatusCode.ALREADY_EXISTS,
        field="channel.display_name",
    )
    update = pb.UpdateNotificationChannelRequest(
        channel=pb.NotificationChannel(
            channel_id=made.channel_id,
            event_kinds=[pb.NOTIFICATION_EVENT_KIND_MISFIRE_SKIPPED],
            display_name="ignored: not in the mask",
        ),
        update_mask=field_mask_pb2.FieldMask(paths=["event_kinds", "digest_window"]),
        expected_version=1,
    )
    changed = (await api.jobs.UpdateNotificationChannel(update, metadata=tenant.md)).channel
    assert changed.version == 2 and changed.display_name == "ops"
    assert list(changed.event_kinds) == [pb.NOTIFICATION_EVENT_KIND_MISFIRE_SKIPPED]
    assert changed.digest_window.seconds == 0
    await expect_error(
        api.jobs.UpdateNotificationChannel(update, metadata=tenant.md), grpc.StatusCode.ABORTED
    )
    # Another tenant cannot see or touch it.
    other = await api.tenant()
    for call in (
        api.jobs.GetNotificationChannel(
            pb.GetNotificationChannelRequest(channel_id=made.channel_id), metadata=other.md
        ),
        api.jobs.DeleteNotificationChannel(
            pb.DeleteNotificationChannelRequest(channel_id=made.channel_id), metadata=other.md
        ),
    ):
        await expect_error(call, grpc.StatusCode.NOT_FOUND)
    await api.jobs.DeleteNotificationChannel(
        pb.DeleteNotificationChannelRequest(channel_id=made.channel_id), metadata=tenant.md
    )
    await expect_error(
        api.jobs.GetNotificationChannel(
            pb.GetNotificationChannelRequest(channel_id=made.channel_id), metadata=tenant.md
        ),
        grpc.StatusCode.NOT_FOUND,
    )
    # Channel writes are audited like every write.
    methods = [
        (r["method"].rsplit("/", 1)[1], r["resource"])
        for r in await api.sql(
            "SELECT method, resource FROM audit_events WHERE tenant_id = $1 ORDER BY event_id",
            tenant.tenant_id,
        )
    ]
    assert ("DeleteNotificationChannel", made.channel_id) in methods
    assert ("CreateNotificationChannel", "ops") in methods


async def test_a_tenant_has_at_most_twenty_channels_even_when_created_at_once(
    api: Api, tenant: Tenant
) -> None:
    """25 creates at once: 20 are stored, 5 refused RESOURCE_EXHAUSTED naming the quota
    (as max_jobs is), nothing half-written; another tenant is not limited by them, and a
    deleted channel makes room."""
    results = await asyncio.gather(
        *(create(api, tenant, channel(f"ch-{i:02}")) for i in range(25)), return_exceptions=True
    )
    made = [r for r in results if isinstance(r, pb.NotificationChannel)]
    refused = [r for r in results if isinstance(r, grpc.aio.AioRpcError)]
    assert (len(made), len(refused)) == (20, 5), results
    for exc in refused:
        assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "limit of 20 notification channels" in (exc.details() or "")
        info = details(exc)["ErrorInfo"]
        assert info.reason == "QUOTA_EXCEEDED"
        assert (info.metadata["quota"], info.metadata["limit"]) == (
            "max_notification_channels",
            "20",
        )
    count = await api.sql(
        "SELECT count(*) AS n FROM notification_channels WHERE tenant_id = $1", tenant.tenant_id
    )
    assert count[0]["n"] == 20
    other = await api.tenant()
    await create(api, other, channel("ch-00"))
    await api.jobs.DeleteNotificationChannel(
        pb.DeleteNotificationChannelRequest(channel_id=made[0].channel_id), metadata=tenant.md
    )
    await create(api, tenant, channel("again"))


def _mutated(**fields: Any) -> pb.NotificationChannel:
    message = channel()
    for path, value in fields.items():
        *parents, leaf = path.split("__")
        target: Any = message
        for part in parents:
            target = getattr(target, part)
        if leaf in ("event_kinds",):
            del target.event_kinds[:]
            target.event_kinds.extend(value)
        elif hasattr(value, "DESCRIPTOR"):
            getattr(target, leaf).CopyFrom(value)
        else:
            setattr(target, leaf, value)
    return message


CASES: dict[str, tuple[pb.NotificationChannel, str]] = {
    "no name": (_mutated(display_name=""), "channel.display_name"),
    "long name": (_mutated(display_name="x" * 201), "channel.display_name"),
    "control in name": (_mutated(display_name="a\nb"), "channel.display_name"),
    "no target": (_mutated(target=job_pb2.Target()), "channel.target"),
    "bad url": (_mutated(target__http__url="ftp://127.0.0.1/x"), "channel.target.http.url"),
    "private address": (
        _mutated(target__http__url="http://10.1.2.3/x"),
        "channel.target.http.url",
    ),
    "metadata address": (
        _mutated(target__http__url="http://169.254.169.254/"),
        "channel.target.http.url",
    ),
    "reserved header": (
        _mutated(
            target=job_pb2.Target(
                http=job_pb2.HttpTarget(
                    url="http://127.0.0.1:9/n", headers={"Idempotency-Key": "x"}
                )
            )
        ),
        "channel.target.http.headers['Idempotency-Key']",
    ),
    "no kinds": (_mutated(event_kinds=[]), "channel.event_kinds"),
    "unspecified kind": (_mutated(event_kinds=[0]), "channel.event_kinds[0]"),
    "unknown kind": (_mutated(event_kinds=[DEAD, 99]), "channel.event_kinds[1]"),
    "twice": (_mutated(event_kinds=[DEAD, DEAD]), "channel.event_kinds"),
    "window too long": (
        _mutated(digest_window=duration_pb2.Duration(seconds=3601)),
        "channel.digest_window",
    ),
    "window fraction": (
        _mutated(digest_window=duration_pb2.Duration(seconds=1, nanos=500_000_000)),
        "channel.digest_window",
    ),
    "window negative": (
        _mutated(digest_window=duration_pb2.Duration(seconds=-1)),
        "channel.digest_window",
    ),
}


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("case", sorted(CASES))
async def test_bad_channels_are_refused_naming_the_field(
    shared_api: Api, shared_tenant: Tenant, case: str
) -> None:
    message, field = CASES[case]
    await expect_error(create(shared_api, shared_tenant, message), INVALID, field=field)
    assert not await shared_api.sql(
        "SELECT 1 FROM notification_channels WHERE tenant_id = $1", shared_tenant.tenant_id
    )


async def test_bad_updates_and_ids_are_refused_naming_the_field(api: Api, tenant: Tenant) -> None:
    made = await create(api, tenant, channel())
    for mask, field in ((["version"], "update_mask.paths[0]"), ([], "channel.display_name")):
        await expect_error(
            api.jobs.UpdateNotificationChannel(
                pb.UpdateNotificationChannelRequest(
                    channel=pb.NotificationChannel(channel_id=made.channel_id),
                    update_mask=field_mask_pb2.FieldMask(paths=mask),
                ),
                metadata=tenant.md,
            ),
            INVALID,
            field=field,
        )
    await expect_error(
        api.jobs.UpdateNotificationChannel(
            pb.UpdateNotificationChannelRequest(
                channel=pb.NotificationChannel(channel_id=made.channel_id),
                update_mask=field_mask_pb2.FieldMask(paths=["event_kinds"]),
            ),
            metadata=tenant.md,
        ),
        INVALID,
        field="channel.event_kinds",
    )
    await expect_error(
        api.jobs.GetNotificationChannel(
            pb.GetNotificationChannelRequest(channel_id="nope"), metadata=tenant.md
        ),
        INVALID,
        field="channel_id",
    )
    assert (await api.sql("SELECT version FROM notification_channels"))[0]["version"] == 1


async def test_the_failure_policy_is_read_back_with_its_default(api: Api, tenant: Tenant) -> None:
    plain = await api.jobs.CreateJob(pb.CreateJobRequest(job=make_job("plain")), metadata=tenant.md)
    assert plain.job.policies.failure.pause_after_consecutive_dead == 0
    job = make_job("careful")
    job.policies.failure.pause_after_consecutive_dead = 3
    made = await api.jobs.CreateJob(pb.CreateJobRequest(job=job), metadata=tenant.md)
    got = await api.jobs.GetJob(pb.GetJobRequest(job_id=made.job.uid), metadata=tenant.md)
    assert got.job.policies.failure.pause_after_consecutive_dead == 3


async def add_event(api: Api, channel_id: str, tenant: Tenant, kind: str, run_key: str) -> None:
    """An event as the scheduler's outbox writes it, due now."""
    now = datetime.now(UTC)
    await api.sql(
        "INSERT INTO notification_events (channel_id, tenant_id, kind, job_id, detail,"
        " occurred_at, due_at) VALUES ($1, $2, $3, $4, $5::jsonb, $6, $6)",
        uuid.UUID(channel_id),
        tenant.tenant_id,
        kind,
        uuid.uuid4(),
        json.dumps({"run_key": run_key, "error": "HTTP 500"}),
        now,
    )


async def test_a_failing_notification_target_is_retried_with_the_same_key_and_signature(
    start_api: StartApi,
) -> None:
    api = await start_api(notify_interval_s=0.1)
    tenant = await api.tenant()
    async with RecordingTarget() as target:
        target.script("/notify", status=503)
        made = await create(api, tenant, channel(url=f"{target.url}/notify"))
        await add_event(api, made.channel_id, tenant, "dead_run", "job@2030-01-01T00:00:00Z")

        async def failed_twice() -> None:
            assert len(target.calls_to("/notify")) >= 2

        await assert_eventually(failed_twice, timeout_s=20, what="two failed deliveries")
        target.script("/notify", status=200)

        async def delivered() -> None:
            rows = await api.sql("SELECT state FROM notifications")
            assert [r["state"] for r in rows] == ["delivered"]

        await assert_eventually(delivered, timeout_s=20, what="the delivery")
        calls = target.calls_to("/notify")
        assert [c.attempt for c in calls] == list(range(1, len(calls) + 1))
        assert len({c.key for c in calls}) == 1  # one notification, one idempotency key
        for call in calls:
            verify_signature(
                call.request.headers["sundial-signature"],
                secrets=[tenant.signing_secret],
                idempotency_key=call.key or "",
                attempt=call.attempt,
                body=call.request.body,
            )
        body = json.loads(calls[-1].request.body)
        assert body["notification_id"] == calls[-1].key
        assert body["event_count"] == 1 and body["omitted"] == 0
        [event] = body["events"]
        assert (event["kind"], event["run_key"]) == ("dead_run", "job@2030-01-01T00:00:00Z")
        assert calls[-1].request.headers["content-type"] == "application/json"
        assert calls[-1].request.headers["user-agent"] == "sundial-notifier/1"
        # Delivered once it succeeded: it is no longer due, and every attempt was a call.
        [row] = await api.sql("SELECT state, attempt FROM notifications")
        assert (row["state"], row["attempt"]) == ("delivered", len(calls))


async def test_a_grpc_channel_gets_the_notification_as_a_signed_execute_call(
    start_api: StartApi,
) -> None:
    api = await start_api(notify_interval_s=0.1)
    tenant = await api.tenant()
    async with GrpcTargetServer() as server:
        message = channel(kinds=[pb.NOTIFICATION_EVENT_KIND_LATE_RUN])
        message.target.CopyFrom(
            job_pb2.Target(grpc=job_pb2.GrpcTarget(address=server.address, plaintext=True))
        )
        made = await create(api, tenant, message)
        await add_event(api, made.channel_id, tenant, "late_run", "job@2030-01-01T00:00:00Z")

        async def called() -> None:
            assert server.calls

        await assert_eventually(called, timeout_s=20, what="the Execute call")
        [call] = server.calls
        request = call.request
        assert request.idempotency_key == call.metadata["idempotency-key"]
        assert request.tenant_id == tenant.tenant_id and request.attempt == 1
        verify_signature(
            call.metadata["sundial-signature"],
            secrets=[tenant.signing_secret],
            idempotency_key=request.idempotency_key,
            attempt=request.attempt,
            body=request.payload,
        )
        body = json.loads(request.payload)
        assert body["notification_id"] == request.idempotency_key
        assert [e["kind"] for e in body["events"]] == ["late_run"]

        async def delivered() -> None:
            rows = await api.sql("SELECT state FROM notifications")
            assert [r["state"] for r in rows] == ["delivered"]

        await assert_eventually(delivered, timeout_s=10, what="the delivery recorded")


async def test_resume_starts_the_dead_count_again(api: Api, tenant: Tenant) -> None:
    job = make_job("flaky")
    job.policies.failure.pause_after_consecutive_dead = 2
    made = (await api.jobs.CreateJob(pb.CreateJobRequest(job=job), metadata=tenant.md)).job
    await api.jobs.PauseJob(pb.PauseJobRequest(job_id=made.uid, note="x"), metadata=tenant.md)
    # As the failure policy leaves it (the ledger's count, a pause it had due).
    marked = await api.sql(
        "UPDATE job_stats SET consecutive_dead = 2, pause_due = true, pause_reason = 'r'"
        " WHERE job_id = $1 RETURNING 1",
        uuid.UUID(made.uid),
    )
    assert len(marked) == 1
    await api.jobs.ResumeJob(
        pb.ResumeJobRequest(job_id=made.uid, expected_version=2), metadata=tenant.md
    )
    [row] = await api.sql(
        "SELECT consecutive_dead, pause_due FROM job_stats WHERE job_id = $1", uuid.UUID(made.uid)
    )
    assert (row["consecutive_dead"], row["pause_due"]) == (0, False)


async def test_the_egress_policy_is_applied_again_at_delivery(start_api: StartApi) -> None:
    """A channel written while loopback was allowed to the tenant; then the tenant gets a
    policy of its own without it: the delivery is refused at connection time, given up
    at once (a forbidden target stays forbidden), and the target never called."""
    api = await start_api(notify_interval_s=0.1)
    tenant = await api.tenant()
    async with RecordingTarget() as target:
        made = await create(api, tenant, channel(url=f"{target.url}/notify"))
        await api.admin.SetTenantEgressPolicy(
            admin_pb2.SetTenantEgressPolicyRequest(
                tenant_id=tenant.tenant_id,
                policy=egress_pb2.EgressPolicy(rules=[egress_pb2.EgressRule(cidr="10.9.0.0/16")]),
            ),
            metadata=api.admin_md,
        )
        await add_event(api, made.channel_id, tenant, "dead_run", "job@2030-01-01T00:00:00Z")

        async def given_up() -> None:
            rows = await api.sql("SELECT state, attempt, last_error FROM notifications")
            assert len(rows) == 1, rows
            row = rows[0]
            assert (row["state"], row["attempt"]) == ("failed", 1), row["last_error"]
            assert "127.0.0.1" in row["last_error"]

        await assert_eventually(given_up, timeout_s=20, what="the refused delivery")
        assert target.calls == []


async def test_a_tenants_hanging_channels_leave_another_tenants_notifications_prompt(
    start_api: StartApi,
) -> None:
    # A's eight channels never answer, so each of A's sends holds a slot for the whole
    # timeout; B's notification, made while they hang, is delivered on the next pass:
    # a tenant holds at most a quarter of the notifier's slots, and a pass does not wait
    # for the sends of the one before.
    api = await start_api(notify_interval_s=0.1, notify_timeout_s=30, notify_concurrency=4)
    a, b = await api.tenant(), await api.tenant()
    async with RecordingTarget() as target:
        target.script("/hang", delay_s=60)
        hanging = [
            await create(api, a, channel(f"a-{i}", url=f"{target.url}/hang")) for i in range(8)
        ]
        for i, made in enumerate(hanging):
            await add_event(api, made.channel_id, a, "dead_run", f"job@2030-01-01T00:0{i}:00Z")

        async def a_hangs() -> None:
            assert target.calls_to("/hang")

        await assert_eventually(a_hangs, timeout_s=10, what="A's sends in flight")
        fast = await create(api, b, channel("b", url=f"{target.url}/fast"))
        await add_event(api, fast.channel_id, b, "dead_run", "job@2030-01-01T01:00:00Z")

        async def b_delivered() -> None:
            rows = await api.sql(
                "SELECT state FROM notifications WHERE channel_id = $1",
                uuid.UUID(fast.channel_id),
            )
            assert [r["state"] for r in rows] == ["delivered"]

        # Well within A's 30 s timeout: B never waited for one of A's sends to end.
        await assert_eventually(b_delivered, timeout_s=10, what="B's notification")
        assert len(target.calls_to("/fast")) == 1
        assert len(target.calls_to("/hang")) == 1  # a quarter of 4 slots: one of A's at once


async def test_a_backlog_of_notifications_goes_out_as_fast_as_its_sends_end(
    start_api: StartApi,
) -> None:
    # The notifier does not wait for a pass's sends; behind a backlog it claims again as
    # slots free up, not only every interval (5 s here): twenty notifications of one
    # tenant, sent one at a time (its quarter of four slots), all go out within seconds.
    api = await start_api(notify_interval_s=5, notify_concurrency=4)
    tenant = await api.tenant()
    async with RecordingTarget() as target:
        channels = [
            await create(api, tenant, channel(f"ops-{i}", url=f"{target.url}/notify"))
            for i in range(10)
        ]
        for i, made in enumerate(channels):
            for j in range(2):
                await add_event(api, made.channel_id, tenant, "dead_run", f"job@{i}-{j}")

        async def all_delivered() -> None:
            rows = await api.sql("SELECT state, last_error FROM notifications")
            assert [r["state"] for r in rows] == ["delivered"] * 20, {r["last_error"] for r in rows}

        await assert_eventually(all_delivered, timeout_s=10, what="the backlog's deliveries")
        assert len(target.calls_to("/notify")) == 20
