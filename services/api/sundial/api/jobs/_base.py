"""The parts every job use case shares (sundial.api.jobs)."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from opentelemetry import trace

from sundial.api import validation
from sundial.api.egress import EgressPolicies
from sundial.api.jobs._schedule import first_fire
from sundial.api.kit import (
    Requests,
)
from sundial.api.model import (
    ApplyOutcome,
    Job,
    JobRef,
)
from sundial.api.offload import Offload
from sundial.api.store import RequestClaim, Store
from sundial.api.validation import TargetGuard
from sundial.core import tracing
from sundial.core.clock import Clock
from sundial.core.errors import (
    NotFound,
    version_mismatch,
)
from sundial.job import JobSpec
from sundial.run import GrpcTarget, HttpTarget
from sundial.schedule import Calendar, CompiledSchedule, Schedule

CREATE_JOB = "CreateJob"
BATCH_CREATE_JOBS = "BatchCreateJobs"
APPLY_JOB = "ApplyJob"

OPTIMISTIC_ATTEMPTS = 5
"""Rounds of read, compute, conditional write before a changing job is ABORTED."""


def estimated_bytes(job: Job) -> int:
    return spec_bytes(job.spec, full=True)


def spec_bytes(spec: JobSpec, *, full: bool) -> int:
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


class JobsBase:
    """What every job use case shares: the parts, reading a job, the calendars a
    schedule names, why a conditional write matched nothing.

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

    async def _checked(
        self,
        tenant_id: str,
        spec: JobSpec,
        job_id: str,
        *,
        now: datetime | None,
        calendars: Mapping[str, Calendar] | None,
    ) -> tuple[JobSpec, CompiledSchedule]:
        """:func:`validation.check_job_spec` of a changed job, in the pool when its
        jitter check samples fire times through calendars (as long as a search: up to
        0.2 s), else here. (A new job's: ``JobCreation._prepare``.)"""
        if spec.schedule.calendars and spec.schedule.jitter:
            return await self._offload.run(
                tenant_id, validation.check_job_spec, spec, job_id, now=now, calendars=calendars
            )
        return validation.check_job_spec(spec, job_id, now=now, calendars=calendars)

    async def _first_fire(
        self,
        tenant_id: str,
        compiled: CompiledSchedule,
        schedule: Schedule,
        now: datetime,
        **options: Any,
    ) -> datetime | None:
        """:func:`first_fire`, off the event loop when the schedule names calendars.

        Without calendars a search takes one step per spec. Through calendars it can take
        up to ``MAX_SEARCH_STEPS`` (16 Tuesday crons against a calendar of Mondays:
        4,096 steps, about 0.2 s), which on the event loop would hold every tenant's
        calls: it runs in the pool, within the tenant's CPU share (sundial.api.offload).
        """
        if not schedule.calendars:
            return first_fire(compiled, schedule, now, **options)
        return await self._offload.run(tenant_id, first_fire, compiled, schedule, now, **options)

    async def _calendars(self, tenant_id: str, specs: Sequence[JobSpec]) -> dict[str, Calendar]:
        """The tenant's calendars the schedules of ``specs`` name (one read; a name it
        does not have is left out, and validation names the field)."""
        names = sorted({name for spec in specs for name in spec.schedule.calendars})
        return await self._store.calendars_named(tenant_id, names) if names else {}

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


def with_outcome(claim: RequestClaim | None, outcome: ApplyOutcome) -> RequestClaim | None:
    return None if claim is None else dataclasses.replace(claim, outcome=outcome.value)


def call_traceparent() -> str:
    """This call's trace context (its server span; empty while tracing is off): the
    job's first dispatched runs link to it (docs/design.md section 9)."""
    return tracing.traceparent_of(trace.get_current_span())
