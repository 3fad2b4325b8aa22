"""Schedules and policies: wire <-> domain, every default filled in on the way out."""

from __future__ import annotations

import functools
from datetime import timedelta
from typing import Any

from sundial.api.convert._enums import _FOLD, _GAP, _MISFIRE, _OVERLAP, _enum, _number
from sundial.core import wire
from sundial.core.errors import InvalidArgument
from sundial.job import JobPolicies
from sundial.schedule import (
    MAX_SPECS,
    CronSpec,
    FoldPolicy,
    GapPolicy,
    IntervalSpec,
    OnceSpec,
    Schedule,
    Spec,
)
from sundial.v1 import job_pb2


def _spec_in(message: Any, which: str | None, field: str) -> Spec:
    """One spec of a Schedule (its ``spec`` oneof) or of a ScheduleSpec (``kind``)."""
    if which == "cron":
        return CronSpec(message.cron)
    if which == "interval":
        return IntervalSpec(
            every=wire.timedelta_in(message.interval.every, f"{field}.interval.every"),
            offset=wire.timedelta_in(message.interval.offset, f"{field}.interval.offset"),
            from_end=message.interval.from_end,
        )
    if which == "once":
        return OnceSpec(wire.timestamp_in(message.once, f"{field}.once"))
    raise InvalidArgument(field, "one of cron, interval or once is required")


def _spec_out(spec: Spec, message: Any) -> None:
    if isinstance(spec, CronSpec):
        message.cron = spec.expression
    elif isinstance(spec, IntervalSpec):
        message.interval.every.CopyFrom(wire.duration(spec.every))
        message.interval.offset.CopyFrom(wire.duration(spec.offset))
        message.interval.from_end = spec.from_end
    else:
        message.once.CopyFrom(wire.timestamp(spec.at))


def schedule_in(message: job_pb2.Schedule, field: str = "schedule") -> Schedule:
    """A wire schedule as a domain schedule (limits are checked later)."""
    which = message.WhichOneof("spec")
    if message.specs:
        if which is not None:
            raise InvalidArgument(
                f"{field}.specs", f"must not be set together with {field}.{which}"
            )
        if len(message.specs) > MAX_SPECS:
            raise InvalidArgument(
                f"{field}.specs", f"at most {MAX_SPECS} specs, got {len(message.specs)}"
            )
        specs = [
            _spec_in(s, s.WhichOneof("kind"), f"{field}.specs[{i}]")
            for i, s in enumerate(message.specs)
        ]
    else:
        specs = [_spec_in(message, which, field)]
    return Schedule(
        spec=specs[0],
        more_specs=tuple(specs[1:]),
        spec_list=bool(message.specs),
        calendars=tuple(message.calendars),
        time_zone=message.time_zone or "UTC",
        start_time=wire.optional_timestamp(message, "start_time", f"{field}.start_time"),
        end_time=wire.optional_timestamp(message, "end_time", f"{field}.end_time"),
        jitter=wire.timedelta_in(message.jitter, f"{field}.jitter"),
        dst_gap=_enum(message.dst.gap, _GAP, GapPolicy.AUTO, f"{field}.dst.gap"),
        dst_fold=_enum(message.dst.fold, _FOLD, FoldPolicy.AUTO, f"{field}.dst.fold"),
        max_runs=message.max_runs,
    )


@functools.lru_cache(maxsize=4096)
def schedule_out(schedule: Schedule) -> job_pb2.Schedule:
    """A domain schedule as its wire form, every default filled in.

    Cached like :func:`policies_out` (imports share a few schedules); never mutate it.
    """
    message = job_pb2.Schedule(
        time_zone=schedule.time_zone or "UTC",
        max_runs=schedule.max_runs,
        dst=job_pb2.DstPolicy(
            gap=_number(schedule.dst_gap, _GAP), fold=_number(schedule.dst_fold, _FOLD)
        ),
    )
    if schedule.spec_list:
        for spec in schedule.specs:
            _spec_out(spec, message.specs.add())
    else:
        _spec_out(schedule.spec, message)
    message.calendars.extend(schedule.calendars)
    if schedule.start_time is not None:
        message.start_time.CopyFrom(wire.timestamp(schedule.start_time))
    if schedule.end_time is not None:
        message.end_time.CopyFrom(wire.timestamp(schedule.end_time))
    message.jitter.CopyFrom(wire.duration(schedule.jitter))
    return message


def _duration_or(message: Any, name: str, default: timedelta, field: str) -> timedelta:
    return wire.timedelta_in(getattr(message, name), field) if message.HasField(name) else default


def policies_in(message: job_pb2.Policies) -> JobPolicies:
    """Wire policies with every unset field taking its default."""
    d = JobPolicies()
    retry = message.retry
    return JobPolicies(
        misfire=_enum(message.misfire, _MISFIRE, d.misfire, "policies.misfire"),
        misfire_threshold=_duration_or(
            message, "misfire_threshold", d.misfire_threshold, "policies.misfire_threshold"
        ),
        catchup_window=_duration_or(
            message, "catchup_window", d.catchup_window, "policies.catchup_window"
        ),
        max_catchup=message.max_catchup or d.max_catchup,
        overlap=_enum(message.overlap, _OVERLAP, d.overlap, "policies.overlap"),
        retry_max_attempts=retry.max_attempts or d.retry_max_attempts,
        retry_base_delay=_duration_or(
            retry, "base_delay", d.retry_base_delay, "policies.retry.base_delay"
        ),
        retry_max_delay=_duration_or(
            retry, "max_delay", d.retry_max_delay, "policies.retry.max_delay"
        ),
        run_timeout=_duration_or(message, "run_timeout", d.run_timeout, "policies.run_timeout"),
        lateness_threshold=_duration_or(
            message, "lateness_threshold", d.lateness_threshold, "policies.lateness_threshold"
        ),
        pause_after_consecutive_dead=message.failure.pause_after_consecutive_dead,
        priority=message.flow.priority or d.priority,
        rate_limit_key=message.flow.rate_limit_key,
        concurrency_key=message.flow.concurrency_key,
    )


@functools.lru_cache(maxsize=1024)
def policies_out(policies: JobPolicies) -> job_pb2.Policies:
    """Effective policies as their wire form.

    Cached: most jobs share a few policy sets. Callers copy the result into a parent
    message (the constructor and ``CopyFrom`` copy), never mutate it.
    """
    return job_pb2.Policies(
        misfire=_number(policies.misfire, _MISFIRE),
        misfire_threshold=wire.duration(policies.misfire_threshold),
        catchup_window=wire.duration(policies.catchup_window),
        max_catchup=policies.max_catchup,
        overlap=_number(policies.overlap, _OVERLAP),
        retry=job_pb2.RetryPolicy(
            max_attempts=policies.retry_max_attempts,
            base_delay=wire.duration(policies.retry_base_delay),
            max_delay=wire.duration(policies.retry_max_delay),
        ),
        run_timeout=wire.duration(policies.run_timeout),
        lateness_threshold=wire.duration(policies.lateness_threshold),
        failure=job_pb2.FailurePolicy(
            pause_after_consecutive_dead=policies.pause_after_consecutive_dead
        ),
        flow=job_pb2.FlowPolicy(
            priority=policies.priority,
            rate_limit_key=policies.rate_limit_key,
            concurrency_key=policies.concurrency_key,
        ),
    )
