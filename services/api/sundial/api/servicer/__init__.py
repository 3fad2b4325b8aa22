"""``sundial.v1.JobService``: wire requests in, managers called, wire responses out.

Handlers hold no business rules and no status mapping: they convert, call the job or
run manager with the caller's tenant (from the bearer token), and convert back. A job
named by its client id is resolved to its uid first (``JobManager.resolve``). Errors are
raised as :class:`~sundial.core.errors.SundialError` and mapped by the interceptor.

One part per resource, composed into :class:`JobServicer`: ``_jobs`` (with UpdateJob's
mask and merge), ``_bulk`` (many jobs at once: counts, bulk actions, BatchApplyJobs),
``_runs``, ``_calendars``, ``_channels``, ``_flow``, ``_tenant`` (the caller's audit log,
egress policy, signing secret), ``_secrets``, on ``_base`` (the managers, naming a job or
a run).
"""

from sundial.api.servicer._bulk import BulkHandlers
from sundial.api.servicer._calendars import CalendarHandlers
from sundial.api.servicer._channels import ChannelHandlers
from sundial.api.servicer._flow import FlowHandlers
from sundial.api.servicer._jobs import (
    JOB_MASK,
    JobHandlers,
    check_update_mask,
    client_id_in,
    merge_update,
)
from sundial.api.servicer._runs import RunHandlers
from sundial.api.servicer._secrets import SecretHandlers
from sundial.api.servicer._tenant import TenantHandlers

__all__ = ["JOB_MASK", "JobServicer", "check_update_mask", "client_id_in", "merge_update"]


class JobServicer(
    JobHandlers,
    BulkHandlers,
    RunHandlers,
    CalendarHandlers,
    ChannelHandlers,
    FlowHandlers,
    TenantHandlers,
    SecretHandlers,
):
    """JobService on top of :class:`~sundial.api.jobs.JobManager`,
    :class:`~sundial.api.runs.RunManager` and the other resources' managers (the
    constructor is :class:`~sundial.api.servicer._base.ServicerBase`'s)."""
