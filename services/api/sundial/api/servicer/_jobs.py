"""JobService's job handlers; UpdateJob's mask and merge."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import grpc
from google.protobuf import field_mask_pb2

from sundial.api import convert
from sundial.api.auth import current_tenant
from sundial.api.kit import UpdateMask, request_hash
from sundial.api.model import (
    ApplyOutcome,
    Job,
)
from sundial.api.servicer._base import ServicerBase
from sundial.api.validation import check_client_job_id
from sundial.core import wire
from sundial.core.errors import InvalidArgument
from sundial.job import JobSpec
from sundial.v1 import job_pb2
from sundial.v1 import job_service_pb2 as pb

# UpdateJob: what a mask may name (an empty mask: all of them); sub-paths are allowed
# below the three messages of _DESCEND.
_UPDATABLE = ("name", "description", "schedule", "target", "payload", "policies", "labels")
_DESCEND = frozenset({"schedule", "target", "policies"})
_SPEC_FIELDS = frozenset({"cron", "interval", "once"})


def _job_path_problem(path: str) -> str | None:
    """Why UpdateJob's mask may not name ``path`` (None: it may)."""
    parts = path.split(".")
    if parts[0] not in _UPDATABLE:
        if parts[0] not in job_pb2.Job.DESCRIPTOR.fields_by_name:
            return f"unknown field {path!r}"
        pause = " (use PauseJob/ResumeJob)" if parts[0] in ("paused", "pause_note") else ""
        return f"{path!r} cannot be changed by UpdateJob{pause}"
    descriptor = job_pb2.Job.DESCRIPTOR
    for depth, part in enumerate(parts):
        field = descriptor.fields_by_name.get(part)
        if field is None:
            return f"unknown field {path!r}"
        if depth == len(parts) - 1:
            break
        message_type = field.message_type
        if (
            (depth == 0 and part not in _DESCEND)
            or message_type is None
            or message_type.GetOptions().map_entry
            or not message_type.full_name.startswith("sundial.v1.")
        ):
            return f"cannot update inside {path!r}"
        descriptor = message_type
    return None


JOB_MASK = UpdateMask(_UPDATABLE, problem=_job_path_problem)
"""UpdateJob's mask (job_service.proto ``UpdateJobRequest.update_mask``)."""


def check_update_mask(paths: Iterable[str]) -> list[str]:
    """The paths UpdateJob applies: the mask's, or every updatable field for an empty one.

    Raises:
        InvalidArgument: An unknown path, or an output-only or paused field
            (``update_mask.paths[i]``).
    """
    return JOB_MASK.paths(paths)


def merge_update(current: Job, source: job_pb2.Job, paths: list[str]) -> JobSpec:
    """The job after copying the mask's fields from ``source`` onto ``current``.

    A named field unset in ``source`` is reset to its default; a map is replaced whole;
    naming ``schedule.cron|interval|once`` selects that spec (dropping a ``specs`` list),
    naming ``schedule.specs`` with entries replaces the single spec by the list.
    """
    # The stored form, not the shown one: a target the mask leaves alone keeps an
    # inline credential stored before secrets, not "<redacted>".
    merged = convert.job_out(current, shown=False)
    field_mask_pb2.FieldMask(paths=paths).MergeMessage(
        source, merged, replace_message_field=True, replace_repeated_field=True
    )
    for path in paths:
        parts = path.split(".")
        named_spec = len(parts) == 2 and parts[0] == "schedule" and parts[1] in _SPEC_FIELDS
        current_spec = merged.schedule.WhichOneof("spec")
        if named_spec and current_spec is not None and current_spec != parts[1]:
            # The named spec was unset in the request: the job is left with none, and
            # validation reports the missing spec.
            merged.schedule.ClearField(current_spec)
        if named_spec:
            merged.schedule.ClearField("specs")  # the single-spec form replaces a list
        if path == "schedule.specs" and merged.schedule.specs and current_spec is not None:
            merged.schedule.ClearField(current_spec)  # a list replaces the single spec
    return convert.job_spec_in(merged)


def client_id_in(text: str, field: str) -> str | None:
    """A new job's client-chosen id (None when not given), checked."""
    if not text:
        return None
    check_client_job_id(text, field)
    return text


def _batch_answer(jobs: list[Job]) -> pb.BatchCreateJobsResponse:
    """BatchCreateJobs' answer, each job built in its repeated field (none copied)."""
    response = pb.BatchCreateJobsResponse()
    convert.jobs_out(jobs, into=response.jobs)
    return response


class JobHandlers(ServicerBase):
    """CreateJob, BatchCreateJobs, ApplyJob, GetJob, ListJobRevisions, RollbackJob,
    DescribeJob, ListJobs, UpdateJob, DeleteJob, PauseJob, ResumeJob, PreviewSchedule."""

    async def CreateJob(
        self, request: pb.CreateJobRequest, context: grpc.aio.ServicerContext
    ) -> pb.CreateJobResponse:
        tenant = current_tenant()
        if not request.HasField("job"):
            raise InvalidArgument("job", "is required")
        if request.job_id and request.job.job_id and request.job.job_id != request.job_id:
            raise InvalidArgument("job.job_id", "differs from job_id; set one of them")
        client_id = client_id_in(
            request.job_id or request.job.job_id, "job_id" if request.job_id else "job.job_id"
        )
        spec = convert.job_spec_in(request.job)
        # The id is part of the request's identity wherever it was given; a request
        # without one hashes as it always did.
        identity = request.job
        if client_id is not None and identity.job_id != client_id:
            identity = job_pb2.Job()
            identity.CopyFrom(request.job)
            identity.job_id = client_id
        job = await self._jobs.create_job(
            tenant,
            spec,
            client_id=client_id,
            request_id=request.request_id,
            request_hash=request_hash("CreateJob", [identity]),
        )
        return pb.CreateJobResponse(job=convert.job_out(job))

    async def BatchCreateJobs(
        self, request: pb.BatchCreateJobsRequest, context: grpc.aio.ServicerContext
    ) -> pb.BatchCreateJobsResponse:
        tenant = current_tenant()
        specs = []
        client_ids = []
        memo: dict[object, Any] = {}
        try:  # one handler for the batch, not a context manager per job
            for message in request.jobs:
                client_ids.append(client_id_in(message.job_id, "job_id"))
                specs.append(convert.job_spec_in(message, memo))
        except InvalidArgument as exc:  # the failing job's index: the jobs converted
            raise InvalidArgument(f"jobs[{len(specs)}].{exc.field}", exc.problem) from None
        return await self._jobs.batch_create(
            tenant,
            specs,
            client_ids=client_ids,
            request_id=request.request_id,
            request_hash=request_hash("BatchCreateJobs", request.jobs),
            answer=_batch_answer,
        )

    async def ApplyJob(
        self, request: pb.ApplyJobRequest, context: grpc.aio.ServicerContext
    ) -> pb.ApplyJobResponse:
        tenant = current_tenant()
        if not request.HasField("job"):
            raise InvalidArgument("job", "is required")
        ref = convert.job_ref_in(request.job.job_id, "job.job_id")
        spec = convert.job_spec_in(request.job)
        applied = await self._jobs.apply_job(
            tenant,
            ref,
            spec,
            expected_version=request.expected_version,
            validate_only=request.validate_only,
            request_id=request.request_id,
            request_hash=request_hash("ApplyJob", [request]),
        )
        job = convert.job_out(applied.job)
        if request.validate_only and applied.outcome is ApplyOutcome.CREATED:
            job.ClearField("uid")  # none is assigned until the job is created
        return pb.ApplyJobResponse(job=job, outcome=convert.outcome_out(applied.outcome))

    async def GetJob(
        self, request: pb.GetJobRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetJobResponse:
        tenant = current_tenant()
        job_id = await self._job(tenant, request.job_id)
        if request.version:
            job = await self._jobs.job_at(tenant, job_id, request.version)
        else:
            job = await self._jobs.get_job(tenant, job_id)
        return pb.GetJobResponse(job=convert.job_out(job))

    async def ListJobRevisions(
        self, request: pb.ListJobRevisionsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListJobRevisionsResponse:
        tenant = current_tenant()
        job = await self._jobs.get_job(tenant, await self._job(tenant, request.job_id))
        full = convert.view_in(request.view, pb.JOB_VIEW_BASIC)
        page = await self._jobs.job_revisions(
            tenant,
            job.job_id,
            page_size=request.page_size,
            page_token=request.page_token,
            full=full,
        )
        return pb.ListJobRevisionsResponse(
            revisions=[convert.revision_out(job, r, full=full) for r in page.items],
            next_page_token=page.next_page_token,
        )

    async def RollbackJob(
        self, request: pb.RollbackJobRequest, context: grpc.aio.ServicerContext
    ) -> pb.RollbackJobResponse:
        tenant = current_tenant()
        job = await self._jobs.rollback_job(
            tenant,
            await self._job(tenant, request.job_id),
            version=request.version,
            expected_version=request.expected_version,
        )
        return pb.RollbackJobResponse(job=convert.job_out(job))

    async def DescribeJob(
        self, request: pb.DescribeJobRequest, context: grpc.aio.ServicerContext
    ) -> pb.DescribeJobResponse:
        tenant = current_tenant()
        windows = [
            wire.timedelta_in(w, f"slo_windows[{i}]") for i, w in enumerate(request.slo_windows)
        ]
        described = await self._jobs.describe_job(
            tenant, await self._job(tenant, request.job_id), windows
        )
        return pb.DescribeJobResponse(
            job=convert.job_out(described.job),
            recent_runs=[convert.run_out(run) for run in described.recent_runs],
            upcoming=[convert.fire_time_out(entry) for entry in described.upcoming.entries],
            active_runs=described.active_runs,
            slo=[convert.slo_out(s) for s in described.slo],
        )

    async def ListJobs(
        self, request: pb.ListJobsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListJobsResponse:
        full = convert.view_in(request.view, pb.JOB_VIEW_FULL)
        page = await self._jobs.list_jobs(
            current_tenant(),
            convert.job_filter_in(request),
            page_size=request.page_size,
            page_token=request.page_token,
        )
        return pb.ListJobsResponse(
            jobs=convert.jobs_out(page.items, full=full),
            next_page_token=page.next_page_token,
        )

    async def UpdateJob(
        self, request: pb.UpdateJobRequest, context: grpc.aio.ServicerContext
    ) -> pb.UpdateJobResponse:
        tenant = current_tenant()
        ref = convert.job_ref_in(request.job.job_id, "job.job_id")
        paths = check_update_mask(request.update_mask.paths)
        job_id = await self._jobs.resolve(tenant, ref)
        job = await self._jobs.update_job(
            tenant,
            job_id,
            expected_version=request.expected_version,
            apply=lambda current: merge_update(current, request.job, paths),
        )
        return pb.UpdateJobResponse(job=convert.job_out(job))

    async def DeleteJob(
        self, request: pb.DeleteJobRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteJobResponse:
        tenant = current_tenant()
        await self._jobs.delete_job(
            tenant,
            convert.job_ref_in(request.job_id),
            expected_version=request.expected_version,
            allow_missing=request.allow_missing,
        )
        return pb.DeleteJobResponse()

    async def PauseJob(
        self, request: pb.PauseJobRequest, context: grpc.aio.ServicerContext
    ) -> pb.PauseJobResponse:
        tenant = current_tenant()
        job = await self._jobs.pause_job(
            tenant,
            await self._job(tenant, request.job_id),
            note=request.note,
            expected_version=request.expected_version,
            until=wire.optional_timestamp(request, "pause_until", "pause_until"),
        )
        return pb.PauseJobResponse(job=convert.job_out(job))

    async def ResumeJob(
        self, request: pb.ResumeJobRequest, context: grpc.aio.ServicerContext
    ) -> pb.ResumeJobResponse:
        tenant = current_tenant()
        job = await self._jobs.resume_job(
            tenant,
            await self._job(tenant, request.job_id),
            note=request.note,
            expected_version=request.expected_version,
        )
        return pb.ResumeJobResponse(job=convert.job_out(job))

    async def PreviewSchedule(
        self, request: pb.PreviewScheduleRequest, context: grpc.aio.ServicerContext
    ) -> pb.PreviewScheduleResponse:
        tenant = current_tenant()
        if not request.HasField("schedule"):
            raise InvalidArgument("schedule", "is required")
        return await self._jobs.preview(
            tenant,
            convert.schedule_in(request.schedule),
            count=request.count,
            after=wire.optional_timestamp(request, "after", "after"),
            job_id=await self._job(tenant, request.job_id) if request.job_id else None,
            render=convert.preview_out,
        )
