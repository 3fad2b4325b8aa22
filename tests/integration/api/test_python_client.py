"""``sundial.client.Client`` against a real API server: request ids on writes, pages,
get-by-name, datetimes, typed error details, calendars with ``date`` dates, notification
channels; and gRPC's retry policy retrying UNAVAILABLE (and nothing else) against a
server that fails on purpose."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, timedelta

import grpc
import pytest
from google.rpc import error_details_pb2

from sundial.client import Client, error_details, from_timestamp
from sundial.v1 import calendar_pb2, job_pb2
from sundial.v1 import job_service_pb2 as pb
from tests.integration.api.support import Api, Tenant, make_job


async def test_the_client_wraps_the_job_service(api: Api, tenant: Tenant) -> None:
    def scenario() -> None:
        with Client(api.address, tenant.token) as client:
            created = client.create_job(make_job("nightly"), request_id="create-nightly")
            # The same request id again: the first result, not ALREADY_EXISTS.
            again = client.create_job(make_job("nightly"), request_id="create-nightly")
            assert again.job_id == created.job_id
            for i in range(4):
                client.create_job(make_job(f"report-{i}"))
            # Apply by a client id: created, then unchanged, then updated.
            wanted = make_job("applied", job_id="applied-job")
            job, outcome = client.apply_job(wanted)
            assert (job.job_id, outcome) == ("applied-job", pb.APPLY_OUTCOME_CREATED)
            assert client.apply_job(wanted)[1] == pb.APPLY_OUTCOME_UNCHANGED
            wanted.description = "now described"
            assert client.apply_job(wanted)[1] == pb.APPLY_OUTCOME_UPDATED
            assert client.get_job("applied-job").description == "now described"
            # Every page, in name order.
            names = [job.name for job in client.list_jobs(page_size=2)]
            assert names == ["applied", "nightly", "report-0", "report-1", "report-2", "report-3"]
            assert [j.name for j in client.list_jobs(name_prefix="report-")][-1] == "report-3"
            # By id, or else by exact name.
            assert client.get_job(created.job_id).name == "nightly"
            assert client.get_job("report-2").name == "report-2"
            with pytest.raises(grpc.RpcError) as missing:
                client.get_job("report")  # a prefix is not a name
            assert missing.value.code() in (
                grpc.StatusCode.NOT_FOUND,
                grpc.StatusCode.INVALID_ARGUMENT,
            )
            # Datetimes in and out; the backfill takes every page.
            start = datetime(2026, 1, 1, tzinfo=UTC)
            runs = client.backfill_job(created.job_id, start, start + timedelta(days=3))
            assert [from_timestamp(r.scheduled_at) for r in runs] == [
                start + timedelta(days=d, hours=3) for d in range(3)
            ]
            listed = list(client.list_runs(created.job_id, after=start + timedelta(days=1)))
            assert len(listed) == 2
            with pytest.raises(ValueError, match="naive"):
                client.backfill_job(created.job_id, datetime(2026, 1, 1), datetime(2026, 1, 2))
            # The SLO over chosen windows (no scheduled run yet: nothing due), revisions.
            described = client.describe_job(
                created.job_id, slo_windows=(timedelta(hours=2), timedelta(days=1))
            )
            assert [w.window.ToTimedelta() for w in described.slo] == [
                timedelta(hours=2),
                timedelta(days=1),
            ]
            assert all(w.due == 0 for w in described.slo)
            revisions = [r.job.description for r in client.job_revisions("applied-job")]
            assert revisions[0] == "now described" and len(revisions) == 2
            # Rollback is the server's RollbackJob: version 1's definition, a new version.
            rolled = client.rollback_job("applied-job", 1, expected_version=2)
            assert (rolled.description, rolled.version) == ("", 3)
            with pytest.raises(grpc.RpcError) as stale:
                client.rollback_job("applied-job", 1, expected_version=2)
            assert stale.value.code() == grpc.StatusCode.ABORTED
            # Typed details of an error.
            with pytest.raises(grpc.RpcError) as bad:
                client.create_job(make_job("bad", cron="61 * * * *"))
            details = error_details(bad.value)
            violation = details["BadRequest"]
            assert isinstance(violation, error_details_pb2.BadRequest)
            assert violation.field_violations[0].field == "schedule.cron"

    await asyncio.to_thread(scenario)


async def test_the_client_manages_calendars_and_lists_channels(api: Api, tenant: Tenant) -> None:
    kinds = [pb.NOTIFICATION_EVENT_KIND_DEAD_RUN, pb.NOTIFICATION_EVENT_KIND_LATE_RUN]
    made = []
    for name in ("pager", "chat", "audit"):
        channel = pb.NotificationChannel(
            display_name=name,
            target=job_pb2.Target(http=job_pb2.HttpTarget(url=f"http://127.0.0.1:9/{name}")),
            event_kinds=kinds,
        )
        answer = await api.jobs.CreateNotificationChannel(
            pb.CreateNotificationChannelRequest(channel=channel), metadata=tenant.md
        )
        made.append(answer.channel.channel_id)

    def scenario() -> None:
        with Client(api.address, tenant.token) as client:
            # Dates as dates or strings, the kind by name; stored sorted, deduplicated.
            holidays = client.create_calendar(
                "holidays",
                kind="exclude",
                dates=[date(2027, 1, 1), "12-25", "2026-12-24", "12-25"],
                description="office closed",
            )
            assert list(holidays.dates) == ["2026-12-24", "2027-01-01", "12-25"]
            assert holidays.kind == calendar_pb2.CALENDAR_KIND_EXCLUDE and holidays.version == 1
            for name in ("b-days", "c-days"):
                client.create_calendar(name, kind=calendar_pb2.CALENDAR_KIND_INCLUDE)
            # Every page, by name.
            names = [c.name for c in client.list_calendars(page_size=2)]
            assert names == ["b-days", "c-days", "holidays"]
            assert client.get_calendar("holidays").description == "office closed"
            # An update changes only what it is given and reschedules the jobs naming it.
            job = make_job("closed-on-holidays")
            job.schedule.calendars.append("holidays")
            client.create_job(job)
            changed, rescheduled = client.update_calendar(
                "holidays", dates=[date(2028, 5, 1)], expected_version=1
            )
            assert list(changed.dates) == ["2028-05-01"] and rescheduled == 1
            assert changed.description == "office closed" and changed.version == 2
            changed, rescheduled = client.update_calendar("b-days", kind="INCLUDE", description="")
            assert (changed.kind, changed.description, rescheduled) == (
                calendar_pb2.CALENDAR_KIND_INCLUDE,
                "",
                0,
            )
            with pytest.raises(grpc.RpcError) as stale:
                client.update_calendar("holidays", description="x", expected_version=1)
            assert stale.value.code() == grpc.StatusCode.ABORTED
            with pytest.raises(ValueError, match="needs kind, dates or description"):
                client.update_calendar("holidays")
            with pytest.raises(ValueError, match="not a calendar kind"):
                client.create_calendar("bad", kind="holiday")
            with pytest.raises(TypeError, match="local dates"):
                client.create_calendar("bad", kind="exclude", dates=[datetime(2027, 1, 1)])
            with pytest.raises(grpc.RpcError) as bad:
                client.create_calendar("bad", kind="exclude", dates=["12-25", "2027-13-01"])
            violation = error_details(bad.value)["BadRequest"]
            assert isinstance(violation, error_details_pb2.BadRequest)
            assert violation.field_violations[0].field == "calendar.dates[1]"
            # Named by a schedule: not deletable; unnamed: deleted.
            with pytest.raises(grpc.RpcError) as named:
                client.delete_calendar("holidays")
            assert named.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            client.delete_calendar("c-days")
            assert [c.name for c in client.list_calendars()] == ["b-days", "holidays"]
            with pytest.raises(grpc.RpcError) as gone:
                client.get_calendar("c-days")
            assert gone.value.code() == grpc.StatusCode.NOT_FOUND
            # Channels: every page, by display name; one by id.
            channels = list(client.list_notification_channels(page_size=2))
            assert [c.display_name for c in channels] == ["audit", "chat", "pager"]
            pager = client.get_notification_channel(made[0])
            assert pager.display_name == "pager" and list(pager.event_kinds) == kinds

    await asyncio.to_thread(scenario)


class _Flaky:
    """A JobService whose ListJobs fails with ``code`` ``failures`` times, then answers."""

    def __init__(self, code: grpc.StatusCode, failures: int) -> None:
        self.code, self.failures, self.calls = code, failures, 0

    async def list_jobs(
        self, request: pb.ListJobsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListJobsResponse:
        self.calls += 1
        if self.calls <= self.failures:
            await context.abort(self.code, "on purpose")
        return pb.ListJobsResponse()


@pytest.fixture
async def flaky_server() -> AsyncIterator[tuple[grpc.aio.Server, int]]:
    server = grpc.aio.server()
    port = server.add_insecure_port("127.0.0.1:0")
    yield server, port
    await server.stop(0)


@pytest.mark.parametrize(
    ("code", "failures", "calls", "succeeds"),
    [
        (grpc.StatusCode.UNAVAILABLE, 2, 3, True),  # retried, then answered
        (grpc.StatusCode.UNAVAILABLE, 9, 4, False),  # at most 4 attempts
        (grpc.StatusCode.INVALID_ARGUMENT, 1, 1, False),  # never retried
    ],
)
async def test_unavailable_is_retried_by_the_grpc_retry_policy(
    flaky_server: tuple[grpc.aio.Server, int],
    code: grpc.StatusCode,
    failures: int,
    calls: int,
    succeeds: bool,
) -> None:
    server, port = flaky_server
    flaky = _Flaky(code, failures)
    handler = grpc.unary_unary_rpc_method_handler(
        flaky.list_jobs,
        request_deserializer=pb.ListJobsRequest.FromString,
        response_serializer=pb.ListJobsResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("sundial.v1.JobService", {"ListJobs": handler}),)
    )
    await server.start()

    def call() -> None:
        with Client(f"127.0.0.1:{port}", "t", timeout_s=20) as client:
            list(client.list_jobs())

    if succeeds:
        await asyncio.to_thread(call)
    else:
        with pytest.raises(grpc.RpcError) as failed:
            await asyncio.to_thread(call)
        assert failed.value.code() == code
    assert flaky.calls == calls
