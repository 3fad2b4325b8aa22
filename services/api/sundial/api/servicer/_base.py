"""What every part of JobService's servicer shares: the managers, naming a job or a run."""

from __future__ import annotations

import uuid
from typing import Any

from sundial.api import convert
from sundial.api.audit import AuditLog
from sundial.api.bulk import BulkActions
from sundial.api.calendars import CalendarManager
from sundial.api.egress import EgressPolicies
from sundial.api.flow import FlowLimits
from sundial.api.jobs import JobManager
from sundial.api.notifications import NotificationChannels
from sundial.api.runs import RunManager
from sundial.api.tenancy import TenantManager
from sundial.api.vault import SecretManager
from sundial.run import RunRef
from sundial.v1 import job_service_pb2_grpc


class ServicerBase(job_service_pb2_grpc.JobServiceServicer):
    """The managers the handlers call, and the job or run a request names."""

    def __init__(
        self,
        jobs: JobManager,
        runs: RunManager,
        egress: EgressPolicies,
        tenants: TenantManager,
        audit: AuditLog,
        *,
        calendars: CalendarManager,
        channels: NotificationChannels,
        secrets: SecretManager,
        flow: FlowLimits,
        bulk: BulkActions,
    ) -> None:
        self._secrets = secrets
        self._bulk = bulk
        self._calendars = calendars
        self._channels = channels
        self._flow = flow
        self._jobs = jobs
        self._runs = runs
        self._egress = egress
        self._tenants = tenants
        self._audit = audit

    async def _job(self, tenant: str, text: str, field: str = "job_id") -> uuid.UUID:
        """The uid of the job a request names by ``text`` (a uid or a client id)."""
        return await self._jobs.resolve(tenant, convert.job_ref_in(text, field))

    async def _run(self, tenant: str, request: Any) -> RunRef:
        job, scheduled_at = convert.run_ref_in(request)
        return RunRef(await self._jobs.resolve(tenant, job), scheduled_at)
