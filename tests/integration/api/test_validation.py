"""Every validation rule: INVALID_ARGUMENT naming the field, and nothing written.

Each case mutates a valid job into an invalid one; CreateJob must refuse it with a
message starting with the field's path, and every table a create touches must be as it
was. A selection goes through UpdateJob too, which must leave the job at version 1.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import grpc
import pytest
import pytest_asyncio
from google.protobuf import duration_pb2, field_mask_pb2, timestamp_pb2

from sundial.v1 import job_pb2
from sundial.v1 import job_service_pb2 as pb
from tests.integration.api.support import Api, Tenant, expect_error, make_job

INVALID = grpc.StatusCode.INVALID_ARGUMENT

# Nothing here writes (that is the point), so every case shares one server and database.
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module")
async def api(shared_api: Api) -> Api:
    """The module's shared server."""
    return shared_api


@pytest_asyncio.fixture(loop_scope="module")
async def tenant(shared_api: Api) -> Tenant:
    """A new tenant per case, so names never clash between cases."""
    return await shared_api.tenant()


Mutation = Callable[[job_pb2.Job], None]


def _d(seconds: float) -> duration_pb2.Duration:
    message = duration_pb2.Duration()
    message.FromTimedelta(timedelta(seconds=seconds))
    return message


def _ts(value: datetime) -> timestamp_pb2.Timestamp:
    message = timestamp_pb2.Timestamp()
    message.FromDatetime(value)
    return message


def _set(path: str, value: object) -> Mutation:
    def mutate(job: job_pb2.Job) -> None:
        *parents, leaf = path.split(".")
        target = job
        for part in parents:
            target = getattr(target, part)
        if hasattr(value, "DESCRIPTOR"):
            getattr(target, leaf).CopyFrom(value)
        else:
            setattr(target, leaf, value)

    return mutate


def _update_map(path: str, entries: dict[str, str]) -> Mutation:
    def mutate(job: job_pb2.Job) -> None:
        target = job
        for part in path.split("."):
            target = getattr(target, part)
        target.update(entries)

    return mutate


def _clear(path: str) -> Mutation:
    def mutate(job: job_pb2.Job) -> None:
        *parents, leaf = path.split(".")
        target = job
        for part in parents:
            target = getattr(target, part)
        target.ClearField(leaf)

    return mutate


def _interval(every: float, offset: float = 0, jitter: float = 0) -> Mutation:
    def mutate(job: job_pb2.Job) -> None:
        job.schedule.interval.every.CopyFrom(_d(every))
        job.schedule.interval.offset.CopyFrom(_d(offset))
        job.schedule.jitter.CopyFrom(_d(jitter))

    return mutate


def _fixed_delay(offset: float = 0, *, listed: bool = False, misfire: int = 0) -> Mutation:
    """A fixed-delay interval of a minute (docs/design.md section 4, "Fixed delay")."""

    def mutate(job: job_pb2.Job) -> None:
        interval = job_pb2.IntervalSchedule(every=_d(60), offset=_d(offset), from_end=True)
        if listed:
            job.schedule.specs.add(interval=interval)
            job.schedule.ClearField("cron")
        else:
            job.schedule.interval.CopyFrom(interval)
        job.policies.misfire = misfire  # type: ignore[assignment]

    return mutate


def _grpc(address: str, **metadata: str) -> Mutation:
    def mutate(job: job_pb2.Job) -> None:
        job.target.grpc.address = address
        job.target.grpc.metadata.update(metadata)

    return mutate


NOW = datetime.now(UTC)

CASES: dict[str, tuple[Mutation, str]] = {
    # name, description, payload, labels, pause note
    "name empty": (_set("name", ""), "name"),
    "name too long": (_set("name", "n" * 201), "name"),
    "name control char": (_set("name", "a\nb"), "name"),
    "description too long": (_set("description", "d" * 2001), "description"),
    "payload too big": (_set("payload", b"p" * (256 * 1024 + 1)), "payload"),
    "too many labels": (_update_map("labels", {f"k{i}": "v" for i in range(65)}), "labels"),
    "label key case": (_update_map("labels", {"Team": "x"}), "labels['Team']"),
    "label key too long": (_update_map("labels", {"k" * 64: "x"}), f"labels['{'k' * 64}']"),
    "label value too long": (_update_map("labels", {"team": "v" * 257}), "labels['team']"),
    "pause note too long": (_set("pause_note", "x" * 1025), "pause_note"),
    "description NUL": (_set("description", "a\x00b"), "description"),
    "pause note NUL": (_set("pause_note", "\x00"), "pause_note"),
    # schedule
    "schedule missing": (_clear("schedule"), "schedule"),
    "schedule no spec": (_clear("schedule.cron"), "schedule"),
    "cron empty": (_set("schedule.cron", ""), "schedule.cron"),
    "cron out of range": (_set("schedule.cron", "61 * * * *"), "schedule.cron"),
    "cron garbage": (_set("schedule.cron", "every day"), "schedule.cron"),
    "cron too long": (_set("schedule.cron", "0 " + "1," * 130 + "1 * * *"), "schedule.cron"),
    "unknown zone": (_set("schedule.time_zone", "Mars/Olympus"), "schedule.time_zone"),
    "fixed offset zone": (_set("schedule.time_zone", "+02:00"), "schedule.time_zone"),
    "interval zero": (_interval(0), "schedule.interval.every"),
    "interval fractional": (_interval(1.5), "schedule.interval.every"),
    "interval too long": (_interval(367 * 86400), "schedule.interval.every"),
    "offset not below every": (_interval(60, 60), "schedule.interval.offset"),
    "offset fractional": (_interval(60, 0.5), "schedule.interval.offset"),
    "fixed delay with an offset": (_fixed_delay(5), "schedule.interval.offset"),
    "fixed delay in a list": (_fixed_delay(listed=True), "schedule.specs[0].interval.from_end"),
    "fixed delay skipping misfires": (
        _fixed_delay(misfire=job_pb2.MISFIRE_POLICY_SKIP),
        "policies.misfire",
    ),
    "fixed delay catching up": (
        _fixed_delay(misfire=job_pb2.MISFIRE_POLICY_CATCH_UP),
        "policies.misfire",
    ),
    "jitter not below every": (_interval(60, 0, 60), "schedule.jitter"),
    "jitter too long": (_set("schedule.jitter", _d(3601)), "schedule.jitter"),
    "jitter negative": (_set("schedule.jitter", _d(-1)), "schedule.jitter"),
    # Due times of `* * * * *` with 30 min jitter would overtake one another.
    "cron jitter not below spacing": (
        lambda job: (
            setattr(job.schedule, "cron", "* * * * *"),
            job.schedule.jitter.CopyFrom(_d(60)),
        ),
        "schedule.jitter",
    ),
    "once at the end of time": (
        _set("schedule.once", _ts(datetime(9999, 12, 31, 23, 59, tzinfo=UTC))),
        "schedule.once",
    ),
    "end_time at the end of time": (
        _set("schedule.end_time", _ts(datetime(9999, 6, 1, tzinfo=UTC))),
        "schedule.end_time",
    ),
    "once in the past": (
        _set("schedule.once", _ts(NOW - timedelta(minutes=5))),
        "schedule.once",
    ),
    "once out of range": (
        _set("schedule.once", timestamp_pb2.Timestamp(seconds=-70_000_000_000)),
        "schedule.once",
    ),
    "end before start": (
        lambda job: (
            job.schedule.start_time.CopyFrom(_ts(NOW + timedelta(days=2))),
            job.schedule.end_time.CopyFrom(_ts(NOW + timedelta(days=1))),
        ),
        "schedule.end_time",
    ),
    "max_runs negative": (_set("schedule.max_runs", -1), "schedule.max_runs"),
    "max_runs too big": (_set("schedule.max_runs", 1_000_000_001), "schedule.max_runs"),
    "gap policy unknown": (_set("schedule.dst.gap", 9), "schedule.dst.gap"),
    "fold policy unknown": (_set("schedule.dst.fold", 9), "schedule.dst.fold"),
    # HTTP target
    "target missing": (_clear("target"), "target"),
    "url empty": (_set("target.http.url", ""), "target.http.url"),
    "url scheme": (_set("target.http.url", "ftp://example.com/x"), "target.http.url"),
    "url relative": (_set("target.http.url", "/hook"), "target.http.url"),
    "url user info": (_set("target.http.url", "http://u:p@127.0.0.1/x"), "target.http.url"),
    "url no host": (_set("target.http.url", "http:///x"), "target.http.url"),
    "url bad port": (_set("target.http.url", "http://127.0.0.1:99999/"), "target.http.url"),
    "url whitespace": (_set("target.http.url", "http://127.0.0.1/a b"), "target.http.url"),
    "url too long": (_set("target.http.url", "http://127.0.0.1/" + "a" * 2040), "target.http.url"),
    "url bad host": (_set("target.http.url", "http://bad_host!/x"), "target.http.url"),
    "method": (_set("target.http.method", "TRACE"), "target.http.method"),
    "too many headers": (
        _update_map("target.http.headers", {f"X-H{i}": "v" for i in range(33)}),
        "target.http.headers",
    ),
    "header name": (
        _update_map("target.http.headers", {"Bad Header": "v"}),
        "target.http.headers['Bad Header']",
    ),
    "header idempotency": (
        _update_map("target.http.headers", {"Idempotency-Key": "v"}),
        "target.http.headers['Idempotency-Key']",
    ),
    "header sundial": (
        _update_map("target.http.headers", {"Sundial-Attempt": "9"}),
        "target.http.headers['Sundial-Attempt']",
    ),
    "header host": (
        _update_map("target.http.headers", {"host": "evil"}),
        "target.http.headers['host']",
    ),
    "header value newline": (
        _update_map("target.http.headers", {"X-A": "a\r\nInjected: 1"}),
        "target.http.headers['X-A']",
    ),
    "header twice": (
        _update_map("target.http.headers", {"X-A": "1", "x-a": "2"}),
        "target.http.headers['x-a']",
    ),
    "header too big": (
        _update_map("target.http.headers", {"X-Big": "v" * 8192}),
        "target.http.headers['X-Big']",
    ),
    # gRPC target
    "grpc address empty": (_grpc(""), "target.grpc.address"),
    "grpc address no port": (_grpc("127.0.0.1"), "target.grpc.address"),
    "grpc address bad port": (_grpc("127.0.0.1:0"), "target.grpc.address"),
    "grpc address bare v6": (_grpc("::1:50051"), "target.grpc.address"),
    "grpc address bad v6": (_grpc("[::zz]:50051"), "target.grpc.address"),
    "grpc address bracketed name": (_grpc("[example.com]:443"), "target.grpc.address"),
    "grpc address bad host": (_grpc("bad_host!:443"), "target.grpc.address"),
    # str.isdigit() is true for "\u00b2", which int() refuses: INVALID_ARGUMENT, not INTERNAL.
    "grpc address unicode port": (_grpc("127.0.0.1:\u00b2"), "target.grpc.address"),
    "grpc metadata case": (
        _grpc("127.0.0.1:1", **{"X-Team": "a"}),
        "target.grpc.metadata['X-Team']",
    ),
    "grpc metadata grpc-": (
        _grpc("127.0.0.1:1", **{"grpc-timeout": "1"}),
        "target.grpc.metadata['grpc-timeout']",
    ),
    "grpc metadata -bin": (_grpc("127.0.0.1:1", **{"x-bin": "1"}), "target.grpc.metadata['x-bin']"),
    "grpc metadata reserved": (
        _grpc("127.0.0.1:1", **{"traceparent": "1"}),
        "target.grpc.metadata['traceparent']",
    ),
    "grpc metadata value": (
        _grpc("127.0.0.1:1", **{"x-a": "caf\u00e9"}),
        "target.grpc.metadata['x-a']",
    ),
    # policies
    "misfire unknown": (_set("policies.misfire", 9), "policies.misfire"),
    "overlap unknown": (_set("policies.overlap", 9), "policies.overlap"),
    "threshold zero": (_set("policies.misfire_threshold", _d(0)), "policies.misfire_threshold"),
    "threshold too long": (
        _set("policies.misfire_threshold", _d(86401)),
        "policies.misfire_threshold",
    ),
    "catchup window": (_set("policies.catchup_window", _d(31 * 86400)), "policies.catchup_window"),
    "max_catchup": (_set("policies.max_catchup", 1001), "policies.max_catchup"),
    "max_attempts": (_set("policies.retry.max_attempts", 101), "policies.retry.max_attempts"),
    "base_delay short": (_set("policies.retry.base_delay", _d(0.5)), "policies.retry.base_delay"),
    "base_delay long": (_set("policies.retry.base_delay", _d(3601)), "policies.retry.base_delay"),
    "max_delay below base": (
        _set("policies.retry.max_delay", _d(5)),
        "policies.retry.max_delay",
    ),
    "max_delay long": (_set("policies.retry.max_delay", _d(86401)), "policies.retry.max_delay"),
    "run_timeout short": (_set("policies.run_timeout", _d(0.5)), "policies.run_timeout"),
    "run_timeout long": (_set("policies.run_timeout", _d(86401)), "policies.run_timeout"),
    "lateness_threshold short": (
        _set("policies.lateness_threshold", _d(0.5)),
        "policies.lateness_threshold",
    ),
    "lateness_threshold long": (
        _set("policies.lateness_threshold", _d(86401)),
        "policies.lateness_threshold",
    ),
    "lateness_threshold negative": (
        _set("policies.lateness_threshold", _d(-1)),
        "policies.lateness_threshold",
    ),
    "pause after dead negative": (
        _set("policies.failure.pause_after_consecutive_dead", -1),
        "policies.failure.pause_after_consecutive_dead",
    ),
    "pause after dead too many": (
        _set("policies.failure.pause_after_consecutive_dead", 1001),
        "policies.failure.pause_after_consecutive_dead",
    ),
    "priority too high": (_set("policies.flow.priority", 6), "policies.flow.priority"),
    "priority negative": (_set("policies.flow.priority", -1), "policies.flow.priority"),
    "rate-limit key too long": (
        _set("policies.flow.rate_limit_key", "r" * 201),
        "policies.flow.rate_limit_key",
    ),
    "concurrency key control char": (
        _set("policies.flow.concurrency_key", "customer\n42"),
        "policies.flow.concurrency_key",
    ),
    # SSRF (this server allows loopback only)
    "private address": (_set("target.http.url", "http://10.1.2.3/x"), "target.http.url"),
    "metadata address": (
        _set("target.http.url", "http://169.254.169.254/latest/meta-data"),
        "target.http.url",
    ),
    "link-local address": (_set("target.http.url", "http://169.254.10.1/"), "target.http.url"),
    "unspecified address": (_set("target.http.url", "http://0.0.0.0:80/"), "target.http.url"),
    "multicast address": (_set("target.http.url", "http://224.0.0.1/"), "target.http.url"),
    "shared address": (_set("target.http.url", "http://100.64.0.1/"), "target.http.url"),
    "v6 unique local": (_set("target.http.url", "http://[fd00::1]/"), "target.http.url"),
    "v6 link-local": (_set("target.http.url", "http://[fe80::1]/"), "target.http.url"),
    "v6 mapped private": (_set("target.http.url", "http://[::ffff:10.0.0.1]/"), "target.http.url"),
    "v6 metadata": (_set("target.http.url", "http://[fd00:ec2::254]/"), "target.http.url"),
    "v6 6to4 of private": (_set("target.http.url", "http://[2002:a00:1::]/"), "target.http.url"),
    "v6 site-local": (_set("target.http.url", "http://[fec0::1]/"), "target.http.url"),
    "bracketed v4": (_set("target.http.url", "http://[1.1.1.1]/x"), "target.http.url"),
    "bracketed name": (_set("target.http.url", "http://[example.com]/"), "target.http.url"),
    "unclosed bracket": (_set("target.http.url", "http://[::1/x"), "target.http.url"),
    "grpc private": (_grpc("192.168.1.10:443"), "target.grpc.address"),
}


@pytest.mark.parametrize("case", sorted(CASES))
async def test_create_refuses_with_field_and_writes_nothing(
    api: Api, tenant: Tenant, case: str
) -> None:
    mutate, field = CASES[case]
    job = make_job("candidate")
    mutate(job)
    before = await api.counts()
    await expect_error(
        api.jobs.CreateJob(pb.CreateJobRequest(job=job, request_id="r1"), metadata=tenant.md),
        INVALID,
        field=field,
    )
    # In a batch the field path carries the index.
    await expect_error(
        api.jobs.BatchCreateJobs(
            pb.BatchCreateJobsRequest(jobs=[make_job("fine"), job]), metadata=tenant.md
        ),
        INVALID,
        field=f"jobs[1].{field}",
    )
    assert await api.counts() == before


UPDATE_CASES = [
    "cron out of range",
    "unknown zone",
    "url scheme",
    "metadata address",
    "header sundial",
    "max_attempts",
    "lateness_threshold long",
    "priority too high",
    "label key case",
    "name control char",
]


@pytest.mark.parametrize("case", UPDATE_CASES)
async def test_update_refuses_with_field_and_changes_nothing(
    api: Api, tenant: Tenant, case: str
) -> None:
    created = (
        await api.jobs.CreateJob(pb.CreateJobRequest(job=make_job("orig")), metadata=tenant.md)
    ).job
    mutate, field = CASES[case]
    job = make_job("orig")
    mutate(job)
    job.job_id = created.job_id
    top = field.split(".")[0].split("[")[0]
    await expect_error(
        api.jobs.UpdateJob(
            pb.UpdateJobRequest(job=job, update_mask=field_mask_pb2.FieldMask(paths=[top])),
            metadata=tenant.md,
        ),
        INVALID,
        field=field,
    )
    after = (await api.jobs.GetJob(pb.GetJobRequest(job_id=created.job_id), metadata=tenant.md)).job
    assert after == created


@pytest.mark.parametrize(
    ("request_id", "ok"),
    [
        ("a" * 128, True),
        ("batch 7/2026-03-08", True),
        ("a" * 129, False),
        ("tab\there", False),
        ("caf\u00e9", False),
    ],
)
async def test_request_id_limits(api: Api, tenant: Tenant, request_id: str, ok: bool) -> None:
    before = await api.counts()
    call = api.jobs.CreateJob(
        pb.CreateJobRequest(job=make_job(), request_id=request_id), metadata=tenant.md
    )
    if ok:
        await call
    else:
        await expect_error(call, INVALID, field="request_id")
        assert await api.counts() == before


async def test_lateness_threshold_is_updated_alone_and_kept_by_other_updates(
    api: Api, tenant: Tenant
) -> None:
    created = (
        await api.jobs.CreateJob(pb.CreateJobRequest(job=make_job("slo")), metadata=tenant.md)
    ).job
    assert created.policies.lateness_threshold.ToTimedelta() == timedelta(seconds=60)

    async def set_policy(name: str, seconds: float) -> job_pb2.Job:
        job = job_pb2.Job(job_id=created.job_id)
        getattr(job.policies, name).CopyFrom(_d(seconds))
        mask = field_mask_pb2.FieldMask(paths=[f"policies.{name}"])
        request = pb.UpdateJobRequest(job=job, update_mask=mask)
        return (await api.jobs.UpdateJob(request, metadata=tenant.md)).job

    updated = await set_policy("lateness_threshold", 300)
    assert updated.policies.lateness_threshold.ToTimedelta() == timedelta(minutes=5)
    assert updated.policies.run_timeout == created.policies.run_timeout
    again = await set_policy("run_timeout", 60)
    assert again.policies.lateness_threshold.ToTimedelta() == timedelta(minutes=5)


@pytest.mark.parametrize(
    ("windows", "field"),
    [
        ([30], "slo_windows[0]"),
        ([3600, 91 * 86400], "slo_windows[1]"),
        ([3600, 3600.5], "slo_windows[1]"),
        ([3600, 3600], "slo_windows[1]"),
        ([60, 120, 180, 240, 300], "slo_windows"),
    ],
)
async def test_describe_refuses_bad_slo_windows(
    api: Api, tenant: Tenant, windows: list[float], field: str
) -> None:
    created = (
        await api.jobs.CreateJob(pb.CreateJobRequest(job=make_job("slo")), metadata=tenant.md)
    ).job
    await expect_error(
        api.jobs.DescribeJob(
            pb.DescribeJobRequest(job_id=created.job_id, slo_windows=[_d(w) for w in windows]),
            metadata=tenant.md,
        ),
        INVALID,
        field=field,
    )


async def test_list_and_preview_argument_limits(api: Api, tenant: Tenant) -> None:
    await expect_error(
        api.jobs.ListJobs(pb.ListJobsRequest(name_prefix="p" * 201), metadata=tenant.md),
        INVALID,
        field="name_prefix",
    )
    await expect_error(
        api.jobs.ListJobs(
            pb.ListJobsRequest(labels={f"k{i}": "v" for i in range(65)}), metadata=tenant.md
        ),
        INVALID,
        field="labels",
    )
    await expect_error(
        api.jobs.PreviewSchedule(
            pb.PreviewScheduleRequest(schedule=job_pb2.Schedule(cron="0 * * * *"), count=-1),
            metadata=tenant.md,
        ),
        INVALID,
        field="count",
    )
