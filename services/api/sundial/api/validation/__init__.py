"""Every limit of the public API, checked on domain values; refusals name the field.

Each check raises :class:`~sundial.core.errors.InvalidArgument` whose ``field`` is the
dotted path of the offending input (``jobs[3].target.http.url``), so the message starts
with it (job.proto's convention). Nothing here touches the database: validation runs
before any write, which is what makes a refused call change nothing.

:class:`TargetGuard` adds the one check that needs I/O: a target host must not be or
resolve now to an address on the operator's deny list or outside the tenant's egress
policy (SSRF). Reading ``host:port``, resolving and the rules are
:mod:`sundial.core.netpolicy`'s and :mod:`sundial.core.egress`'s, which the executor
applies again per call.

One module per subject, re-exported here: ``_fields`` (the limits, field paths, free
text, request fields), ``_job``, ``_target`` (forms, and :class:`TargetGuard`),
``_tenant``, ``_calendar``, ``_flow``.
"""

from sundial.api.validation._calendar import check_calendar, check_calendar_name
from sundial.api.validation._fields import (
    DEFAULT_PAGE_SIZE,
    DEFAULT_PREVIEW_COUNT,
    HTTP_METHODS,
    JITTER_SAMPLE,
    LATEST_INSTANT,
    MAX_ADDRESS_CHARS,
    MAX_BATCH,
    MAX_CRON_CHARS,
    MAX_DESCRIPTION_CHARS,
    MAX_HEADER_BYTES,
    MAX_HEADERS,
    MAX_INTERVAL,
    MAX_JITTER,
    MAX_LABEL_FILTERS,
    MAX_LABEL_VALUE_CHARS,
    MAX_LABELS,
    MAX_MAX_RUNS,
    MAX_NAME_CHARS,
    MAX_NAME_PREFIX_CHARS,
    MAX_NOTE_CHARS,
    MAX_PAGE_SIZE,
    MAX_PAUSE,
    MAX_PAYLOAD_BYTES,
    MAX_PREVIEW_COUNT,
    MAX_REQUEST_ID_CHARS,
    MAX_TENANT_ID_CHARS,
    MAX_URL_CHARS,
    check_pause_until,
    check_request_id,
    check_text,
    field_prefix,
    page_size,
)
from sundial.api.validation._flow import (
    MAX_FLOW_BURST,
    MAX_FLOW_KEY,
    MAX_FLOW_RATE,
    MAX_FLOW_RUNNING,
    check_flow_key,
    check_flow_limit,
    effective_burst,
)
from sundial.api.validation._job import (
    MAX_PAUSE_AFTER_DEAD,
    SharedChecks,
    check_client_job_id,
    check_job_spec,
    check_labels,
    check_name,
    check_note,
    check_policies,
    check_schedule,
    is_client_job_id,
)
from sundial.api.validation._target import (
    TargetGuard,
    TargetPolicy,
    check_grpc_target,
    check_host,
    check_http_target,
    check_target,
    protocol_of,
    split_address,
)
from sundial.api.validation._tenant import (
    check_display_name,
    check_quota_overrides,
    check_quotas,
    check_tenant_id,
    check_tenant_ref,
)

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "DEFAULT_PREVIEW_COUNT",
    "HTTP_METHODS",
    "JITTER_SAMPLE",
    "LATEST_INSTANT",
    "MAX_ADDRESS_CHARS",
    "MAX_BATCH",
    "MAX_CRON_CHARS",
    "MAX_DESCRIPTION_CHARS",
    "MAX_FLOW_BURST",
    "MAX_FLOW_KEY",
    "MAX_FLOW_RATE",
    "MAX_FLOW_RUNNING",
    "MAX_HEADERS",
    "MAX_HEADER_BYTES",
    "MAX_INTERVAL",
    "MAX_JITTER",
    "MAX_LABELS",
    "MAX_LABEL_FILTERS",
    "MAX_LABEL_VALUE_CHARS",
    "MAX_MAX_RUNS",
    "MAX_NAME_CHARS",
    "MAX_NAME_PREFIX_CHARS",
    "MAX_NOTE_CHARS",
    "MAX_PAGE_SIZE",
    "MAX_PAUSE",
    "MAX_PAUSE_AFTER_DEAD",
    "MAX_PAYLOAD_BYTES",
    "MAX_PREVIEW_COUNT",
    "MAX_REQUEST_ID_CHARS",
    "MAX_TENANT_ID_CHARS",
    "MAX_URL_CHARS",
    "SharedChecks",
    "TargetGuard",
    "TargetPolicy",
    "check_calendar",
    "check_calendar_name",
    "check_client_job_id",
    "check_display_name",
    "check_flow_key",
    "check_flow_limit",
    "check_grpc_target",
    "check_host",
    "check_http_target",
    "check_job_spec",
    "check_labels",
    "check_name",
    "check_note",
    "check_pause_until",
    "check_policies",
    "check_quota_overrides",
    "check_quotas",
    "check_request_id",
    "check_schedule",
    "check_target",
    "check_tenant_id",
    "check_tenant_ref",
    "check_text",
    "effective_burst",
    "field_prefix",
    "is_client_job_id",
    "page_size",
    "protocol_of",
    "split_address",
]
