"""JobService's handlers for many jobs at once: CountJobs, the bulk actions by
selector, BatchApplyJobs (bulk.proto, docs/design.md section 13)."""

from __future__ import annotations

import grpc

from sundial.api import convert
from sundial.api.auth import current_tenant
from sundial.api.bulk import BulkResult
from sundial.api.model import Applied, ApplyOutcome, JobRef
from sundial.api.servicer._base import ServicerBase
from sundial.core import wire
from sundial.core.errors import InvalidArgument, SundialError
from sundial.job import JobSpec
from sundial.v1 import bulk_pb2, job_service_pb2


def _counts(result: BulkResult) -> dict[str, object]:
    return {
        "matched": result.matched,
        "affected": result.affected,
        "remaining": result.remaining,
        "job_ids": list(result.shown),
    }


def _applied_out(
    request_id: str, result: Applied | SundialError, *, validate_only: bool
) -> job_service_pb2.BatchApplyJobsResult:
    if isinstance(result, SundialError):
        return job_service_pb2.BatchApplyJobsResult(
            job_id=request_id,
            error=job_service_pb2.BatchApplyJobsError(
                code=result.code.name,
                message=result.message,
                reason=result.reason,
                field=result.metadata.get("field", ""),
            ),
        )
    job = convert.job_out(result.job)
    if validate_only and result.outcome is ApplyOutcome.CREATED:
        job.ClearField("uid")  # none is assigned until the job is created
    return job_service_pb2.BatchApplyJobsResult(
        job_id=request_id, outcome=convert.outcome_out(result.outcome), job=job
    )


class BulkHandlers(ServicerBase):
    """CountJobs, PauseJobs, ResumeJobs, DeleteJobs, TriggerJobs, BatchApplyJobs."""

    async def CountJobs(
        self, request: bulk_pb2.CountJobsRequest, context: grpc.aio.ServicerContext
    ) -> bulk_pb2.CountJobsResponse:
        count = await self._bulk.count(current_tenant(), convert.job_filter_in(request))
        return bulk_pb2.CountJobsResponse(count=count)

    async def PauseJobs(
        self, request: bulk_pb2.PauseJobsRequest, context: grpc.aio.ServicerContext
    ) -> bulk_pb2.PauseJobsResponse:
        result = await self._bulk.pause(
            current_tenant(),
            convert.job_filter_in(request),
            note=request.note,
            until=wire.optional_timestamp(request, "pause_until", "pause_until"),
            dry_run=request.dry_run,
            limit=request.limit,
        )
        return bulk_pb2.PauseJobsResponse(**_counts(result))  # type: ignore[arg-type]

    async def ResumeJobs(
        self, request: bulk_pb2.ResumeJobsRequest, context: grpc.aio.ServicerContext
    ) -> bulk_pb2.ResumeJobsResponse:
        result = await self._bulk.resume(
            current_tenant(),
            convert.job_filter_in(request),
            note=request.note,
            dry_run=request.dry_run,
            limit=request.limit,
        )
        return bulk_pb2.ResumeJobsResponse(**_counts(result))  # type: ignore[arg-type]

    async def DeleteJobs(
        self, request: bulk_pb2.DeleteJobsRequest, context: grpc.aio.ServicerContext
    ) -> bulk_pb2.DeleteJobsResponse:
        result = await self._bulk.delete(
            current_tenant(),
            convert.job_filter_in(request),
            dry_run=request.dry_run,
            limit=request.limit,
        )
        return bulk_pb2.DeleteJobsResponse(**_counts(result))  # type: ignore[arg-type]

    async def TriggerJobs(
        self, request: bulk_pb2.TriggerJobsRequest, context: grpc.aio.ServicerContext
    ) -> bulk_pb2.TriggerJobsResponse:
        result = await self._bulk.trigger(
            current_tenant(),
            convert.job_filter_in(request),
            dry_run=request.dry_run,
            limit=request.limit,
        )
        return bulk_pb2.TriggerJobsResponse(
            matched=result.matched,
            affected=result.affected,
            run_keys=[ref.key for ref in result.runs],
        )

    async def BatchApplyJobs(
        self, request: job_service_pb2.BatchApplyJobsRequest, context: grpc.aio.ServicerContext
    ) -> job_service_pb2.BatchApplyJobsResponse:
        tenant = current_tenant()
        items: list[tuple[JobRef, JobSpec] | SundialError] = []
        memo: dict[object, object] = {}
        for i, message in enumerate(request.jobs):
            try:
                if not message.job_id:
                    raise InvalidArgument(f"jobs[{i}].job_id", "is required")
                ref = convert.job_ref_in(message.job_id, f"jobs[{i}].job_id")
                try:
                    spec = convert.job_spec_in(message, memo)
                except InvalidArgument as exc:
                    raise InvalidArgument(f"jobs[{i}].{exc.field}", exc.problem) from None
                items.append((ref, spec))
            except SundialError as exc:
                items.append(exc)
        results = await self._jobs.batch_apply(tenant, items, validate_only=request.validate_only)
        return job_service_pb2.BatchApplyJobsResponse(
            results=[
                _applied_out(message.job_id, result, validate_only=request.validate_only)
                for message, result in zip(request.jobs, results, strict=True)
            ]
        )
