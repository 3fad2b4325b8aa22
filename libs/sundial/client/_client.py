"""A small typed client of the JobService for Python programs (and the ``sundial`` CLI).

What it adds to the generated stub:

- the bearer token on every call, a deadline, and retries by gRPC's own retry policy (a
  service config, not a loop of ours): ``UNAVAILABLE`` with backoff, and
  ``RESOURCE_EXHAUSTED`` and ``ABORTED`` after the API's pushback where it says the same
  call may succeed later (:data:`RETRY_SERVICE_CONFIG`);
- writes that are only safe to retry with an idempotency key get one: every
  ``create_job``, ``apply_job`` and ``trigger_job`` call sends a ``request_id`` (yours,
  or a fresh UUID), so a retry after a lost answer returns the first result
  (``backfill_job`` needs none: an occurrence that has a run is not created again);
- ``datetime``/``timedelta`` in and out instead of Timestamp/Duration;
- iterators over every page of ``ListJobs``, ``ListRuns``, ``ListJobRevisions``,
  ``ListCalendars`` and ``ListNotificationChannels``;
- calendars with their dates as ``datetime.date`` (or ``"MM-DD"`` for yearly ones) and
  their kind as ``"exclude"``/``"include"``;
- ``describe_job`` with the SLO windows as ``timedelta``;
- ``get_job`` by id or, failing that, by exact name;
- ``rollback_job``: the server's ``RollbackJob``, the one rollback rule.

Errors are ``grpc.RpcError``; :func:`error_details` reads their ``google.rpc.Status``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any, Generic, TypeVar

import grpc
from google.protobuf import duration_pb2, timestamp_pb2
from google.protobuf.message import Message
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from sundial.core.tls import ClientTls, dial_sync
from sundial.v1 import bulk_pb2, calendar_pb2, job_pb2, job_service_pb2_grpc, run_pb2
from sundial.v1 import job_service_pb2 as pb

__all__ = [
    "RETRY_SERVICE_CONFIG",
    "Client",
    "Pages",
    "calendar_date",
    "calendar_kind",
    "duration",
    "error_details",
    "from_timestamp",
    "timestamp",
]

RETRY_SERVICE_CONFIG = json.dumps(
    {
        "methodConfig": [
            {
                "name": [
                    {"service": "sundial.v1.JobService"},
                    {"service": "sundial.v1.AdminService"},
                ],
                "retryPolicy": {
                    "maxAttempts": 4,
                    "initialBackoff": "0.2s",
                    "maxBackoff": "2s",
                    "backoffMultiplier": 2,
                    "retryableStatusCodes": ["UNAVAILABLE", "RESOURCE_EXHAUSTED", "ABORTED"],
                },
            }
        ]
    }
)
"""gRPC's retry policy for Sundial's API: UNAVAILABLE (a restarting or unreachable API,
a database failover) is retried up to 3 times with jittered backoff; RESOURCE_EXHAUSTED
and ABORTED only when the API pushes back with a delay (the tenant's rate limit, a write
that lost a race with another: its ``grpc-retry-pushback-ms`` trailer, the RetryInfo
delay; a database conflict, whose transaction rolled back, is such a race), never for a
quota or a stale ``expected_version`` (the API sends a negative pushback, which gRPC
does not retry). Every API write is safe to retry: creates, applies and triggers carry
a request id, a backfill skips occurrences that have a run, the rest are idempotent or
version-checked (a RollbackJob without expected_version, retried after a lost answer,
restores the same definition once more: one more revision, nothing else)."""

CHANNEL_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("grpc.enable_retries", 1),
    ("grpc.service_config", RETRY_SERVICE_CONFIG),
)
"""Channel options that turn :data:`RETRY_SERVICE_CONFIG` on."""


BATCH_APPLY_MAX = 1000
"""Jobs one BatchApplyJobs call takes (job_service.proto)."""


def timestamp(value: datetime) -> timestamp_pb2.Timestamp:
    """An aware ``datetime`` as a Timestamp (a naive one is refused: times are instants)."""
    if value.tzinfo is None:
        raise ValueError(f"{value!r} is naive: give a time zone (times are instants)")
    message = timestamp_pb2.Timestamp()
    message.FromDatetime(value.astimezone(UTC))
    return message


def from_timestamp(message: timestamp_pb2.Timestamp) -> datetime:
    """A Timestamp as an aware UTC ``datetime``."""
    return message.ToDatetime(UTC)


def duration(value: timedelta) -> duration_pb2.Duration:
    """A ``timedelta`` as a Duration."""
    message = duration_pb2.Duration()
    message.FromTimedelta(value)
    return message


_CALENDAR_KINDS = {
    "CALENDAR_KIND_EXCLUDE": calendar_pb2.CALENDAR_KIND_EXCLUDE,
    "CALENDAR_KIND_INCLUDE": calendar_pb2.CALENDAR_KIND_INCLUDE,
}


def calendar_kind(kind: int | str) -> calendar_pb2.CalendarKind:
    """A ``CalendarKind`` from its value or its name (``"exclude"``, ``"INCLUDE"``,
    ``"CALENDAR_KIND_EXCLUDE"``); ValueError for anything else."""
    for value in _CALENDAR_KINDS.values():
        if kind == value:
            return value
    name = str(kind).strip().upper()
    name = name if name.startswith("CALENDAR_KIND_") else f"CALENDAR_KIND_{name}"
    if isinstance(kind, int) or name not in _CALENDAR_KINDS:
        raise ValueError(f"{kind!r} is not a calendar kind: exclude or include")
    return _CALENDAR_KINDS[name]


def calendar_date(value: date | str) -> str:
    """A calendar date as the API spells it: a ``date`` as ``YYYY-MM-DD``; a string as
    given (``"2026-12-24"``, or ``"12-25"`` for every year; the API checks it)."""
    if isinstance(value, datetime):
        raise TypeError(f"{value!r} is a datetime: calendar dates are local dates, give a date")
    return value.isoformat() if isinstance(value, date) else value


def error_details(error: grpc.RpcError) -> dict[str, Message]:
    """The ``google.rpc.Status`` details of a failed call, by type name (``ErrorInfo``,
    ``BadRequest``, ``RetryInfo``, ``PreconditionFailure``, ``RequestInfo``)."""
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    found: dict[str, Message] = {}
    for packed in status.details if status is not None else ():
        for kind in (
            error_details_pb2.ErrorInfo,
            error_details_pb2.BadRequest,
            error_details_pb2.RetryInfo,
            error_details_pb2.PreconditionFailure,
            error_details_pb2.RequestInfo,
        ):
            if packed.Is(kind.DESCRIPTOR):
                detail = kind()
                packed.Unpack(detail)
                found[kind.__name__] = detail
    return found


T = TypeVar("T")

MAX_PAGE_SIZE = 1000
"""The largest page the API returns (job_service.proto PAGINATION)."""


class Pages(Generic[T]):
    """The ``field`` items of every page ``call`` answers for ``request``, fetched as
    iterated (page after page, each of ``request.page_size`` or :data:`MAX_PAGE_SIZE`),
    at most ``limit`` of them (0: all). Works with any List call of JobService or
    AdminService: ``Pages(lambda r: stub.ListTenants(r, metadata=md), request, "tenants")``.

    Attributes:
        next_page_token: After iterating, where a later listing would go on (empty when
            every page was read).
    """

    def __init__(
        self, call: Callable[[Any], Any], request: Any, field: str, *, limit: int = 0
    ) -> None:
        self._call = call
        self._request = request
        self._field = field
        self._limit = limit
        self.next_page_token = ""

    def __iter__(self) -> Iterator[T]:
        request = self._request
        size = request.page_size or MAX_PAGE_SIZE
        taken = 0
        while True:
            request.page_size = min(size, self._limit - taken) if self._limit else size
            page = self._call(request)
            items = getattr(page, self._field)
            yield from items
            taken += len(items)
            self.next_page_token = request.page_token = page.next_page_token
            if not page.next_page_token or (self._limit and taken >= self._limit):
                return


class Client:
    """JobService for one tenant token. Use as a context manager (or call :meth:`close`).

    Args:
        api: The API's ``host:port``.
        token: A tenant token.
        tls: TLS settings (None: plaintext, for loopback and a mesh that encrypts).
        timeout_s: Deadline of each call, retries included.
    """

    def __init__(
        self, api: str, token: str, *, tls: ClientTls | None = None, timeout_s: float = 30.0
    ) -> None:
        self._channel = dial_sync(api, tls, CHANNEL_OPTIONS)
        self.stub = job_service_pb2_grpc.JobServiceStub(self._channel)
        """The generated stub, for what this class does not wrap."""
        self._metadata = (("authorization", f"Bearer {token}"),)
        self._timeout_s = timeout_s

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        """The call metadata (the bearer token), for calls made on :attr:`stub`."""
        return self._metadata

    def _call(self, method: str, request: Message) -> Any:
        return getattr(self.stub, method)(request, metadata=self._metadata, timeout=self._timeout_s)

    def pages(self, method: str, request: Any, field: str, *, limit: int = 0) -> Pages[Any]:
        """The ``field`` items of every page the List call ``method`` answers (:class:`Pages`)."""
        return Pages(lambda r: self._call(method, r), request, field, limit=limit)

    def _pages(self, method: str, request: Any, field: str) -> Iterator[Any]:
        return iter(self.pages(method, request, field))

    # --- jobs ---------------------------------------------------------------------

    def create_job(self, job: job_pb2.Job, *, request_id: str = "") -> job_pb2.Job:
        """Create ``job``; safe to retry (a request id is sent)."""
        request = pb.CreateJobRequest(job=job, request_id=request_id or str(uuid.uuid4()))
        return self._call("CreateJob", request).job

    def apply_job(
        self, job: job_pb2.Job, *, expected_version: int = 0, request_id: str = ""
    ) -> tuple[job_pb2.Job, int]:
        """Create ``job`` by its ``job_id`` or update it to match (``ApplyJob``); safe to
        retry (a request id is sent).

        Returns:
            The job and the ``ApplyOutcome`` (CREATED, UPDATED or UNCHANGED).
        """
        request = pb.ApplyJobRequest(
            job=job,
            expected_version=expected_version,
            request_id=request_id or str(uuid.uuid4()),
        )
        answer = self._call("ApplyJob", request)
        return answer.job, answer.outcome

    def batch_apply_jobs(
        self, jobs: Sequence[job_pb2.Job], *, validate_only: bool = False
    ) -> list[pb.BatchApplyJobsResult]:
        """Apply ``jobs`` by their ``job_id`` (``BatchApplyJobs``), 1,000 per call; one
        result per job, in order (an item's error is in its result). Safe to retry:
        applied items answer UNCHANGED."""
        results: list[pb.BatchApplyJobsResult] = []
        for start in range(0, len(jobs), BATCH_APPLY_MAX):
            request = pb.BatchApplyJobsRequest(
                jobs=jobs[start : start + BATCH_APPLY_MAX], validate_only=validate_only
            )
            results.extend(self._call("BatchApplyJobs", request).results)
        return results

    def count_jobs(self, selector: str = "", *, search: str = "", name_prefix: str = "") -> int:
        """How many of the tenant's jobs the filters match (``CountJobs``)."""
        request = bulk_pb2.CountJobsRequest(
            selector=selector, search=search, name_prefix=name_prefix
        )
        return int(self._call("CountJobs", request).count)

    def bulk(self, method: str, request: Any) -> Any:
        """A bulk action (``PauseJobs``, ``ResumeJobs``, ``DeleteJobs``) over every job
        its filters match: called again while jobs remain (each call acts on at most its
        ``limit``), once with ``dry_run``. The answer sums the calls: ``affected`` and
        ``job_ids`` over all of them, ``matched`` and ``remaining`` from the last."""
        answer = self._call(method, request)
        while not request.dry_run and answer.remaining and answer.affected:
            more = self._call(method, request)
            more.affected += answer.affected
            more.job_ids[:0] = list(answer.job_ids)
            answer = more
        return answer

    def get_job(self, job: str) -> job_pb2.Job:
        """The job with this id, or else the one with this exact name.

        Raises:
            grpc.RpcError: NOT_FOUND when neither exists.
        """
        try:
            return self._call("GetJob", pb.GetJobRequest(job_id=job)).job
        except grpc.RpcError as exc:
            if exc.code() not in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT):
                raise
            for candidate in self.list_jobs(name_prefix=job):
                if candidate.name == job:
                    return candidate
                if candidate.name > job:
                    break
            raise

    def describe_job(
        self, job_id: str, *, slo_windows: tuple[timedelta, ...] = ()
    ) -> pb.DescribeJobResponse:
        """The job with its recent runs, next fire times, active runs and its SLO over
        each of ``slo_windows`` (empty: 1 h, 24 h and 7 days)."""
        request = pb.DescribeJobRequest(
            job_id=job_id, slo_windows=[duration(window) for window in slo_windows]
        )
        return self._call("DescribeJob", request)

    def job_revisions(self, job_id: str, *, page_size: int = 100) -> Iterator[pb.JobRevision]:
        """Every revision of the job (who changed what, and the definition it had),
        newest first, page after page."""
        request = pb.ListJobRevisionsRequest(job_id=job_id, page_size=page_size)
        return self._pages("ListJobRevisions", request, "revisions")

    def rollback_job(self, job_id: str, version: int, *, expected_version: int = 0) -> job_pb2.Job:
        """Restore the definition revision ``version`` had, as a new revision
        (``RollbackJob``; paused state unchanged). With ``expected_version`` (the version
        you looked at), a change in between is refused (ABORTED) instead of rolled over.
        """
        request = pb.RollbackJobRequest(
            job_id=job_id, version=version, expected_version=expected_version
        )
        return self._call("RollbackJob", request).job

    def list_jobs(
        self,
        *,
        name_prefix: str = "",
        labels: Mapping[str, str] | None = None,
        paused: bool | None = None,
        page_size: int = 1000,
    ) -> Iterator[job_pb2.Job]:
        """Every job matching the filters, by name, page after page."""
        request = pb.ListJobsRequest(
            name_prefix=name_prefix, labels=dict(labels or {}), page_size=page_size
        )
        if paused is not None:
            request.paused = paused
        return self._pages("ListJobs", request, "jobs")

    def trigger_job(self, job_id: str, *, request_id: str = "") -> run_pb2.Run:
        """Run the job now; safe to retry (a request id is sent)."""
        request = pb.TriggerJobRequest(job_id=job_id, request_id=request_id or str(uuid.uuid4()))
        return self._call("TriggerJob", request).run

    def backfill_job(self, job_id: str, start: datetime, end: datetime) -> list[run_pb2.Run]:
        """Runs for every occurrence in [start, end), however many calls that takes."""
        return list(self.backfill(job_id, start, end).runs)

    def backfill(self, job_id: str, start: datetime, end: datetime) -> pb.BackfillJobResponse:
        """:meth:`backfill_job` as one answer: every run created (one call per 1,000
        occurrences) and how many occurrences already had one."""
        request = pb.BackfillJobRequest(
            job_id=job_id, start_time=timestamp(start), end_time=timestamp(end)
        )
        created = pb.BackfillJobResponse()
        while True:
            page = self._call("BackfillJob", request)
            created.runs.extend(page.runs)
            created.existing_count += page.existing_count
            if not page.truncated:
                return created
            request.start_time.CopyFrom(page.next_start_time)

    # --- runs ---------------------------------------------------------------------

    def list_runs(
        self,
        job_id: str,
        *,
        after: datetime | None = None,
        before: datetime | None = None,
        statuses: tuple[int, ...] = (),
        kinds: tuple[int, ...] = (),
        page_size: int = 1000,
    ) -> Iterator[run_pb2.Run]:
        """Every run of the job matching the filters, newest first, page after page."""
        request = pb.ListRunsRequest(
            job_id=job_id,
            statuses=statuses,  # type: ignore[arg-type]
            kinds=kinds,  # type: ignore[arg-type]
            page_size=page_size,
        )
        if after is not None:
            request.scheduled_after.CopyFrom(timestamp(after))
        if before is not None:
            request.scheduled_before.CopyFrom(timestamp(before))
        return self._pages("ListRuns", request, "runs")

    # --- calendars ----------------------------------------------------------------

    def list_calendars(self, *, page_size: int = 1000) -> Iterator[calendar_pb2.Calendar]:
        """Every calendar of the tenant, by name, page after page."""
        request = pb.ListCalendarsRequest(page_size=page_size)
        return self._pages("ListCalendars", request, "calendars")

    def get_calendar(self, name: str) -> calendar_pb2.Calendar:
        """The calendar with this name (NOT_FOUND if the tenant has none)."""
        return self._call("GetCalendar", pb.GetCalendarRequest(name=name)).calendar

    def create_calendar(
        self,
        name: str,
        *,
        kind: int | str,
        dates: Iterable[date | str] = (),
        description: str = "",
    ) -> calendar_pb2.Calendar:
        """Create a calendar; returns it as stored (dates sorted, duplicates dropped).

        The name is its identity: a retry after a lost answer sees ALREADY_EXISTS, and
        :meth:`get_calendar` then shows what the first call stored.

        Args:
            name: How schedules name it (``Schedule.calendars``).
            kind: ``"exclude"`` (holidays) or ``"include"`` (only these dates), or a
                ``CalendarKind`` value.
            dates: ``date`` objects, ``"YYYY-MM-DD"`` or ``"MM-DD"`` (every year).
            description: Free text.
        """
        calendar = calendar_pb2.Calendar(
            name=name,
            kind=calendar_kind(kind),
            dates=[calendar_date(d) for d in dates],
            description=description,
        )
        return self._call("CreateCalendar", pb.CreateCalendarRequest(calendar=calendar)).calendar

    def update_calendar(
        self,
        name: str,
        *,
        kind: int | str | None = None,
        dates: Iterable[date | str] | None = None,
        description: str | None = None,
        expected_version: int = 0,
    ) -> tuple[calendar_pb2.Calendar, int]:
        """Change the fields given (the others stay); ``dates`` replaces every date. With
        ``expected_version``, only at that version (ABORTED otherwise).

        Returns:
            The calendar after the change and how many jobs name it (each rescheduled).
        """
        calendar = calendar_pb2.Calendar(name=name)
        paths = []
        if kind is not None:
            calendar.kind = calendar_kind(kind)
            paths.append("kind")
        if dates is not None:
            calendar.dates.extend(calendar_date(d) for d in dates)
            paths.append("dates")
        if description is not None:
            calendar.description = description
            paths.append("description")
        if not paths:
            # An empty mask means every field: refuse it rather than clear the others.
            raise ValueError("update_calendar needs kind, dates or description")
        request = pb.UpdateCalendarRequest(
            calendar=calendar,
            update_mask={"paths": paths},
            expected_version=expected_version,
        )
        answer = self._call("UpdateCalendar", request)
        return answer.calendar, answer.jobs_rescheduled

    def delete_calendar(self, name: str, *, expected_version: int = 0) -> None:
        """Delete the calendar (FAILED_PRECONDITION while a schedule names it)."""
        request = pb.DeleteCalendarRequest(name=name, expected_version=expected_version)
        self._call("DeleteCalendar", request)

    # --- notification channels ----------------------------------------------------

    def list_notification_channels(
        self, *, page_size: int = 1000
    ) -> Iterator[pb.NotificationChannel]:
        """Every notification channel of the tenant, by display name, page after page."""
        request = pb.ListNotificationChannelsRequest(page_size=page_size)
        return self._pages("ListNotificationChannels", request, "channels")

    def get_notification_channel(self, channel_id: str) -> pb.NotificationChannel:
        """The notification channel with this id."""
        request = pb.GetNotificationChannelRequest(channel_id=channel_id)
        return self._call("GetNotificationChannel", request).channel
