"""A job's checks: name, ids, labels, schedule, policies, the whole spec."""

from __future__ import annotations

import dataclasses
import itertools
import re
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from sundial.api.validation._calendar import check_calendar_name
from sundial.api.validation._fields import (
    JITTER_SAMPLE,
    LATEST_INSTANT,
    MAX_CRON_CHARS,
    MAX_DESCRIPTION_CHARS,
    MAX_INTERVAL,
    MAX_JITTER,
    MAX_LABEL_VALUE_CHARS,
    MAX_LABELS,
    MAX_MAX_RUNS,
    MAX_NAME_CHARS,
    MAX_NOTE_CHARS,
    MAX_PAYLOAD_BYTES,
    _duration,
    _fail,
    _has_control,
    check_text,
)
from sundial.api.validation._flow import check_flow_key
from sundial.api.validation._target import check_target
from sundial.core.memo import Memo, per_object
from sundial.job import JobPolicies, JobSpec
from sundial.run import Target
from sundial.schedule import (
    MAX_SPECS,
    Calendar,
    CompiledSchedule,
    CronSpec,
    IntervalSpec,
    MisfirePolicy,
    OnceSpec,
    Schedule,
    Spec,
    compile_schedule,
    depends_on_job_id,
)

_LABEL_KEY = re.compile(r"[a-z0-9_.\-/]{1,63}")


# A client-chosen job id (AIP-122), as migration 0011's CHECK.
_CLIENT_JOB_ID = re.compile(r"[a-z]([a-z0-9-]{0,61}[a-z0-9])?")


_POLICY_RANGES: dict[str, tuple[timedelta, timedelta]] = {
    "misfire_threshold": (timedelta(seconds=1), timedelta(hours=24)),
    "catchup_window": (timedelta(seconds=1), timedelta(days=30)),
    "run_timeout": (timedelta(seconds=1), timedelta(hours=24)),
    "lateness_threshold": (timedelta(seconds=1), timedelta(hours=24)),
}


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
    _check_jitter(compiled, now)
    return compiled


def check_schedule_for_job(
    checked: CompiledSchedule, job_id: str, *, now: datetime | None = None
) -> CompiledSchedule:
    """:func:`check_schedule` of ``checked``'s schedule (checked and compiled for
    another job, with the same ``now`` and calendars) for ``job_id``: only what depends
    on the job id is done again (its ``H`` expansion, the jitter check)."""
    compiled = checked.for_job(job_id)
    _check_jitter(compiled, now)
    return compiled


def _check_jitter(compiled: CompiledSchedule, now: datetime | None) -> None:
    schedule = compiled.schedule
    # Several specs can name times closer together than any one of them does.
    if schedule.jitter and (len(schedule.specs) > 1 or isinstance(schedule.spec, CronSpec)):
        after = now or schedule.start_time or datetime.now(UTC)
        _check_cron_jitter(compiled, schedule.jitter, after)


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
    if not 1 <= policies.priority <= 5:
        raise _fail(
            "policies.flow.priority", f"must be 0 (default) or 1 to 5, got {policies.priority}"
        )
    for name in ("rate_limit_key", "concurrency_key"):
        if key := getattr(policies, name):  # empty: the default
            check_flow_key(key, f"policies.flow.{name}")
    base, cap = policies.retry_base_delay, policies.retry_max_delay
    if not timedelta(seconds=1) <= base <= timedelta(hours=1):
        raise _fail("policies.retry.base_delay", f"must be 1s to 1h, got {_duration(base)}")
    if not base <= cap <= timedelta(hours=24):
        raise _fail(
            "policies.retry.max_delay",
            f"must be base_delay ({_duration(base)}) to 24h, got {_duration(cap)}",
        )


class SharedChecks:
    """The checks many jobs of one request share, done once each (BatchCreateJobs): a
    schedule that does not depend on the job id is checked and compiled once per
    distinct schedule and misfire threshold (one that does is checked once and only its
    job-dependent part done per job), a target and a policy set once each.
    Values are found by object first (the request's conversion gives the jobs that
    share a value one object: no hashing per job, and a target with headers, which
    cannot be hashed, is found too), schedules then by value. Only successes are kept,
    so every failing job still reports its own field."""

    def __init__(self) -> None:
        self._schedules: dict[tuple[Schedule, timedelta], CompiledSchedule] = {}
        # By (id, threshold): the schedule kept (so its id is not reused) with its
        # compilation, and whether that depends on the job id (then it is the first
        # job's, and each other job's is derived from it: only its `H` computed again).
        self._schedule_objects: dict[
            tuple[int, timedelta], tuple[Schedule, CompiledSchedule, bool]
        ] = {}
        self._targets: Memo = {}
        self._policies: Memo = {}

    def schedule(
        self,
        schedule: Schedule,
        job_id: str | uuid.UUID,
        *,
        now: datetime | None,
        threshold: timedelta,
        calendars: Mapping[str, Calendar] | None = None,
    ) -> CompiledSchedule:
        """The checked schedule compiled for ``job_id`` (written out only when it is
        compiled: for a schedule that depends on it, or the first of its kind)."""
        # One request resolves one set of calendars: keying by the schedule is enough.
        found = self._schedule_objects.get((id(schedule), threshold))
        if found is not None:
            if found[2]:
                return check_schedule_for_job(found[1], str(job_id), now=now)
            return found[1]
        per_job = depends_on_job_id(schedule)
        key = (schedule, threshold)
        known = None if per_job else self._schedules.get(key)
        compiled = known or check_schedule(
            schedule, str(job_id), now=now, misfire_threshold=threshold, calendars=calendars
        )
        if not per_job:
            self._schedules[key] = compiled
        self._schedule_objects[(id(schedule), threshold)] = (schedule, compiled, per_job)
        return compiled

    def target(self, target: Target | None) -> Target:
        """The checked (normalised) target: one object for each input object."""
        if target is None:
            return check_target(target)
        return per_object(self._targets, target, check_target)

    def policies(self, policies: JobPolicies) -> None:
        per_object(self._policies, policies, check_policies)


def check_job_spec(
    spec: JobSpec,
    job_id: str | uuid.UUID,
    *,
    now: datetime | None,
    shared: SharedChecks | None = None,
    calendars: Mapping[str, Calendar] | None = None,
) -> tuple[JobSpec, CompiledSchedule]:
    """Check every input field of a job; returns the normalised spec and its schedule.

    Args:
        spec: The job as requested (defaults filled).
        job_id: Its id (``H`` and jitter; a UUID is written out only if needed).
        now: When the schedule is new or changed: a ``once`` must then not be earlier
            than ``now - misfire_threshold``. None for an update that keeps the
            schedule (a ``once`` that already fired must not block other edits).
        shared: Checks shared with the other jobs of the same request.
        calendars: The tenant's calendars the schedule may name.
    """
    check_name(spec.name)
    check_text(spec.description, "description", MAX_DESCRIPTION_CHARS)
    threshold = spec.policies.misfire_threshold
    if shared is None:
        check_policies(spec.policies)
        compiled = check_schedule(
            spec.schedule, str(job_id), now=now, misfire_threshold=threshold, calendars=calendars
        )
        target = check_target(spec.target)
    else:
        shared.policies(spec.policies)
        compiled = shared.schedule(
            spec.schedule, job_id, now=now, threshold=threshold, calendars=calendars
        )
        target = shared.target(spec.target)
    if compiled.fixed_delay is not None and spec.policies.misfire is not MisfirePolicy.RUN_ONCE:
        # One occurrence is due at a time, and a late one fires at once (docs/design.md
        # section 4, "Fixed delay"): there is nothing to skip or catch up.
        raise _fail(
            "policies.misfire",
            f"a fixed-delay schedule (schedule.interval.from_end) runs a late occurrence "
            f"once, at once: only MISFIRE_POLICY_RUN_ONCE applies, got "
            f"MISFIRE_POLICY_{spec.policies.misfire.value}",
        )
    if len(spec.payload) > MAX_PAYLOAD_BYTES:
        raise _fail(
            "payload", f"{len(spec.payload)} bytes, more than {MAX_PAYLOAD_BYTES} (256 KiB)"
        )
    check_labels(spec.labels)
    check_note(spec.pause_note, "pause_note")
    if target is spec.target:
        return spec, compiled
    return dataclasses.replace(spec, target=target), compiled
