"""JobService's flow limit handlers."""

from __future__ import annotations

import grpc

from sundial.api import convert
from sundial.api.auth import current_tenant
from sundial.api.servicer._base import ServicerBase
from sundial.core.errors import InvalidArgument
from sundial.v1 import flow_pb2 as pb


class FlowHandlers(ServicerBase):
    """SetFlowLimit, ListFlowLimits, DeleteFlowLimit."""

    async def SetFlowLimit(
        self, request: pb.SetFlowLimitRequest, context: grpc.aio.ServicerContext
    ) -> pb.SetFlowLimitResponse:
        if not request.HasField("limit"):
            raise InvalidArgument("limit", "is required")
        stored = await self._flow.set(current_tenant(), convert.flow_limit_in(request.limit))
        return pb.SetFlowLimitResponse(limit=convert.flow_limit_out(stored))

    async def ListFlowLimits(
        self, request: pb.ListFlowLimitsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListFlowLimitsResponse:
        page = await self._flow.list(
            current_tenant(), page_size=request.page_size, page_token=request.page_token
        )
        return pb.ListFlowLimitsResponse(
            limits=[convert.flow_limit_out(limit) for limit in page.items],
            next_page_token=page.next_page_token,
        )

    async def DeleteFlowLimit(
        self, request: pb.DeleteFlowLimitRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteFlowLimitResponse:
        await self._flow.delete(current_tenant(), request.key)
        return pb.DeleteFlowLimitResponse()
