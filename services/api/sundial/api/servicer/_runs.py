"""JobService's run handlers."""

from __future__ import annotations

import grpc

from sundial.api import convert
from sundial.api.auth import current_tenant
from sundial.api.kit import request_hash
from sundial.api.model import JobFilter
from sundial.api.selector import parse_selector
from sundial.api.servicer._base import ServicerBase
from sundial.core import wire
from sundial.core.errors import InvalidArgument
from sundial.v1 import job_service_pb2 as pb


class RunHandlers(ServicerBase):
    """TriggerJob, BackfillJob, ListRuns, GetRun, ReplayRun, CancelRun."""

    async def TriggerJob(
        self, request: pb.TriggerJobRequest, context: grpc.aio.ServicerContext
    ) -> pb.TriggerJobResponse:
        tenant = current_tenant()
        job_id = await self._job(tenant, request.job_id)
        run = await self._runs.trigger(
            tenant,
            job_id,
            request_id=request.request_id,
            request_hash=request_hash("TriggerJob", [request]),
        )
        return pb.TriggerJobResponse(run=convert.run_out(run))

    async def BackfillJob(
        self, request: pb.BackfillJobRequest, context: grpc.aio.ServicerContext
    ) -> pb.BackfillJobResponse:
        tenant = current_tenant()
        result = await self._runs.backfill(
            tenant,
            await self._job(tenant, request.job_id),
            wire.optional_timestamp(request, "start_time", "start_time"),
            wire.optional_timestamp(request, "end_time", "end_time"),
        )
        response = pb.BackfillJobResponse(
            runs=[convert.run_out(run) for run in result.runs],
            existing_count=result.existing_count,
            truncated=result.truncated,
        )
        if result.next_start_time is not None:
            response.next_start_time.CopyFrom(wire.timestamp(result.next_start_time))
        return response

    async def ListRuns(
        self, request: pb.ListRunsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListRunsResponse:
        tenant = current_tenant()
        run_filter = convert.run_filter_in(request)
        if not request.job_id:
            page = await self._runs.list_tenant_runs(
                tenant,
                run_filter,
                JobFilter(selector=parse_selector(request.selector)),
                page_size=request.page_size,
                page_token=request.page_token,
            )
        else:
            if request.selector:
                raise InvalidArgument("selector", "is for runs of every job: leave job_id empty")
            if run_filter.late_only or run_filter.started_after or run_filter.started_before:
                raise InvalidArgument(
                    "job_id",
                    "late_only and started_after/before list every job's runs: leave it empty",
                )
            page = await self._runs.list_runs(
                tenant,
                await self._job(tenant, request.job_id),
                run_filter,
                page_size=request.page_size,
                page_token=request.page_token,
            )
        return pb.ListRunsResponse(
            runs=[convert.run_out(run) for run in page.items],
            next_page_token=page.next_page_token,
        )

    async def GetRun(
        self, request: pb.GetRunRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetRunResponse:
        tenant = current_tenant()
        run = await self._runs.get_run(tenant, await self._run(tenant, request))
        return pb.GetRunResponse(run=convert.run_out(run))

    async def ReplayRun(
        self, request: pb.ReplayRunRequest, context: grpc.aio.ServicerContext
    ) -> pb.ReplayRunResponse:
        tenant = current_tenant()
        run = await self._runs.replay(tenant, await self._run(tenant, request))
        return pb.ReplayRunResponse(run=convert.run_out(run))

    async def CancelRun(
        self, request: pb.CancelRunRequest, context: grpc.aio.ServicerContext
    ) -> pb.CancelRunResponse:
        tenant = current_tenant()
        run = await self._runs.cancel(tenant, await self._run(tenant, request), request.reason)
        return pb.CancelRunResponse(run=convert.run_out(run))
