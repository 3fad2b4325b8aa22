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
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

from sundial.api.model import (
    CalendarSpec,
)
from sundial.core import netpolicy
from sundial.core.auth import current_credential
from sundial.core.egress import EgressPolicy, Protocol, default_policy, judge
from sundial.core.errors import InvalidArgument
from sundial.core.netpolicy import (
    AddressError,
    AddressPolicy,
    Endpoint,
    IPAddress,
    ResolveError,
    ip_literal,
    parse_address,
    resolve,
)
from sundial.job import JobPolicies, JobSpec
from sundial.run import GrpcTarget, HttpTarget, Target
from sundial.schedule import (
    MAX_SPECS,
    Calendar,
    CompiledSchedule,
    CronSpec,
    IntervalSpec,
    OnceSpec,
    Schedule,
    Spec,
    compile_schedule,
    depends_on_job_id,
    parse_calendar_dates,
)

# --- limits (job.proto, job_service.proto, admin.proto) -----------------------------------

MAX_NAME_CHARS = 200
MAX_DESCRIPTION_CHARS = 2000
MAX_PAYLOAD_BYTES = 256 * 1024
MAX_LABELS = 64
MAX_LABEL_VALUE_CHARS = 256
MAX_NOTE_CHARS = 1024
MAX_CRON_CHARS = 256
MAX_URL_CHARS = 2048
MAX_ADDRESS_CHARS = 1024
MAX_HEADERS = 32
MAX_HEADER_BYTES = 8 * 1024
MAX_JITTER = timedelta(hours=1)
JITTER_SAMPLE = 50  # fire times examined for the cron jitter bound
LATEST_INSTANT = datetime(9999, 1, 1, tzinfo=UTC)
MAX_INTERVAL = timedelta(days=366)
MAX_MAX_RUNS = 1_000_000_000
MAX_BATCH = 1000
MAX_PAGE_SIZE = 1000
DEFAULT_PAGE_SIZE = 50
MAX_PREVIEW_COUNT = 1000
DEFAULT_PREVIEW_COUNT = 10
MAX_LABEL_FILTERS = 64
MAX_NAME_PREFIX_CHARS = 200
MAX_REQUEST_ID_CHARS = 128
MAX_TENANT_ID_CHARS = 64  # as stored; CreateTenant allows 63
HTTP_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE"})

_LABEL_KEY = re.compile(r"[a-z0-9_.\-/]{1,63}")
# RFC 9110 token characters: what an HTTP field name may contain.
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_METADATA_KEY = re.compile(r"[a-z0-9\-_.]+")
_REQUEST_ID = re.compile(r"[\x20-\x7e]+")  # printable ASCII, space included
_CALENDAR_NAME_RE = re.compile(r"[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?")
_BRACKETED_NETLOC = re.compile(r"\[[^\[\]]*\](:[^\[\]]*)?")  # [v6-address] then :port
_TENANT_ID = re.compile(r"[a-z][a-z0-9-]{0,62}")
# A client-chosen job id (AIP-122), as migration 0011's CHECK.
_CLIENT_JOB_ID = re.compile(r"[a-z]([a-z0-9-]{0,61}[a-z0-9])?")
# What a stored tenant id can be (migration 0001's CHECK), looser than CreateTenant's
# rule above: an id a lookup names is checked against it before it reaches a query.
_STORED_TENANT_ID = re.compile(rf"[A-Za-z0-9_-]{{1,{MAX_TENANT_ID_CHARS}}}")

# Set by Sundial or owned by the transport (job.proto): a tenant may not override them.
_RESERVED_HEADERS = frozenset(
    {
        "idempotency-key",
        "traceparent",
        "tracestate",
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
    }
)
_RESERVED_METADATA = frozenset({"idempotency-key", "traceparent", "tracestate"})

_POLICY_RANGES: dict[str, tuple[timedelta, timedelta]] = {
    "misfire_threshold": (timedelta(seconds=1), timedelta(hours=24)),
    "catchup_window": (timedelta(seconds=1), timedelta(days=30)),
    "run_timeout": (timedelta(seconds=1), timedelta(hours=24)),
    "lateness_threshold": (timedelta(seconds=1), timedelta(hours=24)),
}


def _fail(field: str, problem: str) -> InvalidArgument:
    return InvalidArgument(field, problem)


@contextlib.contextmanager
def field_prefix(prefix: str) -> Iterator[None]:
    """Prepend ``prefix`` (``jobs[3].``) to the field of an InvalidArgument raised inside.

    Lets one job's checks serve CreateJob (``schedule.cron``) and BatchCreateJobs
    (``jobs[3].schedule.cron``) alike.
    """
    if not prefix:
        yield
        return
    try:
        yield
    except InvalidArgument as exc:
        raise InvalidArgument(prefix + exc.field, exc.problem) from None


def _duration(value: timedelta) -> str:
    seconds = value.total_seconds()
    return f"{seconds:g}s"


# Unicode category Cc is exactly these two ranges; a regex scans far faster than a loop.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SPACE_OR_CONTROL = re.compile(r"[\s\x00-\x1f\x7f-\x9f]")


def _has_control(text: str) -> bool:
    return _CONTROL.search(text) is not None


# Free text (descriptions, notes) may span lines; other control characters, NUL above
# all (PostgreSQL text cannot hold it), are refused.
_TEXT_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def check_text(text: str, field: str, limit: int) -> None:
    """Free text: at most ``limit`` characters, no control characters but tab and newlines."""
    if len(text) > limit:
        raise _fail(field, f"longer than {limit} characters ({len(text)})")
    if _TEXT_CONTROL.search(text) is not None:
        raise _fail(field, "must not contain control characters (tab and newlines are fine)")


# --- jobs ---------------------------------------------------------------------------------


def check_name(name: str, field: str = "name") -> None:
    """1-200 chars, no control characters."""
    if not name:
        raise _fail(field, "is required")
    if len(name) > MAX_NAME_CHARS:
        raise _fail(field, f"longer than {MAX_NAME_CHARS} characters ({len(name)})")
    if _has_control(name):
        raise _fail(field, "must not contain control characters")


def is_client_job_id(text: str) -> bool:
    """Whether ``text`` has the form of a client-chosen job id (job.proto ``job_id``):
    1-63 chars of a-z, 0-9 and '-', a letter first, not '-' last, and not a UUID."""
    if not _CLIENT_JOB_ID.fullmatch(text):
        return False
    try:
        uuid.UUID(text)
    except ValueError:
        return True
    return False  # 32 hex digits, possibly hyphenated: a uid's form


def check_client_job_id(text: str, field: str = "job_id") -> None:
    """A client-chosen job id for a new job (CreateJob, BatchCreateJobs, ApplyJob)."""
    if is_client_job_id(text):
        return
    try:
        uuid.UUID(text)
    except ValueError:
        raise _fail(
            field,
            "must be 1-63 characters of a-z, 0-9 and '-', starting with a letter and not "
            "ending with '-'",
        ) from None
    raise _fail(field, "must not have the form of a UUID (uids are assigned by the server)")


def check_note(note: str, field: str) -> None:
    """A pause or cancel note: up to 1,024 chars of free text."""
    check_text(note, field, MAX_NOTE_CHARS)


def check_labels(
    labels: Mapping[str, str], field: str = "labels", *, limit: int = MAX_LABELS
) -> None:
    """Up to 64 entries; keys 1-63 chars of [a-z0-9_.-/]; values up to 256 chars."""
    if len(labels) > limit:
        raise _fail(field, f"at most {limit} entries, got {len(labels)}")
    for key in sorted(labels):
        if not _LABEL_KEY.fullmatch(key):
            raise _fail(
                f"{field}[{key!r}]", "keys are 1-63 characters of a-z, 0-9, '_', '.', '-', '/'"
            )
        value = labels[key]
        if len(value) > MAX_LABEL_VALUE_CHARS:
            raise _fail(
                f"{field}[{key!r}]", f"value longer than {MAX_LABEL_VALUE_CHARS} characters"
            )
        if _has_control(value):
            raise _fail(f"{field}[{key!r}]", "value must not contain control characters")


def _check_spec(
    spec: Spec,
    schedule: Schedule,
    field: str,
    now: datetime | None,
    misfire_threshold: timedelta | None,
) -> None:
    """The limits of one spec (``field``: ``schedule`` or ``schedule.specs[i]``)."""
    if isinstance(spec, CronSpec):
        if not spec.expression.strip():
            raise _fail(f"{field}.cron", "is required")
        if len(spec.expression) > MAX_CRON_CHARS:
            raise _fail(f"{field}.cron", f"longer than {MAX_CRON_CHARS} characters")
    elif isinstance(spec, IntervalSpec):
        every, offset = spec.every, spec.offset
        if every <= timedelta(0):
            raise _fail(f"{field}.interval.every", "is required")
        if every < timedelta(seconds=1) or every > MAX_INTERVAL:
            raise _fail(
                f"{field}.interval.every", f"must be 1s to 366 days, got {_duration(every)}"
            )
        if every % timedelta(seconds=1):
            raise _fail(f"{field}.interval.every", f"must be whole seconds, got {_duration(every)}")
        if offset < timedelta(0) or offset >= every:
            raise _fail(
                f"{field}.interval.offset",
                f"must be at least 0 and shorter than every ({_duration(every)}), "
                f"got {_duration(offset)}",
            )
        if offset % timedelta(seconds=1):
            raise _fail(
                f"{field}.interval.offset", f"must be whole seconds, got {_duration(offset)}"
            )
        if schedule.jitter >= every:
            raise _fail(
                "schedule.jitter",
                f"must be shorter than {field}.interval.every ({_duration(every)})",
            )
    elif isinstance(spec, OnceSpec):
        if now is not None and misfire_threshold is not None:
            earliest = now - misfire_threshold
            if spec.at < earliest:
                raise _fail(
                    f"{field}.once",
                    f"{spec.at.isoformat()} is in the past (earlier than now minus "
                    f"policies.misfire_threshold, {_duration(misfire_threshold)})",
                )
        if spec.at >= LATEST_INSTANT:
            raise _fail(f"{field}.once", f"must be before {LATEST_INSTANT.isoformat()}")
    else:
        raise _fail(field, "one of cron, interval or once is required")


def check_schedule(
    schedule: Schedule,
    job_id: str,
    *,
    now: datetime | None = None,
    misfire_threshold: timedelta | None = None,
    calendars: Mapping[str, Calendar] | None = None,
) -> CompiledSchedule:
    """Check the limits job.proto sets on a schedule, then compile it for ``job_id``.

    Args:
        schedule: The schedule.
        job_id: The job it belongs to (Jenkins ``H`` and jitter are hashed from it).
        now: With ``misfire_threshold``, a ``once`` earlier than ``now - threshold`` is
            refused (CreateJob/UpdateJob); without (PreviewSchedule) it is not.
        misfire_threshold: See ``now``.
        calendars: The tenant's calendars the schedule may name (by name).

    Returns:
        The compiled schedule.
    """
    specs = schedule.specs
    if len(specs) > MAX_SPECS:
        raise _fail("schedule.specs", f"at most {MAX_SPECS} specs, got {len(specs)}")
    for i, spec in enumerate(specs):
        _check_spec(spec, schedule, schedule.spec_field(i), now, misfire_threshold)
    for i, name in enumerate(schedule.calendars):
        check_calendar_name(name, f"schedule.calendars[{i}]")
    if not timedelta(0) <= schedule.jitter <= MAX_JITTER:
        raise _fail("schedule.jitter", f"must be 0 to 1h, got {_duration(schedule.jitter)}")
    if not 0 <= schedule.max_runs <= MAX_MAX_RUNS:
        raise _fail("schedule.max_runs", f"must be 0 to {MAX_MAX_RUNS:,}, got {schedule.max_runs}")
    start, end = schedule.start_time, schedule.end_time
    # Both bounds are inclusive (job.proto): equal bounds allow at most one fire time.
    if start is not None and end is not None and end < start:
        raise _fail("schedule.end_time", f"must not be before start_time ({start.isoformat()})")
    for field, instant in (("schedule.start_time", start), ("schedule.end_time", end)):
        # Room for jitter and arithmetic on the time: datetime ends at year 9999.
        if instant is not None and instant >= LATEST_INSTANT:
            raise _fail(field, f"must be before {LATEST_INSTANT.isoformat()}")
    compiled = compile_schedule(schedule, job_id=job_id, calendars=calendars)
    # Several specs can name times closer together than any one of them does.
    if schedule.jitter and (len(specs) > 1 or isinstance(schedule.spec, CronSpec)):
        _check_cron_jitter(compiled, schedule.jitter, now or start or datetime.now(UTC))
    return compiled


def _check_cron_jitter(compiled: CompiledSchedule, jitter: timedelta, after: datetime) -> None:
    """Jitter must be shorter than the gap between fire times, or due times could pass
    one another (an occurrence due before the previous one) and overlap rules would
    judge runs out of order. Checked over the next fire times, where the gaps show."""
    fires = [f.at for f in compiled.preview(after, JITTER_SAMPLE) if not f.dropped]
    gaps = [later - earlier for earlier, later in itertools.pairwise(fires)]
    if gaps and jitter >= min(gaps):
        raise _fail(
            "schedule.jitter",
            f"must be shorter than the shortest gap between fire times ({_duration(min(gaps))})",
        )


MAX_PAUSE_AFTER_DEAD = 1000
"""Largest Policies.failure.pause_after_consecutive_dead (job.proto)."""


def check_policies(policies: JobPolicies) -> None:
    """Ranges of job.proto ``Policies`` (defaults are always in range)."""
    for name, (low, high) in _POLICY_RANGES.items():
        value: timedelta = getattr(policies, name)
        if not low <= value <= high:
            raise _fail(
                f"policies.{name}",
                f"must be {_duration(low)} to {_duration(high)}, got {_duration(value)}",
            )
    if not 1 <= policies.max_catchup <= 1000:
        raise _fail("policies.max_catchup", f"must be 1 to 1000, got {policies.max_catchup}")
    if not 1 <= policies.retry_max_attempts <= 100:
        raise _fail(
            "policies.retry.max_attempts", f"must be 1 to 100, got {policies.retry_max_attempts}"
        )
    dead = policies.pause_after_consecutive_dead
    if not 0 <= dead <= MAX_PAUSE_AFTER_DEAD:
        raise _fail(
            "policies.failure.pause_after_consecutive_dead",
            f"must be 0 (never) to {MAX_PAUSE_AFTER_DEAD}, got {dead}",
        )
    base, cap = policies.retry_base_delay, policies.retry_max_delay
    if not timedelta(seconds=1) <= base <= timedelta(hours=1):
        raise _fail("policies.retry.base_delay", f"must be 1s to 1h, got {_duration(base)}")
    if not base <= cap <= timedelta(hours=24):
        raise _fail(
            "policies.retry.max_delay",
            f"must be base_delay ({_duration(base)}) to 24h, got {_duration(cap)}",
        )


def _check_kv_size(field: str, key: str, value: str) -> None:
    size = len(key.encode()) + len(value.encode())
    if size > MAX_HEADER_BYTES:
        raise _fail(field, f"name plus value is {size} bytes, more than {MAX_HEADER_BYTES}")


def check_http_target(target: HttpTarget, field: str = "target.http") -> HttpTarget:
    """Check an HTTP target; returns it with the method upper-cased (POST when empty)."""
    url = target.url
    if not url:
        raise _fail(f"{field}.url", "is required")
    if len(url) > MAX_URL_CHARS:
        raise _fail(f"{field}.url", f"longer than {MAX_URL_CHARS} characters")
    if _SPACE_OR_CONTROL.search(url):
        raise _fail(f"{field}.url", "must not contain whitespace or control characters")
    try:
        parts = urlsplit(url)
    except ValueError:
        # urlsplit checks a bracketed host: "[1.1.1.1]", "[example.com]", "[::1" fail here.
        raise _fail(
            f"{field}.url", "has a malformed host (brackets hold an IPv6 address only)"
        ) from None
    if parts.scheme.lower() not in ("http", "https"):
        raise _fail(f"{field}.url", "must be an absolute http:// or https:// URL")
    if not parts.netloc or not parts.hostname:
        raise _fail(f"{field}.url", "has no host")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise _fail(f"{field}.url", "must not contain user info (user:password@)")
    if ("[" in parts.netloc or "]" in parts.netloc) and (
        not _BRACKETED_NETLOC.fullmatch(parts.netloc) or ":" not in parts.hostname
    ):
        # urlsplit takes "[::1]x", "x[::1]" and "[::1]]" as the host ::1, and "[v1.fe]"
        # (an RFC 3986 IPvFuture) as the name v1.fe; a client reading the URL by RFC 3986
        # would not.
        raise _fail(f"{field}.url", "has a malformed host (brackets hold an IPv6 address only)")
    try:
        port = parts.port
    except ValueError:
        raise _fail(f"{field}.url", "has an invalid port") from None
    if port == 0:
        raise _fail(f"{field}.url", "has an invalid port")
    check_host(parts.hostname, f"{field}.url")
    method = (target.method or "POST").upper()
    if method not in HTTP_METHODS:
        raise _fail(f"{field}.method", f"must be one of {', '.join(sorted(HTTP_METHODS))}")
    if len(target.headers) > MAX_HEADERS:
        raise _fail(f"{field}.headers", f"at most {MAX_HEADERS} entries, got {len(target.headers)}")
    seen: dict[str, str] = {}
    for name in sorted(target.headers):
        where = f"{field}.headers[{name!r}]"
        value = target.headers[name]
        if not _HEADER_NAME.fullmatch(name):
            raise _fail(where, "is not a valid HTTP header name")
        lowered = name.lower()
        if lowered in seen:
            raise _fail(where, f"same header as {seen[lowered]!r} (names are case-insensitive)")
        seen[lowered] = name
        if lowered in _RESERVED_HEADERS or lowered.startswith("sundial-"):
            raise _fail(where, "is set by Sundial or the transport and cannot be overridden")
        if any(ch in value for ch in "\r\n\0") or _has_control(value.replace("\t", "")):
            raise _fail(where, "value must not contain control characters")
        _check_kv_size(where, name, value)
    return dataclasses.replace(target, method=method)


def split_address(address: str, field: str) -> Endpoint:
    """Split ``host:port`` (IPv6 in brackets) and check both parts."""
    if not address:
        raise _fail(field, "is required")
    if len(address) > MAX_ADDRESS_CHARS:
        raise _fail(field, f"longer than {MAX_ADDRESS_CHARS} characters")
    try:
        return parse_address(address)
    except AddressError as exc:
        raise _fail(field, exc.problem) from None


def check_host(host: str, field: str) -> None:
    """An IP literal or a syntactically valid DNS name."""
    try:
        netpolicy.check_host(host)
    except AddressError as exc:
        raise _fail(field, exc.problem) from None


def check_grpc_target(target: GrpcTarget, field: str = "target.grpc") -> GrpcTarget:
    """Check a gRPC target."""
    split_address(target.address, f"{field}.address")
    if len(target.metadata) > MAX_HEADERS:
        raise _fail(
            f"{field}.metadata", f"at most {MAX_HEADERS} entries, got {len(target.metadata)}"
        )
    for key in sorted(target.metadata):
        where = f"{field}.metadata[{key!r}]"
        value = target.metadata[key]
        if not _METADATA_KEY.fullmatch(key):
            raise _fail(where, "keys are lowercase a-z, 0-9, '-', '_', '.'")
        if key.startswith("grpc-") or key.endswith("-bin"):
            raise _fail(where, "keys must not start with 'grpc-' or end with '-bin'")
        if key in _RESERVED_METADATA or key.startswith("sundial-"):
            raise _fail(where, "is set by Sundial and cannot be overridden")
        if not all(" " <= ch <= "~" for ch in value):
            raise _fail(where, "value must be printable ASCII")
        _check_kv_size(where, key, value)
    return target


def check_target(target: Target | None) -> Target:
    """Exactly one target kind, valid; returns it normalised."""
    if target is None:
        raise _fail("target", "one of http or grpc is required")
    if isinstance(target, HttpTarget):
        return check_http_target(target)
    return check_grpc_target(target)


class SharedChecks:
    """The checks many jobs of one request share, done once each (BatchCreateJobs): a
    schedule that does not depend on the job id is checked and compiled once per
    distinct schedule and misfire threshold, a target once per distinct target. Only
    successes are kept, so every failing job still reports its own field."""

    def __init__(self) -> None:
        self._schedules: dict[tuple[Schedule, timedelta], CompiledSchedule] = {}
        self._targets: dict[Target, Target] = {}

    def schedule(
        self,
        schedule: Schedule,
        job_id: str,
        *,
        now: datetime | None,
        threshold: timedelta,
        calendars: Mapping[str, Calendar] | None = None,
    ) -> CompiledSchedule:
        # One request resolves one set of calendars: keying by the schedule is enough.
        if depends_on_job_id(schedule):
            return check_schedule(
                schedule, job_id, now=now, misfire_threshold=threshold, calendars=calendars
            )
        key = (schedule, threshold)
        found = self._schedules.get(key)
        if found is None:
            found = check_schedule(
                schedule, job_id, now=now, misfire_threshold=threshold, calendars=calendars
            )
            self._schedules[key] = found
        return found

    def target(self, target: Target | None) -> Target:
        if target is None:
            return check_target(target)
        try:
            found = self._targets.get(target)
        except TypeError:  # unhashable (a headers mapping): checked on its own
            return check_target(target)
        if found is None:
            found = self._targets[target] = check_target(target)
        return found


def check_job_spec(
    spec: JobSpec,
    job_id: str,
    *,
    now: datetime | None,
    shared: SharedChecks | None = None,
    calendars: Mapping[str, Calendar] | None = None,
) -> tuple[JobSpec, CompiledSchedule]:
    """Check every input field of a job; returns the normalised spec and its schedule.

    Args:
        spec: The job as requested (defaults filled).
        job_id: Its id (``H`` and jitter).
        now: When the schedule is new or changed: a ``once`` must then not be earlier
            than ``now - misfire_threshold``. None for an update that keeps the
            schedule (a ``once`` that already fired must not block other edits).
        shared: Checks shared with the other jobs of the same request.
        calendars: The tenant's calendars the schedule may name.
    """
    check_name(spec.name)
    check_text(spec.description, "description", MAX_DESCRIPTION_CHARS)
    check_policies(spec.policies)
    threshold = spec.policies.misfire_threshold
    if shared is None:
        compiled = check_schedule(
            spec.schedule, job_id, now=now, misfire_threshold=threshold, calendars=calendars
        )
        target = check_target(spec.target)
    else:
        compiled = shared.schedule(
            spec.schedule, job_id, now=now, threshold=threshold, calendars=calendars
        )
        target = shared.target(spec.target)
    if len(spec.payload) > MAX_PAYLOAD_BYTES:
        raise _fail(
            "payload", f"{len(spec.payload)} bytes, more than {MAX_PAYLOAD_BYTES} (256 KiB)"
        )
    check_labels(spec.labels)
    check_note(spec.pause_note, "pause_note")
    return dataclasses.replace(spec, target=target), compiled


# --- requests -----------------------------------------------------------------------------


def check_request_id(request_id: str, field: str = "request_id") -> None:
    """Empty (no idempotency) or 1-128 printable ASCII characters."""
    if not request_id:
        return
    if len(request_id) > MAX_REQUEST_ID_CHARS or not _REQUEST_ID.fullmatch(request_id):
        raise _fail(field, f"must be 1-{MAX_REQUEST_ID_CHARS} printable ASCII characters")


def page_size(requested: int, field: str = "page_size") -> int:
    """The effective page size: 0 -> 50, above 1,000 -> 1,000, negative refused."""
    if requested < 0:
        raise _fail(field, f"must not be negative, got {requested}")
    if requested == 0:
        return DEFAULT_PAGE_SIZE
    return min(requested, MAX_PAGE_SIZE)


# --- tenants and tokens -------------------------------------------------------------------


def check_tenant_id(tenant_id: str, field: str = "tenant.tenant_id") -> None:
    """1-63 chars of [a-z0-9-], starting with a letter."""
    if not tenant_id:
        raise _fail(field, "is required")
    if not _TENANT_ID.fullmatch(tenant_id):
        raise _fail(field, "must be 1-63 characters of a-z, 0-9 and '-', starting with a letter")


def check_tenant_ref(tenant_id: str, field: str = "tenant_id") -> None:
    """A tenant id a request names: one that could be stored (1-64 chars of
    [A-Za-z0-9_-]), so an impossible one (a NUL, which PostgreSQL text cannot hold,
    above all) is INVALID_ARGUMENT instead of reaching a query."""
    if not tenant_id:
        raise _fail(field, "is required")
    if not _STORED_TENANT_ID.fullmatch(tenant_id):
        raise _fail(field, "is not a tenant id (1-64 characters of A-Z, a-z, 0-9, '_', '-')")


def check_display_name(name: str, field: str) -> None:
    """1-200 chars, no control characters."""
    check_name(name, field)


_QUOTA_RANGES = {
    "max_calendars": 100_000,
    "max_waiting_requested_runs": 10_000_000,
    "revisions_per_job": 100_000,
}
"""The highest value of each quota overriding an operator's default (admin.proto)."""


def check_quota_overrides(values: Mapping[str, int | None], field: str = "tenant.quotas") -> None:
    """Each set value 0 (the operator's default) or within admin.proto's range."""
    for name, value in values.items():
        high = _QUOTA_RANGES[name]
        if value is not None and not 0 <= value <= high:
            raise _fail(f"{field}.{name}", f"must be 1 to {high:,} or 0, got {value}")


def check_quotas(max_jobs: int, max_concurrent_runs: int, field: str = "tenant.quotas") -> None:
    """0 (the cluster default) or within admin.proto's ranges."""
    if not (max_jobs == 0 or 1 <= max_jobs <= 100_000_000):
        raise _fail(f"{field}.max_jobs", f"must be 1 to 100,000,000 or 0, got {max_jobs}")
    if not (max_concurrent_runs == 0 or 1 <= max_concurrent_runs <= 1_000_000):
        raise _fail(
            f"{field}.max_concurrent_runs",
            f"must be 1 to 1,000,000 or 0, got {max_concurrent_runs}",
        )


# --- SSRF ---------------------------------------------------------------------------------

# The operator's rules, the parsing and the resolver are shared with the executor, which
# checks again at call time (sundial.core.netpolicy, sundial.core.egress).
TargetPolicy = AddressPolicy


def protocol_of(target: Target) -> Protocol:
    """Which egress rules apply to ``target``."""
    return Protocol.HTTP if isinstance(target, HttpTarget) else Protocol.GRPC


def _endpoint(
    target: Target, field: str, parsed: dict[Target, Endpoint] | None = None
) -> tuple[str, Endpoint]:
    """The field to blame and the host and port the executor will connect to.

    Args:
        parsed: Endpoints of targets seen before in the same request (filled here).
    """
    where = f"{field}.http.url" if isinstance(target, HttpTarget) else f"{field}.grpc.address"
    try:
        known = parsed.get(target) if parsed is not None else None
    except TypeError:  # unhashable (a headers mapping): parsed on its own
        known, parsed = None, None
    if known is not None:
        return where, known
    if isinstance(target, HttpTarget):
        parts = urlsplit(target.url)
        port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
        endpoint = Endpoint(parts.hostname or "", port)
    else:
        endpoint = split_address(target.address, where)
    if parsed is not None:
        parsed[target] = endpoint
    return where, endpoint


class TargetGuard:
    """Refuses targets whose host is or resolves now to an address the tenant's egress
    policy forbids (docs/design.md section 7).

    An IP literal is judged as it is. A name is resolved: every address must be allowed
    (a name with one public and one private address is refused, since the executor
    could connect to either). A name that does not resolve now (no such name, a
    resolver failure, a timeout) is accepted: a service may be created after its
    schedule, and the check that protects anything is the executor's, on the address it
    connects to at call time.

    Args:
        operator: The operator's deny list and default policy.
        resolve_timeout_s: Bound on each name resolution.
    """

    def __init__(self, operator: TargetPolicy, *, resolve_timeout_s: float = 2.0) -> None:
        self.operator = operator
        self._timeout_s = resolve_timeout_s

    async def check(
        self, target: Target, policy: EgressPolicy | None = None, field: str = "target"
    ) -> None:
        """Raise InvalidArgument naming ``field``'s url/address if the target is refused.

        Args:
            target: A target already checked by :func:`check_target`.
            policy: The tenant's egress policy in force (None: the operator's default).
            field: Path of the target (``jobs[3].target``).
        """
        await self.check_all([(target, field)], policy)

    async def check_all(
        self, items: Sequence[tuple[Target, str]], policy: EgressPolicy | None = None
    ) -> None:
        """:meth:`check` for many targets; each distinct host is resolved once.

        The problem reported is the first one in ``items`` order, so a batch names the
        lowest failing index.

        Raises:
            InvalidArgument: A host is refused.
        """
        verdicts = await self.verdicts([target for target, _ in items], policy)
        for (target, field), verdict in zip(items, verdicts, strict=True):
            if verdict is not None:
                where, _ = _endpoint(target, field)
                raise _fail(where, f"{verdict}; calls to it are not allowed")

    async def verdicts(
        self, targets: Sequence[Target], policy: EgressPolicy | None = None
    ) -> list[str | None]:
        """Why each target is forbidden now (``"host a.example (10.0.0.7) is ..."``), or
        None where it is allowed or its name does not resolve now."""
        policy = policy if policy is not None else default_policy(self.operator)
        hosts: list[str] = []
        ports: dict[str, int] = {}  # each distinct name, with the port of its first use
        parsed: dict[Target, Endpoint] = {}  # each distinct target's endpoint
        for target in targets:
            _, endpoint = _endpoint(target, "target", parsed)
            host = endpoint.host
            if ip_literal(host) is None:
                host = host.lower()  # names are case-insensitive: one lookup per name
                ports.setdefault(host, endpoint.port)
            hosts.append(host)
        limit = asyncio.Semaphore(16)

        caller = current_credential()
        tenant = caller.tenant_id if caller is not None else None

        async def lookup(host: str, port: int) -> tuple[IPAddress, ...]:
            async with limit:
                return await resolve(
                    host,
                    port,
                    timeout_s=self._timeout_s,
                    resolver=self.operator.resolver,
                    tenant=tenant,  # its lookups wait for its own alone
                )

        # return_exceptions: every failure is retrieved; a failed lookup is no verdict.
        results = await asyncio.gather(
            *(lookup(host, port) for host, port in ports.items()), return_exceptions=True
        )
        resolved = dict(zip(ports, results, strict=True))
        verdicts: list[str | None] = []
        for target, host in zip(targets, hosts, strict=True):
            literal = ip_literal(host)
            found = (literal,) if literal is not None else resolved[host]
            if isinstance(found, ResolveError):
                verdicts.append(None)  # checked at call time
                continue
            if isinstance(found, BaseException):
                raise found
            verdicts.append(self._verdict(policy, protocol_of(target), host, found))
        return verdicts

    def _verdict(
        self,
        policy: EgressPolicy,
        protocol: Protocol,
        host: str,
        addresses: Sequence[IPAddress],
    ) -> str | None:
        for address in addresses:
            reason = judge(self.operator, policy, protocol, host, address)
            if reason is not None:
                shown = host if str(address) == host.strip("[]") else f"{host} ({address})"
                return f"host {shown} is {reason}"
        return None


# --- calendars ----------------------------------------------------------------------------


def check_calendar_name(name: str, field: str) -> None:
    """A calendar name: the rules of a client job id (AIP-122)."""
    if not name:
        raise _fail(field, "is required")
    if not _CALENDAR_NAME_RE.fullmatch(name):
        raise _fail(
            field,
            f"{name[:70]!r} must be 1-63 chars of a-z, 0-9 and '-', starting with a letter "
            "and not ending with '-'",
        )


def check_calendar(spec: CalendarSpec, field: str = "calendar") -> Calendar:
    """Validate a calendar definition and return its meaning (dates parsed, deduplicated)."""
    check_calendar_name(spec.name, f"{field}.name")
    check_text(spec.description, f"{field}.description", MAX_DESCRIPTION_CHARS)
    if spec.kind is None:
        raise _fail(f"{field}.kind", "is required (CALENDAR_KIND_EXCLUDE or CALENDAR_KIND_INCLUDE)")
    dates, yearly = parse_calendar_dates(spec.dates, f"{field}.dates")
    return Calendar(name=spec.name, kind=spec.kind, dates=dates, yearly=yearly)
