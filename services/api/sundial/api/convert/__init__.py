"""Wire messages (``sundial.v1``) to domain values and back, for JobService.

Inbound, unset fields become their documented defaults (an UNSPECIFIED enum, a 0 count,
an unset Duration) and values a domain type cannot hold (an unknown enum number, a
timestamp out of range) are refused here, naming the field; every other limit is checked
by :mod:`sundial.api.validation` on the domain value. Outbound, every default is filled
in, so a read shows what Sundial actually does.

Only what is JobService's own is here: schedules, policies, jobs, runs as JobService
shows them, filters and previews. Timestamps, durations, ids, run references, targets
and the run vocabulary's enums are converted by :mod:`sundial.core.wire`, as in every
service.

One module per resource, re-exported here: ``_jobs``, ``_schedule`` (schedules and
policies), ``_runs``, ``_previews`` (fire times, SLOs), ``_calendars``, ``_channels``, ``_flow``;
``_enums`` holds the enum tables they share.
"""

from sundial.api.convert._calendars import calendar_in, calendar_out
from sundial.api.convert._channels import (
    channel_out,
    channel_spec_in,
    event_kind_in,
    event_kind_out,
)
from sundial.api.convert._flow import flow_limit_in, flow_limit_out
from sundial.api.convert._jobs import (
    basic_view,
    egress_out,
    job_filter_in,
    job_out,
    job_ref_in,
    job_spec_in,
    jobs_out,
    outcome_out,
    revision_out,
    view_in,
)
from sundial.api.convert._previews import fire_time_out, preview_out, slo_out
from sundial.api.convert._runs import run_filter_in, run_out, run_ref_in
from sundial.api.convert._schedule import policies_in, policies_out, schedule_in, schedule_out
from sundial.api.convert._secrets import secret_out, target_out

__all__ = [
    "basic_view",
    "calendar_in",
    "calendar_out",
    "channel_out",
    "channel_spec_in",
    "egress_out",
    "event_kind_in",
    "event_kind_out",
    "fire_time_out",
    "flow_limit_in",
    "flow_limit_out",
    "job_filter_in",
    "job_out",
    "job_ref_in",
    "job_spec_in",
    "jobs_out",
    "outcome_out",
    "policies_in",
    "policies_out",
    "preview_out",
    "revision_out",
    "run_filter_in",
    "run_out",
    "run_ref_in",
    "schedule_in",
    "schedule_out",
    "secret_out",
    "slo_out",
    "target_out",
    "view_in",
]
