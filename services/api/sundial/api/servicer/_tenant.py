"""JobService's handlers of the caller's tenant: its audit log, egress policy and signing secret."""

from __future__ import annotations

import grpc

from sundial.api import convert
from sundial.api.auth import current_tenant
from sundial.api.servicer._base import ServicerBase
from sundial.core import wire
from sundial.v1 import job_service_pb2 as pb


class TenantHandlers(ServicerBase):
    """ListAuditEvents, GetEgressPolicy, RotateOwnSigningSecret."""

    async def ListAuditEvents(
        self, request: pb.ListAuditEventsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListAuditEventsResponse:
        page = await self._audit.events(
            current_tenant(), page_size=request.page_size, page_token=request.page_token
        )
        response = pb.ListAuditEventsResponse(next_page_token=page.next_page_token)
        for event in page.items:
            out = response.events.add(
                actor=event.actor,
                method=event.method,
                resource=event.resource,
                code=event.code,
                request_id=event.request_id,
            )
            out.time.CopyFrom(wire.timestamp(event.at))
        return response

    async def GetEgressPolicy(
        self, request: pb.GetEgressPolicyRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetEgressPolicyResponse:
        view = await self._egress.effective(current_tenant())
        return pb.GetEgressPolicyResponse(egress=convert.egress_out(view))

    async def RotateOwnSigningSecret(
        self, request: pb.RotateOwnSigningSecretRequest, context: grpc.aio.ServicerContext
    ) -> pb.RotateOwnSigningSecretResponse:
        overlap = (
            wire.timedelta_in(request.overlap, "overlap") if request.HasField("overlap") else None
        )
        tenant, secret = await self._tenants.rotate_signing_secret(current_tenant(), overlap)
        newest, *previous = tenant.signing_secrets  # newest first
        response = pb.RotateOwnSigningSecretResponse(
            signing_secret=secret, secret_id=str(newest.secret_id)
        )
        expiries = [s.expire_time for s in previous if s.expire_time is not None]
        if expiries:
            response.previous_expire_time.CopyFrom(wire.timestamp(max(expiries)))
        return response
