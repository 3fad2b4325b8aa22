"""Bad input never gets INTERNAL or UNKNOWN (issue 10, "Bad input, once and for all").

Against one real API server on a real database: first a table of every bad input found
so far and more of each kind (bracketed URL hosts, 6to4 and site-local targets, forged
page tokens, timestamps before 1970 or after 9999, invalid UTF-8 in a request body, run
keys finer than a microsecond, NUL in strings that reach a query), each answered
INVALID_ARGUMENT (or another deliberate code) naming the field, with nothing written.
Then hypothesis fuzzes target URLs and addresses, page tokens (random bytes, and JSON
documents holding random cursors under the fingerprint the server issued, so they reach
the cursor's decoding), timestamps and durations, and asserts the same: never INTERNAL
or UNKNOWN, and no row written by a refused request.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import grpc
import pytest
import pytest_asyncio
from google.protobuf import duration_pb2, field_mask_pb2, timestamp_pb2
from google.protobuf.message import Message
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from sundial.v1 import admin_pb2 as apb
from sundial.v1 import flow_pb2, job_pb2, run_pb2
from sundial.v1 import job_service_pb2 as pb
from tests.integration.api.support import Api, Tenant, launch, make_job

# One server and database for the module: a refusal writes nothing (each test checks),
# and what is accepted (the edges, fuzzed values that happen to be valid) only adds rows.
pytestmark = pytest.mark.asyncio(loop_scope="module")

OK = grpc.StatusCode.OK
INVALID = grpc.StatusCode.INVALID_ARGUMENT
# What bad input must never get: the contract says "never INTERNAL" (docs/design.md
# section 7), and UNKNOWN is what an unmapped failure below the handler looks like.
NEVER = frozenset({grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN})

MIN_SECONDS = -62_135_596_800  # 0001-01-01T00:00:00Z, the Timestamp minimum
MAX_SECONDS = 253_402_300_799  # 9999-12-31T23:59:59Z, the Timestamp maximum
Y2020 = 1_577_836_800  # 2020-01-01T00:00:00Z: in the past, a valid end_time
FUZZ = settings(
    max_examples=200,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def ts(seconds: int, nanos: int = 0) -> timestamp_pb2.Timestamp:
    return timestamp_pb2.Timestamp(seconds=seconds, nanos=nanos)


def dur(seconds: int, nanos: int = 0) -> duration_pb2.Duration:
    return duration_pb2.Duration(seconds=seconds, nanos=nanos)


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


async def outcome(call: Awaitable[Any]) -> tuple[grpc.StatusCode, str]:
    """The status code and details of a call (OK and "" when it succeeds)."""
    try:
        await call
    except grpc.aio.AioRpcError as exc:
        return exc.code(), exc.details() or ""
    return OK, ""


# --- the server and what it holds ---------------------------------------------------------


class World:
    """The module's servers, a tenant, one of its jobs, and the token templates.

    ``strict`` serves the same database with loopback targets refused (the default
    policy). ``templates`` maps each list (jobs, runs, tenants, tokens) to the JSON
    document of a page token the server issued, so a forged token can keep its version
    and filter fingerprint and change only the cursor: it then reaches the cursor's
    decoding. Not a dataclass: hypothesis prints a dataclass field by field, whatever
    its ``__repr__``, in every report of a failing example.
    """

    def __init__(
        self,
        api: Api,
        strict: Api,
        tenant: Tenant,
        job_id: str,
        templates: Mapping[str, dict[str, Any]],
    ) -> None:
        self.api = api
        self.strict = strict
        self.tenant = tenant
        self.job_id = job_id
        self.templates = templates

    def __repr__(self) -> str:  # short, for hypothesis' reports of failing examples
        return f"World(tenant={self.tenant.tenant_id!r}, job_id={self.job_id!r})"

    @property
    def md(self) -> tuple[tuple[str, str], ...]:
        return self.tenant.md

    def token(self, kind: str, cursor: Any = None, **fields: Any) -> str:
        """A page token of ``kind`` with the issued version and fingerprint, carrying
        ``cursor`` (and ``fields`` replacing or, set to ..., removing document keys)."""
        doc = dict(self.templates[kind])
        if cursor is not None:
            doc["c"] = cursor
        for key, value in fields.items():
            if value is ...:
                doc.pop(key, None)
            else:
                doc[key] = value
        return b64(json.dumps(doc).encode())

    def list_call(self, kind: str, token: str) -> Awaitable[Any]:
        """The list RPC of ``kind`` with ``token`` and no filters (as its template)."""
        if kind == "jobs":
            return self.api.jobs.ListJobs(pb.ListJobsRequest(page_token=token), metadata=self.md)
        if kind == "runs":
            return self.api.jobs.ListRuns(
                pb.ListRunsRequest(job_id=self.job_id, page_token=token), metadata=self.md
            )
        if kind == "tenants":
            return self.api.admin.ListTenants(
                apb.ListTenantsRequest(page_token=token), metadata=self.api.admin_md
            )
        return self.api.admin.ListApiTokens(
            apb.ListApiTokensRequest(page_token=token), metadata=self.api.admin_md
        )


async def written(world: World) -> dict[str, Any]:
    """What any write would change: the rows a job write touches (``Api.counts``), the
    admin tables, job versions, tenant updates, cancelled and replayed runs."""
    row = (
        await world.api.sql(
            """
            SELECT (SELECT count(*) FROM tenants) AS tenants,
                   (SELECT max(updated_at) FROM tenants) AS tenants_updated,
                   (SELECT count(*) FROM api_tokens) AS api_tokens,
                   (SELECT count(*) FROM tenant_signing_secrets) AS signing_secrets,
                   (SELECT coalesce(sum(version), 0) FROM jobs) AS job_versions,
                   (SELECT count(*) FROM job_runs WHERE status = 'cancelled') AS cancelled,
                   (SELECT coalesce(sum(replay_count), 0) FROM job_runs) AS replays
            """
        )
    )[0]
    return {**await world.api.counts(), **dict(row)}


def _doc(token: str) -> dict[str, Any]:
    assert token, "expected another page"
    doc: dict[str, Any] = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    return doc


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(shared_api: Api) -> AsyncIterator[World]:
    api = shared_api
    # A short resolve timeout: a fuzzed name that a slow resolver does not answer is
    # UNAVAILABLE (retry) at once rather than after the default 2 s.
    strict = await launch(
        api.database_url, allow_loopback_targets=False, target_resolve_timeout_s=0.5
    )
    try:
        tenant = await api.tenant()
        await api.tenant()  # a second tenant (and token): a page of one has a next page
        job = (
            await api.jobs.CreateJob(pb.CreateJobRequest(job=make_job("a-job")), metadata=tenant.md)
        ).job
        await api.jobs.CreateJob(pb.CreateJobRequest(job=make_job("b-job")), metadata=tenant.md)
        # Two runs at the earliest instants accepted: 1970-01-01 and -02 at 03:00 UTC.
        backfill = await api.jobs.BackfillJob(
            pb.BackfillJobRequest(job_id=job.job_id, start_time=ts(0), end_time=ts(2 * 86400)),
            metadata=tenant.md,
        )
        assert [run.scheduled_at.seconds for run in backfill.runs] == [3 * 3600, 27 * 3600]
        first_pages = {
            "jobs": api.jobs.ListJobs(pb.ListJobsRequest(page_size=1), metadata=tenant.md),
            "runs": api.jobs.ListRuns(
                pb.ListRunsRequest(job_id=job.job_id, page_size=1), metadata=tenant.md
            ),
            "tenants": api.admin.ListTenants(
                apb.ListTenantsRequest(page_size=1), metadata=api.admin_md
            ),
            "tokens": api.admin.ListApiTokens(
                apb.ListApiTokensRequest(page_size=1), metadata=api.admin_md
            ),
        }
        templates = {kind: _doc((await call).next_page_token) for kind, call in first_pages.items()}
        yield World(api, strict, tenant, job.job_id, templates)
    finally:
        await strict.shutdown()


async def test_forged_tokens_with_issued_cursors_are_accepted(world: World) -> None:
    """The control for every forged-token case below: re-encoding an issued token's
    document is accepted, so a refusal below is the cursor's doing, not the filters'."""
    for kind, doc in world.templates.items():
        assert await outcome(world.list_call(kind, world.token(kind))) == (OK, ""), kind
        assert await outcome(world.list_call(kind, world.token(kind, doc["c"]))) == (OK, "")
    # ... and the cursor is honoured: after the newest run comes the older one.
    page = await world.api.jobs.ListRuns(
        pb.ListRunsRequest(
            job_id=world.job_id,
            page_token=world.token("runs", ["1970-01-02T03:00:00+00:00"]),
        ),
        metadata=world.md,
    )
    assert [run.scheduled_at.seconds for run in page.runs] == [3 * 3600]


# --- the table ----------------------------------------------------------------------------

Call = Callable[[World], Awaitable[Any]]


@dataclass(frozen=True)
class Case:
    """A bad request, the field its refusal must name, and the code (INVALID_ARGUMENT)."""

    call: Call
    field: str | None
    code: grpc.StatusCode = INVALID
    text: str = ""


def _create(mutate: Callable[[job_pb2.Job], None], *, strict: bool = False) -> Call:
    def call(w: World) -> Awaitable[Any]:
        job = make_job(f"bad-{uuid.uuid4().hex[:8]}")
        mutate(job)
        server = w.strict if strict else w.api
        return server.jobs.CreateJob(pb.CreateJobRequest(job=job), metadata=w.md)

    return call


def _url(url: str, *, strict: bool = False) -> Case:
    def mutate(job: job_pb2.Job) -> None:
        job.target.http.url = url

    return Case(_create(mutate, strict=strict), "target.http.url")


def _address(address: str) -> Case:
    def mutate(job: job_pb2.Job) -> None:
        job.target.grpc.address = address

    return Case(_create(mutate), "target.grpc.address")


def _schedule_time(name: str, value: timestamp_pb2.Timestamp) -> Case:
    return Case(_create(lambda job: _set_path(job, f"schedule.{name}", value)), f"schedule.{name}")


def _set_path(job: job_pb2.Job, path: str, value: Message) -> None:
    """Set the message field at dotted ``path`` of ``job``."""
    *parents, leaf = path.split(".")
    message: Any = job
    for part in parents:
        message = getattr(message, part)
    getattr(message, leaf).CopyFrom(value)


def _schedule_duration(path: str, value: duration_pb2.Duration) -> Case:
    return Case(_create(lambda job: _set_path(job, path, value)), path)


def _token(kind: str, cursor: Any = None, **fields: Any) -> Case:
    return Case(
        lambda w: w.list_call(kind, w.token(kind, cursor, **fields)),
        "page_token",
        text="is not a valid page token",
    )


def _raw_token(kind: str, token: str | Callable[[World], str]) -> Case:
    return Case(
        lambda w: w.list_call(kind, token(w) if callable(token) else token),
        "page_token",
        text="is not a valid page token",
    )


def _raw_doc(kind: str, body: Callable[[str], bytes]) -> Case:
    """A token whose JSON is written by hand (``body`` gets the fingerprint)."""
    return _raw_token(kind, lambda w: b64(body(w.templates[kind]["f"])))


def _backfill(start: timestamp_pb2.Timestamp | None, end: timestamp_pb2.Timestamp | None) -> Call:
    def call(w: World) -> Awaitable[Any]:
        request = pb.BackfillJobRequest(job_id=w.job_id)
        if start is not None:
            request.start_time.CopyFrom(start)
        if end is not None:
            request.end_time.CopyFrom(end)
        return w.api.jobs.BackfillJob(request, metadata=w.md)

    return call


def _run_ref(method: str, scheduled_at: timestamp_pb2.Timestamp) -> Call:
    def call(w: World) -> Awaitable[Any]:
        ref = run_pb2.RunRef(job_id=w.job_id, scheduled_at=scheduled_at)
        request = getattr(pb, f"{method}Request")(ref=ref)
        return getattr(w.api.jobs, method)(request, metadata=w.md)

    return call


def _run_key(method: str, key: Callable[[str], str]) -> Case:
    def call(w: World) -> Awaitable[Any]:
        request = getattr(pb, f"{method}Request")(run_key=key(w.job_id))
        return getattr(w.api.jobs, method)(request, metadata=w.md)

    return Case(call, "run_key")


def _admin(method: str, request: Message, field: str) -> Case:
    return Case(lambda w: getattr(w.api.admin, method)(request, metadata=w.api.admin_md), field)


def _undecodable(service: str, method: str, request: Message, swap: bytes) -> Case:
    """A body whose string "ZZZZ" is replaced by ``swap`` bytes (not UTF-8)."""
    body = request.SerializeToString()
    assert body.count(b"ZZZZ") == 1 and len(swap) == 4  # the length prefix stays right
    body = body.replace(b"ZZZZ", swap)

    def call(w: World) -> Awaitable[Any]:
        md = w.api.admin_md if service == "AdminService" else w.md
        return w.api.channel.unary_unary(f"/sundial.v1.{service}/{method}")(body, metadata=md)

    return Case(call, None, text="not a valid message")


PAST = ts(Y2020)
UUID_TEXT = "0b0c0d0e-0000-4000-8000-000000000000"
LAST_RUN = "1970-01-02T03:00:00+00:00"

CASES: dict[str, Case] = {
    # --- target URLs with a malformed bracketed host (once INTERNAL) ----------------------
    "url bracketed v4": _url("http://[1.1.1.1]/x"),
    "url bracketed name": _url("http://[example.com]/"),
    "url unclosed bracket": _url("http://[::1/x"),
    "url bracket closed twice": _url("http://[::1]]/x"),
    "url empty brackets": _url("http://[]/"),
    "url IPvFuture": _url("http://[v1.fe]/"),
    "url nested brackets": _url("http://[[::1]]/"),
    "url brackets inside out": _url("http://]::1[/"),
    "url bracketed port junk": _url("http://[::1]:x/"),
    "url bracketed port too big": _url("http://[::1]:65536/"),
    "url bracketed v4 with port": _url("http://[127.0.0.1]:8080/"),
    "url bracketed v4-mapped junk": _url("http://[::ffff:1.1.1]/"),
    "url text after the brackets": _url("http://[::1]x/"),
    "url text before the brackets": _url("http://x[::1]/"),
    "url bracket after the port": _url("http://[::1]:80]/"),
    # --- SSRF: 6to4 carrying a forbidden IPv4, site-local (once accepted) -----------------
    "url 6to4 of loopback": _url("http://[2002:7f00:1::]/", strict=True),
    "url 6to4 of metadata": _url("http://[2002:a9fe:a9fe::]/"),
    "url 6to4 of private": _url("http://[2002:a00:1::]/"),
    "url 6to4 of private, long form": _url("https://[2002:0a00:0001:0000::1]:8443/x"),
    "url site-local": _url("http://[fec0::1]/"),
    "url mapped metadata": _url("http://[::ffff:169.254.169.254]/"),
    "url NAT64 of metadata": _url("http://[64:ff9b::a9fe:a9fe]/"),
    "grpc bracketed v4": _address("[1.1.1.1]:443"),
    "grpc unclosed bracket": _address("[::1:443"),
    "grpc 6to4 of metadata": _address("[2002:a9fe:a9fe::]:443"),
    "grpc site-local": _address("[fec0::1]:443"),
    # --- forged ListJobs tokens -----------------------------------------------------------
    "jobs cursor NUL": _token("jobs", ["a\x00b"]),
    "jobs cursor only NUL": _token("jobs", ["\x00"]),
    "jobs cursor lone high surrogate": _token("jobs", ["\ud800"]),
    "jobs cursor lone low surrogate": _token("jobs", ["a\udfffb"]),
    "jobs cursor reversed pair": _token("jobs", ["\udc00\ud800"]),
    "jobs cursor too long": _token("jobs", ["n" * 201]),
    "jobs cursor int": _token("jobs", [1]),
    "jobs cursor huge int": _token("jobs", [10**400]),
    "jobs cursor float": _token("jobs", [1e308]),
    "jobs cursor bool": _token("jobs", [True]),
    "jobs cursor null": _token("jobs", [None]),
    "jobs cursor list": _token("jobs", [["a-job"]]),
    "jobs cursor object": _token("jobs", [{"name": "a-job"}]),
    "jobs cursor empty": _token("jobs", []),
    "jobs cursor two names": _token("jobs", ["a-job", "b-job"]),
    "jobs cursor a string": _token("jobs", "a-job"),
    "jobs cursor missing": _token("jobs", c=...),
    "jobs version 2": _token("jobs", v=2),
    "jobs version true": _token("jobs", v=True),
    "jobs version text": _token("jobs", v="1"),
    "jobs version missing": _token("jobs", v=...),
    "jobs digits beyond int conversion": _raw_doc(
        "jobs", lambda f: b'{"v":1,"c":[' + b"9" * 5000 + b'],"f":"' + f.encode() + b'"}'
    ),
    "jobs cursor NaN": _raw_doc("jobs", lambda f: b'{"v":1,"c":[NaN],"f":"' + f.encode() + b'"}'),
    "jobs cursor invalid UTF-8": _raw_doc(
        "jobs", lambda f: b'{"v":1,"c":["\xff\xfe"],"f":"' + f.encode() + b'"}'
    ),
    "jobs cursor deeply nested": _raw_doc(
        "jobs",
        lambda f: b'{"v":1,"c":' + b"[" * 1400 + b"]" * 1400 + b',"f":"' + f.encode() + b'"}',
    ),
    "jobs token deeply nested": _raw_token("jobs", b64(b"[" * 3000)),
    "jobs token a list": _raw_token("jobs", b64(b'[1,"a",null]')),
    "jobs token null": _raw_token("jobs", b64(b"null")),
    "jobs token not JSON": _raw_token("jobs", b64(b"not json")),
    "jobs token not base64": _raw_token("jobs", "%%%"),
    "jobs token non-ASCII": _raw_token("jobs", "\u00e9t\u00e9"),
    "jobs token NUL": _raw_token("jobs", "\x00"),
    "jobs token padding only": _raw_token("jobs", "===="),
    "jobs token too long": _raw_token("jobs", b64(b'{"v":1,"c":["' + b"a" * 4000 + b'"]}')),
    # --- forged ListRuns tokens: instants --------------------------------------------------
    "runs cursor year 1 at +23:59": _token("runs", ["0001-01-01T00:00:00+23:59"]),
    "runs cursor year 9999 at -23:59": _token("runs", ["9999-12-31T23:59:59-23:59"]),
    "runs cursor at +01:00": _token("runs", ["2026-01-01T00:00:00+01:00"]),
    "runs cursor naive": _token("runs", ["2026-01-01T00:00:00"]),
    "runs cursor before the epoch": _token("runs", ["1969-12-31T23:59:59+00:00"]),
    "runs cursor year 1 UTC": _token("runs", ["0001-01-01T00:00:00+00:00"]),
    "runs cursor NUL": _token("runs", [LAST_RUN + "\x00"]),
    "runs cursor lone surrogate": _token("runs", ["\ud800"]),
    "runs cursor month 13": _token("runs", ["2026-13-01T00:00:00+00:00"]),
    "runs cursor words": _token("runs", ["yesterday"]),
    "runs cursor unix seconds": _token("runs", [Y2020]),
    "runs cursor huge int": _token("runs", [10**30]),
    "runs cursor long": _token("runs", [LAST_RUN + " " * 100]),
    "runs cursor two instants": _token("runs", [LAST_RUN, LAST_RUN]),
    "runs cursor with a space for the T": _token("runs", ["1970-01-02 03:00:00+00:00"]),
    "runs cursor at Z": _token("runs", ["1970-01-02T03:00:00Z"]),
    "runs cursor at -00:00": _token("runs", ["1970-01-02T03:00:00-00:00"]),
    "runs cursor February 30th": _token("runs", ["2026-02-30T00:00:00+00:00"]),
    "runs cursor other script's digits": _token("runs", ["\u0661970-01-02T03:00:00+00:00"]),
    # --- forged ListTenants and ListApiTokens tokens -------------------------------------
    "tenants cursor NUL": _token("tenants", ["a\x00"]),
    "tenants cursor lone surrogate": _token("tenants", ["\ud800"]),
    "tenants cursor too long": _token("tenants", ["t" * 65]),
    "tenants cursor float": _token("tenants", [1e308]),
    "tenants cursor null": _token("tenants", [None]),
    "tokens cursor uuid an int": _token("tokens", [LAST_RUN, 5]),
    "tokens cursor uuid junk": _token("tokens", [LAST_RUN, "not-a-uuid"]),
    "tokens cursor uuid not canonical": _token(
        "tokens", [LAST_RUN, "----" + UUID_TEXT.replace("-", "")]
    ),
    "tokens cursor uuid NUL": _token("tokens", [LAST_RUN, UUID_TEXT[:35] + "\x00"]),
    "tokens cursor instant at an extreme offset": _token(
        "tokens", ["0001-01-01T00:00:00+23:59", UUID_TEXT]
    ),
    "tokens cursor instant naive": _token("tokens", ["2026-01-01T00:00:00", UUID_TEXT]),
    "tokens cursor one value": _token("tokens", [LAST_RUN]),
    # --- BackfillJob at and beyond the ends of time (year 1 was OverflowError) ------------
    "backfill from year 1": Case(_backfill(ts(MIN_SECONDS), ts(86400)), "start_time"),
    "backfill from year 1 plus an hour": Case(
        _backfill(ts(MIN_SECONDS + 3600), ts(86400)), "start_time"
    ),
    "backfill from just before the epoch": Case(_backfill(ts(-1), ts(86400)), "start_time"),
    "backfill to year 1": Case(_backfill(ts(0), ts(MIN_SECONDS)), "end_time"),
    "backfill below the Timestamp range": Case(_backfill(ts(MIN_SECONDS - 1), PAST), "start_time"),
    "backfill above the Timestamp range": Case(_backfill(ts(0), ts(MAX_SECONDS + 1)), "end_time"),
    "backfill negative nanos": Case(_backfill(ts(0, -1), PAST), "start_time"),
    "backfill nanos of a whole second": Case(_backfill(ts(0, 10**9), PAST), "start_time"),
    "backfill from year 9999": Case(
        _backfill(ts(MAX_SECONDS), PAST), "end_time", text="after start_time"
    ),
    "backfill from the last nanosecond of 9999": Case(
        _backfill(ts(MAX_SECONDS, 999_999_999), PAST), "start_time"
    ),
    "backfill within year 9999": Case(
        _backfill(ts(MAX_SECONDS - 86400), ts(MAX_SECONDS)), "end_time", text="after now"
    ),
    "backfill without start": Case(_backfill(None, PAST), "start_time"),
    "backfill without end": Case(_backfill(ts(0), None), "end_time"),
    # --- every other request timestamp ----------------------------------------------------
    "schedule start_time year 1": _schedule_time("start_time", ts(MIN_SECONDS)),
    "schedule end_time before the epoch": _schedule_time("end_time", ts(-86400)),
    "schedule once year 1": _schedule_time("once", ts(MIN_SECONDS)),
    "schedule once negative nanos": _schedule_time("once", ts(Y2020 * 2, -5)),
    "schedule start_time above the range": _schedule_time("start_time", ts(MAX_SECONDS + 1)),
    "schedule end_time at the end of time": _schedule_time("end_time", ts(MAX_SECONDS)),
    "batch start_time year 1": Case(
        lambda w: w.api.jobs.BatchCreateJobs(
            pb.BatchCreateJobsRequest(
                jobs=[
                    make_job("batch-ok"),
                    make_job(
                        "batch-bad",
                        schedule=job_pb2.Schedule(cron="0 * * * *", start_time=ts(MIN_SECONDS)),
                    ),
                ]
            ),
            metadata=w.md,
        ),
        "jobs[1].schedule.start_time",
    ),
    "update start_time year 1": Case(
        lambda w: w.api.jobs.UpdateJob(
            pb.UpdateJobRequest(
                job=job_pb2.Job(
                    job_id=w.job_id,
                    schedule=job_pb2.Schedule(cron="0 3 * * *", start_time=ts(MIN_SECONDS)),
                ),
                update_mask=field_mask_pb2.FieldMask(paths=["schedule"]),
            ),
            metadata=w.md,
        ),
        "schedule.start_time",
    ),
    "preview after year 1": Case(
        lambda w: w.api.jobs.PreviewSchedule(
            pb.PreviewScheduleRequest(
                schedule=job_pb2.Schedule(cron="0 * * * *", time_zone="Pacific/Pago_Pago"),
                after=ts(MIN_SECONDS),
            ),
            metadata=w.md,
        ),
        "after",
    ),
    "preview after, nanos too big": Case(
        lambda w: w.api.jobs.PreviewSchedule(
            pb.PreviewScheduleRequest(
                schedule=job_pb2.Schedule(cron="0 * * * *"), after=ts(0, 2**31 - 1)
            ),
            metadata=w.md,
        ),
        "after",
    ),
    "list runs after year 1": Case(
        lambda w: w.api.jobs.ListRuns(
            pb.ListRunsRequest(job_id=w.job_id, scheduled_after=ts(MIN_SECONDS)), metadata=w.md
        ),
        "scheduled_after",
    ),
    "list runs before, above the range": Case(
        lambda w: w.api.jobs.ListRuns(
            pb.ListRunsRequest(job_id=w.job_id, scheduled_before=ts(MAX_SECONDS + 1)),
            metadata=w.md,
        ),
        "scheduled_before",
    ),
    "get run in year 1": Case(_run_ref("GetRun", ts(MIN_SECONDS)), "ref.scheduled_at"),
    "cancel run, nanos of a whole second": Case(
        _run_ref("CancelRun", ts(3 * 3600, 10**9)), "ref.scheduled_at"
    ),
    "replay run finer than a microsecond": Case(
        _run_ref("ReplayRun", ts(3 * 3600, 1)), "ref.scheduled_at"
    ),
    "token expiring in year 1": _admin(
        "CreateApiToken",
        apb.CreateApiTokenRequest(
            role=apb.TOKEN_ROLE_ADMIN, description="x", expire_time=ts(MIN_SECONDS)
        ),
        "expire_time",
    ),
    # datetime.max, which asyncpg stores as infinity and reads back naive (was INTERNAL).
    "token expiring at the last microsecond of 9999": _admin(
        "CreateApiToken",
        apb.CreateApiTokenRequest(
            role=apb.TOKEN_ROLE_ADMIN, description="x", expire_time=ts(MAX_SECONDS, 999_999_000)
        ),
        "expire_time",
    ),
    "token expiry with negative nanos": _admin(
        "CreateApiToken",
        apb.CreateApiTokenRequest(
            role=apb.TOKEN_ROLE_ADMIN, description="x", expire_time=ts(Y2020 * 2, -1)
        ),
        "expire_time",
    ),
    # --- durations beyond every bound ------------------------------------------------------
    "interval of 10,000 years": _schedule_duration("schedule.interval.every", dur(315_576_000_000)),
    "interval beyond the Duration range": _schedule_duration(
        "schedule.interval.every", dur(315_576_000_001)
    ),
    "jitter with mixed signs": _schedule_duration("schedule.jitter", dur(1, -1)),
    "run timeout of 10,000 years": _schedule_duration("policies.run_timeout", dur(315_576_000_000)),
    "catchup window of minus 10,000 years": _schedule_duration(
        "policies.catchup_window", dur(-315_576_000_000)
    ),
    "overlap of 10,000 years": _admin(
        "RotateSigningSecret",
        apb.RotateSigningSecretRequest(tenant_id="nobody", overlap=dur(315_576_000_000)),
        "overlap",
    ),
    # --- run keys ---------------------------------------------------------------------------
    "run key with 7 fraction digits": _run_key(
        "GetRun", lambda job: f"{job}@1970-01-01T03:00:00.0000001Z"
    ),
    "cancel by a run key with 9 fraction digits": _run_key(
        "CancelRun", lambda job: f"{job}@1970-01-01T03:00:00.000000000Z"
    ),
    "replay by a run key with an offset": _run_key(
        "ReplayRun", lambda job: f"{job}@1970-01-01T03:00:00+00:00"
    ),
    "run key with a NUL": _run_key("GetRun", lambda job: f"{job}@1970-01-01T03:00:00\x00Z"),
    "run key without a job": _run_key("GetRun", lambda job: "@1970-01-01T03:00:00Z"),
    # --- NUL and other text PostgreSQL cannot hold, in fields that reach a query ----------
    "get tenant NUL": _admin("GetTenant", apb.GetTenantRequest(tenant_id="a\x00"), "tenant_id"),
    "update tenant NUL": _admin(
        "UpdateTenant",
        apb.UpdateTenantRequest(
            tenant=apb.Tenant(tenant_id="a\x00", display_name="x"),
            update_mask=field_mask_pb2.FieldMask(paths=["display_name"]),
        ),
        "tenant.tenant_id",
    ),
    "rotate secret NUL": _admin(
        "RotateSigningSecret", apb.RotateSigningSecretRequest(tenant_id="a\x00"), "tenant_id"
    ),
    "list tokens of NUL": _admin(
        "ListApiTokens", apb.ListApiTokensRequest(tenant_id="\x00"), "tenant_id"
    ),
    "issue a token to NUL": _admin(
        "CreateApiToken",
        apb.CreateApiTokenRequest(tenant_id="a\x00", role=apb.TOKEN_ROLE_TENANT, description="x"),
        "tenant_id",
    ),
    "name prefix NUL": Case(
        lambda w: w.api.jobs.ListJobs(pb.ListJobsRequest(name_prefix="\x00"), metadata=w.md),
        "name_prefix",
    ),
    "label filter NUL": Case(
        lambda w: w.api.jobs.ListJobs(pb.ListJobsRequest(labels={"a": "\x00"}), metadata=w.md),
        "labels['a']",
    ),
    "cancel reason NUL": Case(
        lambda w: w.api.jobs.CancelRun(
            pb.CancelRunRequest(run_key=f"{w.job_id}@1970-01-01T03:00:00Z", reason="\x00"),
            metadata=w.md,
        ),
        "reason",
    ),
    # --- bodies that are not valid messages (once UNKNOWN with DecodeError's text) --------
    "body with invalid UTF-8": _undecodable(
        "JobService", "ListJobs", pb.ListJobsRequest(name_prefix="ZZZZ"), b"\xff\xfe\xfd\xfc"
    ),
    "body with an encoded surrogate": _undecodable(
        "JobService", "ListJobs", pb.ListJobsRequest(page_token="ZZZZ"), b"\xed\xa0\x80a"
    ),
    "body with an overlong NUL": _undecodable(
        "JobService", "GetJob", pb.GetJobRequest(job_id="ZZZZ"), b"\xc0\x80ab"
    ),
    "job name with invalid UTF-8": _undecodable(
        "JobService", "CreateJob", pb.CreateJobRequest(job=make_job("ZZZZ")), b"ab\xffc"
    ),
    "admin body with invalid UTF-8": _undecodable(
        "AdminService", "GetTenant", apb.GetTenantRequest(tenant_id="ZZZZ"), b"\x80\x80\x80\x80"
    ),
    # --- huge integers: deliberate codes, not INVALID_ARGUMENT ------------------------------
    "pause at the largest version": Case(
        lambda w: w.api.jobs.PauseJob(
            pb.PauseJobRequest(job_id=w.job_id, expected_version=2**63 - 1), metadata=w.md
        ),
        None,
        grpc.StatusCode.ABORTED,
    ),
    "delete an unknown job at the largest version": Case(
        lambda w: w.api.jobs.DeleteJob(
            pb.DeleteJobRequest(job_id=str(uuid.uuid4()), expected_version=2**63 - 1),
            metadata=w.md,
        ),
        None,
        grpc.StatusCode.NOT_FOUND,
    ),
    "preview the largest count": Case(
        lambda w: w.api.jobs.PreviewSchedule(
            pb.PreviewScheduleRequest(schedule=job_pb2.Schedule(cron="0 * * * *"), count=2**31 - 1),
            metadata=w.md,
        ),
        "count",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
async def test_bad_input_is_refused_naming_the_field_and_writes_nothing(
    world: World, case: str
) -> None:
    spec = CASES[case]
    before = await written(world)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await spec.call(world)
    code, details = refused.value.code(), refused.value.details() or ""
    assert code == spec.code, f"expected {spec.code.name}, got {code.name}: {details}"
    if spec.field is not None:
        assert details.startswith(f"{spec.field}: "), f"{details!r} does not name {spec.field}"
    assert spec.text in details
    # A program reads the same from the google.rpc.Status details.
    status = rpc_status.from_call(refused.value)  # type: ignore[arg-type]
    assert status is not None and status.message == details
    kinds = {d.TypeName(): d for d in status.details}
    assert "google.rpc.ErrorInfo" in kinds and "google.rpc.RequestInfo" in kinds
    if code == INVALID and spec.field:
        bad_request = error_details_pb2.BadRequest()
        kinds["google.rpc.BadRequest"].Unpack(bad_request)
        assert [v.field for v in bad_request.field_violations] == [spec.field]
    assert await written(world) == before


def _first_midnight(zone: str) -> int:
    """The first local midnight in ``zone`` at or after the epoch, in Unix seconds (by
    the zone's 1970 rules: Kiritimati was UTC-10:40 then)."""
    local = datetime(1969, 12, 31, tzinfo=ZoneInfo(zone))
    while local.timestamp() < 0:
        local += timedelta(days=1)
    return int(local.timestamp())


async def test_the_edges_of_the_accepted_range_are_accepted(world: World) -> None:
    """The range is 1970-01-01T00:00:00Z to 9999-12-31T23:59:59Z, both included, in
    zones on either side of UTC."""
    end_of_time = ts(MAX_SECONDS)
    for zone in ("Pacific/Kiritimati", "Pacific/Pago_Pago", "Asia/Tokyo"):
        job = (
            await world.api.jobs.CreateJob(
                pb.CreateJobRequest(
                    job=make_job(
                        f"edge-{zone.replace('/', '-').lower()}",
                        schedule=job_pb2.Schedule(cron="0 0 * * *", time_zone=zone),
                    )
                ),
                metadata=world.md,
            )
        ).job
        backfill = await world.api.jobs.BackfillJob(
            pb.BackfillJobRequest(job_id=job.job_id, start_time=ts(0), end_time=ts(86400)),
            metadata=world.md,
        )
        midnight = _first_midnight(zone)
        assert [run.scheduled_at.seconds for run in backfill.runs] == [midnight]
        listed = await world.api.jobs.ListRuns(
            pb.ListRunsRequest(
                job_id=job.job_id, scheduled_after=ts(0), scheduled_before=end_of_time
            ),
            metadata=world.md,
        )
        assert [run.scheduled_at.seconds for run in listed.runs] == [midnight]
        preview = await world.api.jobs.PreviewSchedule(
            pb.PreviewScheduleRequest(schedule=job.schedule, after=end_of_time),
            metadata=world.md,
        )
        assert not preview.fire_times
    token = await world.api.admin.CreateApiToken(
        apb.CreateApiTokenRequest(
            role=apb.TOKEN_ROLE_ADMIN, description="forever", expire_time=end_of_time
        ),
        metadata=world.api.admin_md,
    )
    assert token.token.expire_time == end_of_time
    listed_tokens = await world.api.admin.ListApiTokens(
        apb.ListApiTokensRequest(page_size=1000), metadata=world.api.admin_md
    )
    assert token.token in listed_tokens.tokens


# --- fuzzing ------------------------------------------------------------------------------


async def assert_refused_cleanly(
    world: World, call: Awaitable[Any], fields: tuple[str, ...]
) -> grpc.StatusCode:
    """Await ``call``: never INTERNAL or UNKNOWN; a refusal names one of ``fields`` (when
    INVALID_ARGUMENT) and writes nothing."""
    before = await written(world)
    code, details = await outcome(call)
    event(code.name)  # the mix of answers, in --hypothesis-show-statistics
    assert code not in NEVER, details
    if code is INVALID:
        assert details.startswith(tuple(f"{field}: " for field in fields)), details
    if code is not OK:
        assert await written(world) == before, details
    return code


def _bracketed(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return inner.map(lambda text: f"[{text}]")


_HOST_TEXT = st.text(st.characters(codec="ascii"), max_size=20)
_HOSTS = st.one_of(
    st.ip_addresses(v=4).map(str),
    _bracketed(st.ip_addresses(v=6).map(str)),
    st.ip_addresses(v=6).map(str),  # unbracketed: not a host
    _bracketed(st.ip_addresses(v=4).map(str)),
    _bracketed(_HOST_TEXT),
    _HOST_TEXT.map(lambda text: f"[{text}"),
    _HOST_TEXT.map(lambda text: f"{text}]"),
    # Names only under .invalid (RFC 6761: never resolves), so no lookup leaves the host.
    st.from_regex(r"[a-z0-9-]{1,12}(\.[a-z0-9-]{1,12}){0,2}\.invalid", fullmatch=True),
    st.text(max_size=12).map(lambda text: f"{text}.invalid"),
)
_PORTS = st.one_of(
    st.just(""),
    st.integers(-1, 70_000).map(lambda port: f":{port}"),
    st.text(max_size=6).map(lambda text: f":{text}"),
)
_URLS = st.one_of(
    st.text(max_size=60),
    st.builds(
        lambda scheme, host, port, path: f"{scheme}://{host}{port}{path}",
        st.one_of(st.sampled_from(["http", "https", "HTTP", "ftp", ""]), st.text(max_size=5)),
        _HOSTS,
        _PORTS,
        st.one_of(st.just(""), st.text(max_size=20).map(lambda text: f"/{text}")),
    ),
)
_ADDRESSES = st.one_of(
    st.text(max_size=40),
    st.builds(lambda host, port: f"{host}{port}", _HOSTS, _PORTS),
)


@FUZZ
@given(kind=st.sampled_from(["http", "grpc"]), data=st.data())
async def test_fuzzed_targets_are_never_internal(
    world: World, kind: str, data: st.DataObject
) -> None:
    job = make_job(f"fuzz-{uuid.uuid4().hex}")
    if kind == "http":
        job.target.http.url = data.draw(_URLS, label="url")
        field = "target.http.url"
    else:
        job.target.grpc.address = data.draw(_ADDRESSES, label="address")
        field = "target.grpc.address"
    # The strict server: the executor's default policy, where most literals are refused.
    call = world.strict.jobs.CreateJob(pb.CreateJobRequest(job=job), metadata=world.md)
    await assert_refused_cleanly(world, call, (field,))


@FUZZ
@given(
    raw=st.one_of(
        st.binary(max_size=400).map(b64),
        st.binary(max_size=400).map(lambda raw: base64.urlsafe_b64encode(raw).decode()),
        st.binary(max_size=400).map(lambda raw: base64.b64encode(raw).decode()),
        st.text(max_size=200),
    ),
    kind=st.sampled_from(["jobs", "runs", "tenants", "tokens"]),
)
async def test_fuzzed_token_bytes_are_never_internal(world: World, raw: str, kind: str) -> None:
    code = await assert_refused_cleanly(world, world.list_call(kind, raw), ("page_token",))
    assert code in (OK, INVALID)


# Text as a forger writes it: any code point, with NUL and lone surrogates drawn often
# (a list joined: st.text never draws a surrogate, whatever its alphabet).
_TEXTS = st.lists(
    st.one_of(
        st.sampled_from(["\x00", "\ud800", "\udbff", "\udc00", "\udfff", "a", "-"]),
        st.characters(),
        st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),
    ),
    max_size=30,
).map("".join)


def _instant_text(day: date, clock: time, offset: str) -> str:
    return f"{day.isoformat()}T{clock.isoformat()}{offset}"


# Instants spelled as isoformat() writes them and otherwise, at every offset (and
# none), near the ends of datetime's range as often as anywhere: there an offset moves
# them out of it. Edges first, as for timestamps below: the simplest example is
# 0001-01-01T00:00:00+23:59, the issue's own.
_INSTANT_TEXTS = st.builds(
    _instant_text,
    st.one_of(
        st.dates(max_value=date(1, 1, 2)),
        st.dates(min_value=date(9999, 12, 30)),
        st.dates(min_value=date(1969, 12, 31), max_value=date(1970, 1, 1)),
        st.dates(),
    ),
    st.one_of(st.sampled_from([time(0), time(23, 59, 59, 999_999)]), st.times()),
    st.one_of(
        st.sampled_from(["+23:59", "-23:59", "+00:00", "", "Z", "-00:00"]),
        st.builds(
            lambda sign, hours, minutes: f"{sign}{hours:02d}:{minutes:02d}",
            st.sampled_from("+-"),
            st.integers(0, 23),
            st.integers(0, 59),
        ),
    ),
)
_UUID_TEXTS = st.one_of(
    st.uuids().map(str),
    st.uuids().map(lambda u: str(u).upper()),
    st.uuids().map(lambda u: u.hex.rjust(36, "-")),  # 36 characters, not canonical
)
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=2**63, max_value=10**400),
    st.floats(),
    _TEXTS,
    _INSTANT_TEXTS,
    _UUID_TEXTS,
)
_VALUES = st.recursive(
    _SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=8,
)
# Per list, what its cursor holds (jobs and tenants: a name; runs: an instant; tokens:
# an instant and an id), each position drawn as text of its kind or any text.
_POSITIONS = {
    "text": _TEXTS,
    "instant": st.one_of(_INSTANT_TEXTS, _TEXTS),
    "uuid": st.one_of(_UUID_TEXTS, _TEXTS),
}
_SHAPES = {
    "jobs": ("text",),
    "tenants": ("text",),
    "runs": ("instant",),
    "tokens": ("instant", "uuid"),
}


@FUZZ
@given(kind=st.sampled_from(sorted(_SHAPES)), data=st.data())
async def test_fuzzed_cursors_are_never_internal(
    world: World, kind: str, data: st.DataObject
) -> None:
    """Tokens as the server issues them (version, fingerprint), random cursors: mostly
    of the list's shape, a quarter any JSON values."""
    if data.draw(st.integers(0, 3), label="any shape") == 0:
        cursor = data.draw(st.lists(_VALUES, max_size=3), label="cursor")
    else:
        shaped = st.tuples(*(_POSITIONS[position] for position in _SHAPES[kind])).map(list)
        cursor = data.draw(shaped, label="cursor")
    token = world.token(kind, cursor)
    code = await assert_refused_cleanly(world, world.list_call(kind, token), ("page_token",))
    assert code in (OK, INVALID)


@FUZZ
@given(
    kind=st.sampled_from(sorted(_SHAPES)),
    doc=st.one_of(
        st.dictionaries(st.sampled_from(["v", "c", "f", "x"]), _VALUES, max_size=4),
        _VALUES,
    ),
)
async def test_fuzzed_token_documents_are_never_internal(world: World, kind: str, doc: Any) -> None:
    """Any JSON document at all as a token."""
    token = b64(json.dumps(doc).encode())
    code = await assert_refused_cleanly(world, world.list_call(kind, token), ("page_token",))
    assert code in (OK, INVALID)


# Seconds across and beyond the Timestamp range, with the edges drawn often, and first:
# hypothesis starts from the simplest example (first branches, first elements), so the
# lower end of the Timestamp range with zero nanos is always among the examples.
_SECONDS = st.one_of(
    st.sampled_from(
        [
            *(MIN_SECONDS, 0, MAX_SECONDS, MIN_SECONDS - 1, MIN_SECONDS + 1, -1, 1),
            *(Y2020, MAX_SECONDS - 86400, MAX_SECONDS - 1, MAX_SECONDS + 1),
        ]
    ),
    st.integers(MIN_SECONDS - 10**6, MAX_SECONDS + 10**6),
    st.integers(MIN_SECONDS - 86400 * 3, MIN_SECONDS + 86400 * 3),
    st.integers(-86400 * 3, 86400 * 3),
    st.integers(Y2020 - 86400 * 400, Y2020),
    st.integers(MAX_SECONDS - 86400 * 3, MAX_SECONDS + 86400 * 3),
)
_NANOS = st.one_of(
    st.just(0),
    st.sampled_from([-1, 999_999_999, 10**9, 2**31 - 1, -(2**31), 1, 999_999_000]),
    st.integers(0, 999_999_999),
)
_TIMESTAMPS = st.builds(ts, _SECONDS, _NANOS)
_OPTIONAL_TIMESTAMPS = st.one_of(_TIMESTAMPS, st.none())


def _set_times(message: Message, times: Mapping[str, timestamp_pb2.Timestamp | None]) -> None:
    for name, value in times.items():
        if value is not None:
            getattr(message, name).CopyFrom(value)


@FUZZ
@given(
    spec=st.one_of(st.sampled_from(["cron", "interval"]), _TIMESTAMPS),  # a Timestamp: once
    zone=st.sampled_from(["UTC", "Pacific/Kiritimati", "Pacific/Pago_Pago", "Europe/Berlin"]),
    start=_OPTIONAL_TIMESTAMPS,
    end=_OPTIONAL_TIMESTAMPS,
)
async def test_fuzzed_schedule_times_are_never_internal(
    world: World,
    spec: str | timestamp_pb2.Timestamp,
    zone: str,
    start: timestamp_pb2.Timestamp | None,
    end: timestamp_pb2.Timestamp | None,
) -> None:
    schedule = job_pb2.Schedule(time_zone=zone)
    if spec == "cron":
        schedule.cron = "0 3 * * *"
    elif spec == "interval":
        schedule.interval.every.CopyFrom(dur(366 * 86400))
    else:
        assert isinstance(spec, timestamp_pb2.Timestamp)
        schedule.once.CopyFrom(spec)
    _set_times(schedule, {"start_time": start, "end_time": end})
    job = make_job(f"fuzz-{uuid.uuid4().hex}", schedule=schedule)
    fields = ("schedule.start_time", "schedule.end_time", "schedule.once")
    call = world.api.jobs.CreateJob(pb.CreateJobRequest(job=job), metadata=world.md)
    await assert_refused_cleanly(world, call, fields)
    preview = world.api.jobs.PreviewSchedule(
        pb.PreviewScheduleRequest(schedule=schedule, after=start), metadata=world.md
    )
    await assert_refused_cleanly(world, preview, (*fields, "after"))


_JOB_REFS = st.one_of(
    st.text(max_size=80),
    st.from_regex(r"[a-z][a-z0-9-]{0,70}", fullmatch=True),  # client ids and near misses
    st.uuids().map(str),
    st.uuids().map(lambda value: value.hex),
)


@FUZZ
@given(text=_JOB_REFS)
async def test_fuzzed_job_ids_are_never_internal(world: World, text: str) -> None:
    # Named in a request: a uid, a client id (NOT_FOUND when unknown) or refused. (A
    # grpc.aio call starts when made: one at a time.)
    get = world.api.jobs.GetJob(pb.GetJobRequest(job_id=text), metadata=world.md)
    await assert_refused_cleanly(world, get, ("job_id",))
    wanted = make_job(f"fuzz-{uuid.uuid4().hex}", job_id=text)
    apply = world.api.jobs.ApplyJob(pb.ApplyJobRequest(job=wanted), metadata=world.md)
    await assert_refused_cleanly(world, apply, ("job.job_id",))
    # Chosen for a new job: created, or refused naming it.
    create = world.api.jobs.CreateJob(
        pb.CreateJobRequest(job=make_job(f"fuzz-{uuid.uuid4().hex}"), job_id=text),
        metadata=world.md,
    )
    await assert_refused_cleanly(world, create, ("job_id",))


_FLOW_KEYS = st.one_of(
    st.text(max_size=210),
    st.text(st.characters(codec="ascii"), min_size=195, max_size=205),
    st.sampled_from(["", "\x00", "a\x00b", " ", "customer=42"]),
)
_INT32 = st.integers(-(2**31), 2**31 - 1)


@FUZZ
@given(
    key=_FLOW_KEYS,
    rate=st.one_of(st.floats(), st.floats(0, 10_001), st.sampled_from([0.0, -0.0, 1e-300])),
    burst=st.one_of(_INT32, st.integers(0, 10_001)),
    running=st.one_of(_INT32, st.integers(0, 100_001)),
)
async def test_fuzzed_flow_limits_are_never_internal(
    world: World, key: str, rate: float, burst: int, running: int
) -> None:
    limit = flow_pb2.FlowLimit(key=key, rate_per_second=rate, burst=burst, max_running=running)
    before = await world.api.sql("SELECT * FROM flow_limits ORDER BY tenant_id, key")
    code, details = await outcome(
        world.api.jobs.SetFlowLimit(flow_pb2.SetFlowLimitRequest(limit=limit), metadata=world.md)
    )
    event(code.name)
    assert code in (OK, INVALID), details
    if code is INVALID:
        assert details.startswith("limit."), details
        assert await world.api.sql("SELECT * FROM flow_limits ORDER BY tenant_id, key") == before
    code, details = await outcome(
        world.api.jobs.DeleteFlowLimit(flow_pb2.DeleteFlowLimitRequest(key=key), metadata=world.md)
    )
    assert code in (OK, INVALID, grpc.StatusCode.NOT_FOUND), details
    if code is INVALID:
        assert details.startswith("key: "), details


@FUZZ
@given(
    start=_OPTIONAL_TIMESTAMPS,
    # A valid end often, so the start's checks and the arithmetic after them are reached.
    end=st.one_of(st.sampled_from([PAST, ts(86400)]), _OPTIONAL_TIMESTAMPS),
)
async def test_fuzzed_backfill_ranges_are_never_internal(
    world: World, start: timestamp_pb2.Timestamp | None, end: timestamp_pb2.Timestamp | None
) -> None:
    request = pb.BackfillJobRequest(job_id=world.job_id)
    _set_times(request, {"start_time": start, "end_time": end})
    call = world.api.jobs.BackfillJob(request, metadata=world.md)
    await assert_refused_cleanly(world, call, ("start_time", "end_time"))


@FUZZ
@given(after=_OPTIONAL_TIMESTAMPS, before=_OPTIONAL_TIMESTAMPS, at=_TIMESTAMPS)
async def test_fuzzed_run_times_are_never_internal(
    world: World,
    after: timestamp_pb2.Timestamp | None,
    before: timestamp_pb2.Timestamp | None,
    at: timestamp_pb2.Timestamp,
) -> None:
    request = pb.ListRunsRequest(job_id=world.job_id)
    _set_times(request, {"scheduled_after": after, "scheduled_before": before})
    listed = world.api.jobs.ListRuns(request, metadata=world.md)
    assert await assert_refused_cleanly(world, listed, ("scheduled_after", "scheduled_before")) in (
        OK,
        INVALID,
    )
    ref = run_pb2.RunRef(job_id=world.job_id, scheduled_at=at)
    got = world.api.jobs.GetRun(pb.GetRunRequest(ref=ref), metadata=world.md)
    assert await assert_refused_cleanly(world, got, ("ref.scheduled_at",)) in (
        OK,
        INVALID,
        grpc.StatusCode.NOT_FOUND,
    )
    expiring = world.api.admin.CreateApiToken(
        apb.CreateApiTokenRequest(role=apb.TOKEN_ROLE_ADMIN, description="fuzz", expire_time=at),
        metadata=world.api.admin_md,
    )
    assert await assert_refused_cleanly(world, expiring, ("expire_time",)) in (OK, INVALID)


_DURATION_SECONDS = st.one_of(
    st.integers(-315_576_000_001, 315_576_000_001),
    st.integers(-86400 * 400, 86400 * 400),
    st.sampled_from([0, 1, -1, 315_576_000_000, -315_576_000_000, 2**63 - 1, -(2**63)]),
)
_DURATIONS = st.builds(dur, _DURATION_SECONDS, st.one_of(st.just(0), st.integers(-(10**9), 10**9)))
_DURATION_FIELDS = (
    "schedule.interval.every",
    "schedule.interval.offset",
    "schedule.jitter",
    "policies.misfire_threshold",
    "policies.catchup_window",
    "policies.run_timeout",
    "policies.retry.base_delay",
    "policies.retry.max_delay",
)


@FUZZ
@given(values=st.fixed_dictionaries({}, optional=dict.fromkeys(_DURATION_FIELDS, _DURATIONS)))
async def test_fuzzed_durations_are_never_internal(
    world: World, values: dict[str, duration_pb2.Duration]
) -> None:
    job = make_job(f"fuzz-{uuid.uuid4().hex}")
    for path, value in values.items():
        _set_path(job, path, value)
    call = world.api.jobs.CreateJob(pb.CreateJobRequest(job=job), metadata=world.md)
    await assert_refused_cleanly(world, call, ("schedule", *_DURATION_FIELDS))
