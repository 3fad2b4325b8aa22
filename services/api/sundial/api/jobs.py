"""Job operations of JobService: validate, compute schedules, write through the store.

Every write validates completely before touching the database, and each write is one
transaction, so a refused call changes nothing. Writes that depend on what they read
(UpdateJob, ResumeJob, ApplyJob) are optimistic: read, compute outside any transaction
(a DNS lookup must never hold a row lock), then write only if the version is unchanged.

A request names a job by its uid or by its client-chosen id (:data:`JobRef`); the
servicer resolves the latter with :meth:`JobManager.resolve` and the managers work on
uids only. ApplyJob is CreateJob with a client id when the tenant has no such job, else
UpdateJob of the whole definition unless it is already equal.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime, timedelta

from opentelemetry import trace

from sundial.api import slo, validation
from sundial.api.egress import EgressPolicies
from sundial.api.kit import (
    Pager,
    RequestKey,
    Requests,
    check_expected_version,
    require_version,
)
from sundial.api.kit.paging import NUMBER, PAGE_BYTES, Text
from sundial.api.model import (
    Applied,
    ApplyOutcome,
    Job,
    JobDescription,
    JobFilter,
    JobRef,
    JobRevision,
    JobStats,
    NewJob,
    Page,
    Preview,
    PreviewEntry,
    RunFilter,
    as_revised,
)
from sundial.api.offload import Offload
from sundial.api.runs import with_due
from sundial.api.store import CalendarChanged, RequestClaim, RequestRecord, Store
from sundial.api.validation import TargetGuard, field_prefix
from sundial.core import tracing
from sundial.core.clock import Clock
from sundial.core.errors import (
    Aborted,
    AlreadyExists,
    InvalidArgument,
    NotFound,
    version_mismatch,
)
from sundial.core.partition import partition_of
from sundial.job import JobSpec
from sundial.run import GrpcTarget, HttpTarget
from sundial.schedule import Calendar, CompiledSchedule, OnceSpec, Schedule, compile_schedule

CREATE_JOB = "CreateJob"
BATCH_CREATE_JOBS = "BatchCreateJobs"
APPLY_JOB = "ApplyJob"

_REVISIONS = Pager("job_revisions", (NUMBER,))
_JOBS = Pager("jobs", (Text(validation.MAX_NAME_CHARS),))

PREVIEW_KEY = "00000000-0000-0000-0000-000000000000"
"""Hash key for Jenkins ``H`` and jitter in a preview without a job (job_service.proto)."""

_US = timedelta(microseconds=1)
_OPTIMISTIC_ATTEMPTS = 5
# Jobs one page of ListJobs(target_forbidden) looks at (each distinct host resolved once).
_FORBIDDEN_SCAN = 1000


def first_fire(
    compiled: CompiledSchedule,
    schedule: Schedule,
    now: datetime,
    *,
    fired_count: int = 0,
    last_fire: datetime | None = None,
    include_recent_once: bool = True,
) -> datetime | None:
    """The next nominal fire time of a new or changed schedule.

    Strictly after ``now`` (and after ``last_fire``: fire times of a job only increase,
    so a new schedule can never produce a run key that exists). A ``once`` at most
    ``misfire_threshold`` in the past (validation allowed it) fires at once when
    ``include_recent_once``.
    """
    after = now
    # The single-spec form only: in a list, a passed `once` simply does not fire (looking
    # back for it would bring back the other specs' recent times too).
    if include_recent_once and not schedule.spec_list and isinstance(schedule.spec, OnceSpec):
        after = min(now, schedule.spec.at - _US)
    if last_fire is not None and last_fire > after:
        after = last_fire
    fire = compiled.next_fire(after, fired_count)
    return None if fire is None else fire.at


def compiled_of(job: Job) -> CompiledSchedule:
    """The job's stored (already validated) schedule, compiled with its calendars."""
    return compile_schedule(job.spec.schedule, job_id=str(job.job_id), calendars=job.calendars)


def preview(compiled: CompiledSchedule, after: datetime, count: int, fired_count: int) -> Preview:
    """``count`` fire times after ``after`` plus the DST-dropped times between them."""
    entries = compiled.preview(after, count, fired_count=fired_count)
    fires = [e for e in entries if not e.dropped]
    if len(fires) < count:
        exhausted = True
    else:
        exhausted = compiled.next_fire(fires[-1].at, fired_count + len(fires)) is None
    return Preview(
        entries=tuple(PreviewEntry(e, compiled.dispatch_at(e.at)) for e in entries),
        exhausted=exhausted,
    )


def _prefix_upper_bound(prefix: str) -> str | None:
    """The smallest string above every string starting with ``prefix`` (byte order).

    UTF-8 byte order is code point order, so incrementing the last code point that can
    be incremented gives the bound; None when there is none (all U+10FFFF).
    """
    chars = list(prefix)
    while chars:
        code = ord(chars[-1]) + 1
        if 0xD800 <= code <= 0xDFFF:  # surrogates cannot be encoded: skip the block
            code = 0xE000
        if code <= 0x10FFFF:
            chars[-1] = chr(code)
            return "".join(chars)
        chars.pop()
    return None


def _estimated_bytes(job: Job) -> int:
    return _spec_bytes(job.spec, full=True)


def _spec_bytes(spec: JobSpec, *, full: bool) -> int:
    """An upper estimate of a job's size on the wire (``full``: with its payload and
    header values; else as JOB_VIEW_BASIC shows it)."""
    size = 600 + len(spec.description) * 4 + len(spec.pause_note) * 4
    size += sum(len(k) + len(v) * 4 for k, v in spec.labels.items())
    target = spec.target
    if isinstance(target, HttpTarget):
        size += len(target.url) + sum(len(k) for k in target.headers)
        if full:
            size += sum(len(v) * 4 for v in target.headers.values())
    elif isinstance(target, GrpcTarget):
        size += len(target.address) + sum(len(k) for k in target.metadata)
        if full:
            size += sum(len(v) for v in target.metadata.values())
    return size + (len(spec.payload) if full else 0)


class JobManager:
    """CreateJob, BatchCreateJobs, GetJob, DescribeJob, ListJobs, UpdateJob, DeleteJob,
    PauseJob, ResumeJob and PreviewSchedule for one tenant at a time.

    Args:
        store: Database access.
        guard: The SSRF check for targets.
        egress: The tenants' egress policies the guard applies.
        clock: The source of "now".
        request_retention: How long request ids are remembered.
    """

    def __init__(
        self,
        store: Store,
        guard: TargetGuard,
        egress: EgressPolicies,
        clock: Clock,
        *,
        request_retention: timedelta = timedelta(hours=24),
        offload: Offload | None = None,
    ) -> None:
        self._store = store
        self._guard = guard
        self._egress = egress
        self._clock = clock
        self._requests = Requests(store, clock, request_retention)
        self._offload = offload or Offload()

    # --- idempotency ---------------------------------------------------------------------

    async def _create_once(
        self,
        tenant_id: str,
        key: RequestKey,
        work: Callable[[RequestClaim | None], Awaitable[list[Job]]],
    ) -> list[Job]:
        """``work`` (a create) done once per request id: a repeat answers the jobs the
        first call created, as they are now (NOT_FOUND if one is gone)."""

        async def replay(record: RequestRecord) -> list[Job]:
            ids = list(record.job_ids) if record.job_id is None else [record.job_id]
            jobs = await self._store.get_jobs(tenant_id, ids)
            if len(jobs) != len(ids):
                raise NotFound(
                    f"request_id {key.request_id!r} already created "
                    f"{'this job' if len(ids) == 1 else 'these jobs'}, and "
                    f"{'it was' if len(ids) == 1 else 'some were'} deleted since"
                )
            return jobs

        return await self._requests.once(tenant_id, key, work, replay)

    # --- create ---------------------------------------------------------------------------

    def _prepare(
        self,
        spec: JobSpec,
        now: datetime,
        prefix: str = "",
        shared: validation.SharedChecks | None = None,
        fires: dict[int, tuple[CompiledSchedule, datetime | None]] | None = None,
        *,
        client_id: str | None = None,
        calendars: Mapping[str, Calendar] | None = None,
    ) -> NewJob:
        """Validate one new job and compute its first fire time.

        Args:
            client_id: Its client-chosen id (already checked), if any.
            shared: Checks shared by the jobs of one request (BatchCreateJobs).
            fires: First fire times by compiled schedule (``id``), shared likewise: a
                schedule compiled once for many jobs fires first at the same instant.
            calendars: The tenant's calendars the schedule names (:meth:`_calendars`).
        """
        job_id = uuid.uuid4()
        with field_prefix(prefix):
            spec, compiled = validation.check_job_spec(
                spec, str(job_id), now=now, shared=shared, calendars=calendars
            )
        known = fires.get(id(compiled)) if fires is not None else None
        if known is not None and known[0] is compiled:
            next_run_at = known[1]
        else:
            next_run_at = first_fire(compiled, spec.schedule, now)
            if fires is not None:  # holding the schedule keeps its id from being reused
                fires[id(compiled)] = (compiled, next_run_at)
        return NewJob(
            job_id=job_id,
            spec=spec,
            partition_id=partition_of(job_id),
            next_run_at=next_run_at,
            client_id=client_id,
            calendars=_named(spec.schedule, calendars),
        )

    async def _calendars(self, tenant_id: str, specs: Sequence[JobSpec]) -> dict[str, Calendar]:
        """The tenant's calendars the schedules of ``specs`` name (one read; a name it
        does not have is left out, and validation names the field)."""
        names = sorted({name for spec in specs for name in spec.schedule.calendars})
        return await self._store.calendars_named(tenant_id, names) if names else {}

    @staticmethod
    def _created(tenant_id: str, new: NewJob, now: datetime) -> Job:
        return Job(
            job_id=new.job_id,
            tenant_id=tenant_id,
            spec=new.spec,
            partition_id=new.partition_id,
            next_run_at=new.next_run_at,
            version=1,
            create_time=now,
            update_time=now,
            stats=JobStats(),
            client_id=new.client_id,
            calendars={c.name: c for c in new.calendars},
        )

    async def _create(
        self,
        tenant_id: str,
        spec: JobSpec,
        *,
        client_id: str | None,
        claim: RequestClaim | None,
        validate_only: bool = False,
    ) -> Job:
        """Validate one job and insert it (unless ``validate_only``)."""
        for attempt in range(_OPTIMISTIC_ATTEMPTS):
            calendars = await self._calendars(tenant_id, [spec])
            now = self._clock.now()
            new = self._prepare(spec, now, client_id=client_id, calendars=calendars)
            assert new.spec.target is not None
            await self._guard.check(new.spec.target, await self._egress.policy(tenant_id))
            if validate_only:
                break
            try:
                await self._store.create_jobs(
                    tenant_id, [new], now, claim=claim, traceparent=_call_traceparent()
                )
                break
            except CalendarChanged:
                if attempt == _OPTIMISTIC_ATTEMPTS - 1:
                    raise  # compute again with the calendars' new contents
        return self._created(tenant_id, new, now)

    async def create_job(
        self,
        tenant_id: str,
        spec: JobSpec,
        *,
        client_id: str | None = None,
        request_id: str = "",
        request_hash: bytes = b"",
    ) -> Job:
        """Validate and create one job; a repeated request_id returns the first job.

        Args:
            client_id: The client-chosen id (checked by the caller), or None.
        """

        async def work(claim: RequestClaim | None) -> list[Job]:
            return [await self._create(tenant_id, spec, client_id=client_id, claim=claim)]

        key = RequestKey(CREATE_JOB, request_id, request_hash)
        return (await self._create_once(tenant_id, key, work))[0]

    async def batch_create(
        self,
        tenant_id: str,
        specs: Sequence[JobSpec],
        *,
        client_ids: Sequence[str | None] = (),
        request_id: str = "",
        request_hash: bytes = b"",
    ) -> list[Job]:
        """Validate and create up to 1,000 jobs in one transaction: all or none.

        Args:
            client_ids: Each job's client-chosen id (checked by the caller) or None;
                empty: none has one.
        """
        validation.check_request_id(request_id)
        if not 1 <= len(specs) <= validation.MAX_BATCH:
            raise InvalidArgument(
                "jobs", f"must hold 1 to {validation.MAX_BATCH} jobs, got {len(specs)}"
            )
        ids = list(client_ids) or [None] * len(specs)
        first_holder: dict[str, int] = {}
        for i, client_id in enumerate(ids):
            if client_id is not None and first_holder.setdefault(client_id, i) != i:
                raise InvalidArgument(
                    f"jobs[{i}].job_id", f"same id as jobs[{first_holder[client_id]}]"
                )

        async def work(claim: RequestClaim | None) -> list[Job]:
            return await self._create_all(tenant_id, specs, ids, claim)

        key = RequestKey(BATCH_CREATE_JOBS, request_id, request_hash)
        return await self._create_once(tenant_id, key, work)

    async def _create_all(
        self,
        tenant_id: str,
        specs: Sequence[JobSpec],
        ids: Sequence[str | None],
        claim: RequestClaim | None,
    ) -> list[Job]:
        """Validate ``specs`` together and insert them in one transaction."""
        calendars = await self._calendars(tenant_id, specs)
        now = self._clock.now()
        shared = validation.SharedChecks()
        fires: dict[int, tuple[CompiledSchedule, datetime | None]] = {}
        prepared = [
            self._prepare(
                spec, now, f"jobs[{i}].", shared, fires, client_id=client_id, calendars=calendars
            )
            for i, (spec, client_id) in enumerate(zip(specs, ids, strict=True))
        ]
        first_index: dict[str, int] = {}
        for i, new in enumerate(prepared):
            seen = first_index.setdefault(new.spec.name, i)
            if seen != i:
                raise InvalidArgument(f"jobs[{i}].name", f"same name as jobs[{seen}]")
        await self._guard.check_all(
            [(new.spec.target, f"jobs[{i}].target") for i, new in enumerate(prepared)],  # type: ignore[misc]
            await self._egress.policy(tenant_id),
        )
        await self._store.create_jobs(
            tenant_id,
            prepared,
            now,
            claim=claim,
            single=False,
            traceparent=_call_traceparent(),
        )
        return [self._created(tenant_id, new, now) for new in prepared]

    # --- read -----------------------------------------------------------------------------

    async def resolve(self, tenant_id: str, ref: JobRef) -> uuid.UUID:
        """The uid a request's job reference names: a uid as is, a client id looked up
        in the tenant's jobs (NOT_FOUND when it has none, as for an unknown uid)."""
        if isinstance(ref, uuid.UUID):
            return ref
        uid = await self._store.job_uid(tenant_id, ref)
        if uid is None:
            raise NotFound(f"job {ref} not found")
        return uid

    async def get_job(self, tenant_id: str, job_id: uuid.UUID) -> Job:
        """The tenant's job; NOT_FOUND for an unknown or foreign id."""
        job = await self._store.get_job(tenant_id, job_id)
        if job is None:
            raise NotFound(f"job {job_id} not found")
        return job

    async def job_at(self, tenant_id: str, job_id: uuid.UUID, version: int) -> Job:
        """The job as revision ``version`` left it: its definition then, its ids as now
        (no stats, no next_run_at: those are not history)."""
        if version < 1:
            raise InvalidArgument("version", f"must be 1 or more, got {version}")
        job = await self.get_job(tenant_id, job_id)
        if version > job.version:  # checked before any arithmetic on it (int64 edges)
            raise NotFound(f"job {job_id} has no revision {version} (it is at {job.version})")
        found = await self._store.job_revisions(
            tenant_id, job_id, before_version=version + 1, limit=1
        )
        if not found or found[0].version != version:
            raise NotFound(f"job {job_id} has no revision {version} (it is at {job.version})")
        return as_revised(job, found[0])

    async def job_revisions(
        self,
        tenant_id: str,
        job_id: uuid.UUID,
        *,
        page_size: int,
        page_token: str,
        full: bool = False,
    ) -> Page[JobRevision]:
        """A page of the job's revisions, newest first; NOT_FOUND for an unknown job
        (a deleted job's history stays, but only its id could name it). ``full``: the
        answer will carry payloads and header values (the page's byte budget counts
        them)."""
        await self.get_job(tenant_id, job_id)
        cursor = _REVISIONS.open(page_size, page_token, {"job": str(job_id)})
        before = None if cursor.after is None else cursor.after[0]
        revisions = await self._store.job_revisions(
            tenant_id, job_id, before_version=before, limit=cursor.limit
        )
        return cursor.page(
            revisions,
            lambda revision: [revision.version],
            size_of=lambda revision: _spec_bytes(revision.spec, full=full),
        )

    async def describe_job(
        self, tenant_id: str, job_id: uuid.UUID, slo_windows: Sequence[timedelta] = ()
    ) -> JobDescription:
        """The job, its 10 latest runs, its next 10 fire times, its live run count and its
        SLO over each window (the defaults when none is given)."""
        windows = slo.check_windows(slo_windows)
        job = await self.get_job(tenant_id, job_id)
        compiled = compiled_of(job)
        runs = await self._store.list_runs(tenant_id, job_id, RunFilter(), before=None, limit=10)
        active = await self._store.count_active_runs(job_id)
        now = self._clock.now()
        threshold = job.spec.policies.lateness_threshold
        counts, unsure, misfires = await self._store.slo_inputs(
            tenant_id,
            job_id,
            [now - w for w in windows],
            now,
            threshold=threshold,
            jitter=job.spec.schedule.jitter,
        )
        return JobDescription(
            job=job,
            recent_runs=[with_due(run, compiled) for run in runs],
            upcoming=preview(compiled, now, 10, job.fired_count),
            active_runs=active,
            slo=slo.summarise(
                windows, now, threshold, compiled, counts=counts, unsure=unsure, misfires=misfires
            ),
        )

    async def list_jobs(
        self, tenant_id: str, job_filter: JobFilter, *, page_size: int, page_token: str
    ) -> Page[Job]:
        """A page of the tenant's jobs ordered by name."""
        cursor = _JOBS.open(
            page_size,
            page_token,
            {
                "labels": dict(job_filter.labels),
                "prefix": job_filter.name_prefix,
                "paused": job_filter.paused,
                "forbidden": job_filter.target_forbidden,
            },
        )
        validation.check_labels(job_filter.labels, "labels", limit=validation.MAX_LABEL_FILTERS)
        validation.check_text(
            job_filter.name_prefix, "name_prefix", validation.MAX_NAME_PREFIX_CHARS
        )
        after = "" if cursor.after is None else cursor.after[0]
        upper = _prefix_upper_bound(job_filter.name_prefix) if job_filter.name_prefix else None
        if job_filter.target_forbidden:
            jobs, resume_after = await self._forbidden(
                tenant_id, job_filter, after, upper, cursor.size
            )
            return Page(jobs, cursor.token([resume_after]) if resume_after else "")
        jobs = await self._store.list_jobs(
            tenant_id, job_filter, after=after, name_upper_bound=upper, limit=cursor.limit
        )
        return cursor.page(jobs, lambda job: [job.spec.name], size_of=_estimated_bytes)

    async def _forbidden(
        self, tenant_id: str, job_filter: JobFilter, after: str, upper: str | None, size: int
    ) -> tuple[list[Job], str | None]:
        """Up to ``size`` of the next :data:`_FORBIDDEN_SCAN` jobs whose target the
        tenant's current egress policy forbids, and the name the next page starts after
        (None on the last page): the last job looked at, so a page of allowed jobs is
        not looked at again."""
        scanned = await self._store.list_jobs(
            tenant_id, job_filter, after=after, name_upper_bound=upper, limit=_FORBIDDEN_SCAN + 1
        )
        more = len(scanned) > _FORBIDDEN_SCAN
        scanned = scanned[:_FORBIDDEN_SCAN]
        with_target = [job for job in scanned if job.spec.target is not None]
        verdicts = await self._guard.verdicts(
            [job.spec.target for job in with_target],  # type: ignore[misc]
            await self._egress.policy(tenant_id),
        )
        forbidden = {id(job) for job, v in zip(with_target, verdicts, strict=True) if v}
        found: list[Job] = []
        budget = PAGE_BYTES
        for job in scanned:
            if id(job) not in forbidden:
                continue
            budget -= _estimated_bytes(job)
            if len(found) == size or (budget < 0 and found):
                return found, found[-1].spec.name
            found.append(job)
        return found, scanned[-1].spec.name if more else None

    # --- change ---------------------------------------------------------------------------

    async def _conflict(
        self, tenant_id: str, job_id: uuid.UUID, expected_version: int, named: JobRef | None = None
    ) -> Exception:
        """Why a conditional write matched nothing: NOT_FOUND or ABORTED (about ``named``,
        the id the request used, when given)."""
        version = await self._store.job_version(tenant_id, job_id)
        shown = job_id if named is None else named
        if version is None:
            return NotFound(f"job {shown} not found")
        return version_mismatch("job", shown, version, expected_version)

    async def update_job(
        self,
        tenant_id: str,
        job_id: uuid.UUID,
        *,
        expected_version: int,
        apply: Callable[[Job], JobSpec],
    ) -> Job:
        """Change a job: ``apply`` turns the current job into the new spec.

        ``paused`` and ``pause_note`` are kept from the current job whatever ``apply``
        returns. A changed schedule recomputes next_run_at from now.
        """
        check_expected_version(expected_version)
        for _ in range(_OPTIMISTIC_ATTEMPTS):
            job = await self.get_job(tenant_id, job_id)
            require_version("job", job_id, job.version, expected_version)
            try:
                rewritten = await self._rewrite(tenant_id, job, apply(job))
            except CalendarChanged:
                continue  # compute again with the calendars' new contents
            if rewritten is not None:
                return rewritten[0]
            if expected_version:
                raise await self._conflict(tenant_id, job_id, expected_version)
            # Unconditional update raced with another change: merge onto the new version.
        raise Aborted(f"job {job_id} kept changing while being updated; retry")

    async def rollback_job(
        self, tenant_id: str, job_id: uuid.UUID, *, version: int, expected_version: int
    ) -> Job:
        """Restore the definition revision ``version`` had, as a new revision.

        The definition is checked as UpdateJob checks one (today's calendars and egress
        policy); paused and pause_note stay as they are (operational, not history).
        """
        check_expected_version(expected_version)
        revised = await self.job_at(tenant_id, job_id, version)
        return await self.update_job(
            tenant_id, job_id, expected_version=expected_version, apply=lambda _: revised.spec
        )

    async def _rewrite(
        self,
        tenant_id: str,
        job: Job,
        wanted: JobSpec,
        *,
        keep_equal: bool = False,
        claim: RequestClaim | None = None,
        validate_only: bool = False,
    ) -> tuple[Job, bool] | None:
        """Write ``wanted`` as the definition of ``job`` (as read, at its version).

        Args:
            keep_equal: When the validated definition equals the current one, write
                nothing (ApplyJob's UNCHANGED).
            claim: An idempotency record written with the change.
            validate_only: Validate and compute, write nothing.

        Returns:
            The job after the change and whether it changed; None when the job changed
            or vanished since it was read (nothing written).
        """
        spec = dataclasses.replace(wanted, paused=job.spec.paused, pause_note=job.spec.pause_note)
        reschedule = spec.schedule != job.spec.schedule
        calendars = await self._calendars(tenant_id, [spec])
        now = self._clock.now()
        spec, compiled = validation.check_job_spec(
            spec, str(job.job_id), now=now if reschedule else None, calendars=calendars
        )
        if keep_equal and spec == job.spec:
            return job, False
        assert spec.target is not None
        if spec.target != job.spec.target:
            await self._guard.check(spec.target, await self._egress.policy(tenant_id))
        next_run_at = job.next_run_at
        if reschedule:
            next_run_at = first_fire(
                compiled,
                spec.schedule,
                now,
                fired_count=job.fired_count,
                last_fire=job.stats.last_fire_time,
            )
        named = _named(spec.schedule, calendars)
        if validate_only:
            changed = dataclasses.replace(
                job,
                spec=spec,
                next_run_at=next_run_at,
                version=job.version + 1,
                update_time=now,
                calendars={c.name: c for c in named},
            )
            return changed, True
        written = await self._store.update_job(
            tenant_id,
            job.job_id,
            read_version=job.version,
            spec=spec,
            reschedule=reschedule,
            next_run_at=next_run_at,
            now=now,
            claim=claim,
            calendars=named,
        )
        return (await self.get_job(tenant_id, job.job_id), True) if written else None

    # --- apply ----------------------------------------------------------------------------

    async def apply_job(
        self,
        tenant_id: str,
        ref: JobRef,
        spec: JobSpec,
        *,
        expected_version: int = 0,
        validate_only: bool = False,
        request_id: str = "",
        request_hash: bytes = b"",
    ) -> Applied:
        """Make the job ``ref`` names match ``spec`` (job_service.proto ``ApplyJob``).

        A client id the tenant does not use creates the job (``spec``'s paused and
        pause_note honoured); an existing job keeps its paused state and note, and is
        rewritten only when its definition differs. Two applies of one new id race on
        the unique index: the loser compares with the winner's job.
        """
        validation.check_request_id(request_id)
        check_expected_version(expected_version)

        async def work(claim: RequestClaim | None) -> Applied:
            for _ in range(_OPTIMISTIC_ATTEMPTS):
                applied = await self._apply_once(
                    tenant_id,
                    ref,
                    spec,
                    expected_version=expected_version,
                    claim=claim,
                    validate_only=validate_only,
                )
                if applied is not None:
                    return applied
            raise Aborted(f"job {ref} kept changing while being applied; retry")

        async def replay(record: RequestRecord) -> Applied:
            assert record.job_id is not None and record.outcome is not None
            job = await self._store.get_job(tenant_id, record.job_id)
            if job is None:
                raise NotFound(f"request_id {request_id!r} already applied this job, deleted since")
            return Applied(job, ApplyOutcome(record.outcome))

        # A validation writes nothing, so it is neither answered from nor remembered.
        key = RequestKey(APPLY_JOB, "" if validate_only else request_id, request_hash)
        return await self._requests.once(tenant_id, key, work, replay)

    async def _apply_once(
        self,
        tenant_id: str,
        ref: JobRef,
        spec: JobSpec,
        *,
        expected_version: int,
        claim: RequestClaim | None,
        validate_only: bool,
    ) -> Applied | None:
        """One read-decide-write round of :meth:`apply_job`; None when it lost a race."""
        uid = ref if isinstance(ref, uuid.UUID) else await self._store.job_uid(tenant_id, ref)
        job = None if uid is None else await self._store.get_job(tenant_id, uid)
        if job is None:
            if isinstance(ref, uuid.UUID) or expected_version:
                raise NotFound(f"job {ref} not found")
            try:
                created = await self._create(
                    tenant_id,
                    spec,
                    client_id=ref,
                    claim=_with_outcome(claim, ApplyOutcome.CREATED),
                    validate_only=validate_only,
                )
            except AlreadyExists:
                # A concurrent apply of this id created it; its insert may clash on the
                # name before the id (both are unique). Compare with that job then.
                if await self._store.job_uid(tenant_id, ref) is None:
                    raise
                return None
            return Applied(created, ApplyOutcome.CREATED)
        require_version("job", ref, job.version, expected_version)
        try:
            rewritten = await self._rewrite(
                tenant_id,
                job,
                spec,
                keep_equal=True,
                claim=_with_outcome(claim, ApplyOutcome.UPDATED),
                validate_only=validate_only,
            )
        except CalendarChanged:
            return None  # apply_job tries again with the calendars' new contents
        if rewritten is None:
            if expected_version:
                raise await self._conflict(tenant_id, job.job_id, expected_version, ref)
            return None
        if rewritten[1]:
            return Applied(rewritten[0], ApplyOutcome.UPDATED)
        unchanged = _with_outcome(claim, ApplyOutcome.UNCHANGED)
        if unchanged is not None:
            await self._store.record_request(tenant_id, unchanged, job.job_id, self._clock.now())
        return Applied(job, ApplyOutcome.UNCHANGED)

    async def delete_job(
        self, tenant_id: str, ref: JobRef, *, expected_version: int, allow_missing: bool
    ) -> None:
        """Delete a job; its unfinished runs are cancelled."""
        check_expected_version(expected_version)
        try:
            job_id = await self.resolve(tenant_id, ref)
        except NotFound:
            if allow_missing:
                return
            raise
        if await self._store.delete_job(tenant_id, job_id, expected_version, self._clock.now()):
            return
        error = await self._conflict(tenant_id, job_id, expected_version)
        if isinstance(error, NotFound) and allow_missing:
            return
        raise error

    async def pause_job(
        self, tenant_id: str, job_id: uuid.UUID, *, note: str, expected_version: int
    ) -> Job:
        """Pause a job (or replace the note of a paused one)."""
        check_expected_version(expected_version)
        validation.check_note(note, "note")
        if not await self._store.pause_job(
            tenant_id, job_id, expected_version, note, self._clock.now()
        ):
            raise await self._conflict(tenant_id, job_id, expected_version)
        return await self.get_job(tenant_id, job_id)

    async def resume_job(
        self, tenant_id: str, job_id: uuid.UUID, *, note: str, expected_version: int
    ) -> Job:
        """Resume a job: next_run_at is recomputed from now; missed times do not run."""
        check_expected_version(expected_version)
        validation.check_note(note, "note")
        for _ in range(_OPTIMISTIC_ATTEMPTS):
            job = await self.get_job(tenant_id, job_id)
            require_version("job", job_id, job.version, expected_version)
            # The calendars as they are now, with their versions (the job's copy has
            # none): the store checks them current in the resume's transaction.
            schedule = job.spec.schedule
            calendars = await self._store.calendars_named(tenant_id, list(schedule.calendars))
            now = self._clock.now()
            next_run_at = first_fire(
                compile_schedule(schedule, job_id=str(job.job_id), calendars=calendars),
                schedule,
                now,
                fired_count=job.fired_count,
                last_fire=job.stats.last_fire_time,
                include_recent_once=False,
            )
            try:
                resumed = await self._store.resume_job(
                    tenant_id,
                    job_id,
                    read_version=job.version,
                    note=note,
                    next_run_at=next_run_at,
                    now=now,
                    calendars=[calendars[n] for n in schedule.calendars if n in calendars],
                )
            except CalendarChanged:
                continue  # UpdateCalendar rewrote the job's copy: read it again
            if resumed:
                return await self.get_job(tenant_id, job_id)
            if expected_version:
                raise await self._conflict(tenant_id, job_id, expected_version)
        raise Aborted(f"job {job_id} kept changing while being resumed; retry")

    # --- preview --------------------------------------------------------------------------

    async def preview(
        self,
        tenant_id: str,
        schedule: Schedule,
        *,
        count: int,
        after: datetime | None,
        job_id: uuid.UUID | None,
    ) -> Preview:
        """Upcoming fire times of ``schedule`` (for ``job_id``'s H and jitter if given)."""
        if count == 0:
            count = validation.DEFAULT_PREVIEW_COUNT
        if not 1 <= count <= validation.MAX_PREVIEW_COUNT:
            raise InvalidArgument(
                "count", f"must be 1 to {validation.MAX_PREVIEW_COUNT}, got {count}"
            )
        compiled = validation.check_schedule(
            schedule,
            PREVIEW_KEY if job_id is None else str(job_id),
            calendars=await self._store.calendars_named(tenant_id, list(schedule.calendars)),
        )
        if job_id is not None and await self._store.job_version(tenant_id, job_id) is None:
            raise NotFound(f"job_id: job {job_id} not found")
        # Up to a fifth of a second of pure Python: off the event loop (sundial.api.offload).
        return await self._offload.run(
            tenant_id, preview, compiled, after or self._clock.now(), count, 0
        )


def _named(schedule: Schedule, calendars: Mapping[str, Calendar] | None) -> list[Calendar]:
    """The calendars ``schedule`` names, in its order (validated: all present)."""
    if not schedule.calendars or calendars is None:
        return []
    return [calendars[name] for name in schedule.calendars]


def _with_outcome(claim: RequestClaim | None, outcome: ApplyOutcome) -> RequestClaim | None:
    return None if claim is None else dataclasses.replace(claim, outcome=outcome.value)


def _call_traceparent() -> str:
    """This call's trace context (its server span; empty while tracing is off): the
    job's first dispatched runs link to it (docs/design.md section 9)."""
    return tracing.traceparent_of(trace.get_current_span())
