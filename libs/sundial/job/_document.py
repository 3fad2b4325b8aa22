"""The stored job document: the columns of ``job_definitions`` (schedule, policies,
target as JSON; the rest plain), shared by the services.

The shape is the proto3 JSON mapping of ``sundial.v1.Schedule`` and ``sundial.v1.Policies``
with the ``.proto`` field names, i.e. what
``json_format.MessageToDict(message, preserving_proto_field_name=True)`` writes: durations
as ``"30s"``, timestamps as RFC 3339 strings, int64 as strings, enums by name. Example::

    schedule = {"cron": "0 * * * *", "time_zone": "Europe/Berlin", "jitter": "30s",
                "end_time": "2026-12-31T00:00:00Z", "max_runs": "10",
                "dst": {"gap": "GAP_POLICY_AUTO"}}
    policies = {"misfire": "MISFIRE_POLICY_CATCH_UP", "overlap": "OVERLAP_POLICY_BUFFER_ONE",
                "retry": {"max_attempts": 5, "base_delay": "10s"}, "run_timeout": "1800s",
                "failure": {"pause_after_consecutive_dead": 3}}

The target column is ``sundial.v1.Target`` in the same mapping (``{"http": {"url": ...,
"method": "POST", "headers": {...}}}`` or ``{"grpc": {"address": ..., "plaintext": false,
"metadata": {...}}}``). This module decodes without protobuf, so domain code (the
dispatcher, the ledger's retry rules) gets plain values; readers accept a missing field
as its default, so the API may omit defaults.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Protocol

from sundial.job._policies import JobPolicies, OverlapPolicy
from sundial.job._spec import JobSpec
from sundial.run import (
    DEFAULT_TOKEN_LIFETIME_S,
    GrpcTarget,
    HttpTarget,
    IdentityToken,
    Target,
    TargetAuth,
    format_timestamp,
)
from sundial.schedule import (
    Calendar,
    CalendarKind,
    CronSpec,
    FoldPolicy,
    GapPolicy,
    IntervalSpec,
    MisfirePolicy,
    OnceSpec,
    Schedule,
    Spec,
    parse_calendar_dates,
)

__all__ = [
    "RESOLVED_CALENDARS_KEY",
    "Columns",
    "calendars_from_json",
    "calendars_to_json",
    "duration_from_json",
    "duration_to_json",
    "policies_from_json",
    "policies_to_json",
    "schedule_from_json",
    "schedule_to_json",
    "spec_from_columns",
    "spec_to_columns",
    "target_from_json",
    "target_to_json",
]


_DURATION = re.compile(r"^(-?\d+(?:\.\d{1,9})?)s$")


def duration_from_json(value: Any, field: str) -> timedelta:
    """Parse a proto JSON duration (``"1.5s"``); numbers are taken as seconds."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return timedelta(seconds=value)
    match = _DURATION.match(str(value))
    if not match:
        raise ValueError(f"{field}: not a duration: {value!r}")
    return timedelta(seconds=float(match.group(1)))


def duration_to_json(value: timedelta) -> str:
    """Write a duration as the proto JSON mapping does (``"30s"``, ``"0.250s"``)."""
    micros = value // timedelta(microseconds=1)
    # The sign applies to the whole value: divmod of a negative would write -1.5 s as
    # "-2.500000s".
    sign = "-" if micros < 0 else ""
    seconds, frac = divmod(abs(micros), 1_000_000)
    return f"{sign}{seconds}s" if frac == 0 else f"{sign}{seconds}.{frac:06d}s"


def _timestamp_from_json(value: Any, field: str) -> datetime:
    text = str(value)
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{field}: not a timestamp: {value!r}") from None
    if parsed.tzinfo is None:
        raise ValueError(f"{field}: timestamp without offset: {value!r}")
    return parsed


def _timestamp_to_json(value: datetime) -> str:
    return format_timestamp(value)


def _enum(value: Any, prefix: str, kind: type[enum.Enum], default: Any) -> Any:
    """Read ``"MISFIRE_POLICY_SKIP"`` (or ``"SKIP"``); UNSPECIFIED or missing is default."""
    if value in (None, "", 0):
        return default
    name = str(value)
    name = name.removeprefix(prefix)
    if name == "UNSPECIFIED":
        return default
    return kind[name]


RESOLVED_CALENDARS_KEY = "resolved_calendars"
"""The key under which the scheduler's copy of a schedule document carries the
referenced calendars' contents (migration 0015's ``sundial_dispatch_schedule``)."""


def _spec_from_json(doc: Mapping[str, Any], field: str) -> Spec:
    if "cron" in doc:
        return CronSpec(str(doc["cron"]))
    if "interval" in doc:
        interval = doc["interval"]
        return IntervalSpec(
            duration_from_json(interval["every"], f"{field}.interval.every"),
            duration_from_json(interval.get("offset", "0s"), f"{field}.interval.offset"),
            from_end=interval.get("from_end") is True,
        )
    if "once" in doc:
        return OnceSpec(_timestamp_from_json(doc["once"], f"{field}.once"))
    raise ValueError(f"{field}: one of cron, interval or once is required")


def _spec_to_json(spec: Spec) -> dict[str, Any]:
    if isinstance(spec, CronSpec):
        return {"cron": spec.expression}
    if isinstance(spec, IntervalSpec):
        interval: dict[str, Any] = {
            "every": duration_to_json(spec.every),
            "offset": duration_to_json(spec.offset),
        }
        # Only when set: the documents (and digests) of every other interval stay as
        # they were written before fixed delays existed.
        if spec.from_end:
            interval["from_end"] = True
        return {"interval": interval}
    return {"once": _timestamp_to_json(spec.at)}


def schedule_from_json(doc: dict[str, Any]) -> Schedule:
    """Decode ``job_definitions.schedule`` (a ``resolved_calendars`` key is ignored:
    :func:`calendars_from_json` reads it).

    Raises:
        ValueError: The document has no spec or a malformed value.
    """
    listed = doc.get("specs")
    if listed:
        specs = [_spec_from_json(s, f"schedule.specs[{i}]") for i, s in enumerate(listed)]
    else:
        specs = [_spec_from_json(doc, "schedule")]
    dst = doc.get("dst") or {}
    return Schedule(
        spec=specs[0],
        more_specs=tuple(specs[1:]),
        spec_list=bool(listed),
        calendars=tuple(str(name) for name in doc.get("calendars") or ()),
        time_zone=doc.get("time_zone") or "UTC",
        start_time=(
            _timestamp_from_json(doc["start_time"], "schedule.start_time")
            if doc.get("start_time")
            else None
        ),
        end_time=(
            _timestamp_from_json(doc["end_time"], "schedule.end_time")
            if doc.get("end_time")
            else None
        ),
        jitter=duration_from_json(doc.get("jitter", "0s"), "schedule.jitter"),
        dst_gap=_enum(dst.get("gap"), "GAP_POLICY_", GapPolicy, GapPolicy.AUTO),
        dst_fold=_enum(dst.get("fold"), "FOLD_POLICY_", FoldPolicy, FoldPolicy.AUTO),
        max_runs=int(doc.get("max_runs", 0) or 0),
    )


def schedule_to_json(schedule: Schedule) -> dict[str, Any]:
    """Encode a schedule as ``job_definitions.schedule`` (every field written)."""
    doc: dict[str, Any]
    if schedule.spec_list:
        doc = {"specs": [_spec_to_json(spec) for spec in schedule.specs]}
    else:
        doc = _spec_to_json(schedule.spec)
    if schedule.calendars:
        doc["calendars"] = list(schedule.calendars)
    doc["time_zone"] = schedule.time_zone or "UTC"
    if schedule.start_time is not None:
        doc["start_time"] = _timestamp_to_json(schedule.start_time)
    if schedule.end_time is not None:
        doc["end_time"] = _timestamp_to_json(schedule.end_time)
    doc["jitter"] = duration_to_json(schedule.jitter)
    doc["dst"] = {
        "gap": f"GAP_POLICY_{schedule.dst_gap.value}",
        "fold": f"FOLD_POLICY_{schedule.dst_fold.value}",
    }
    doc["max_runs"] = str(schedule.max_runs)
    return doc


def calendars_to_json(calendars: list[Calendar] | tuple[Calendar, ...]) -> list[dict[str, Any]]:
    """Encode the calendars a schedule references as ``job_definitions.calendars``
    (migration 0015): their contents, in reference order, without versions (the
    definition digest then changes only when a date or a kind does)."""
    return [{"name": c.name, "kind": c.kind.value, "dates": c.entries()} for c in calendars]


def calendars_from_json(doc: Any) -> dict[str, Calendar]:
    """Decode calendar contents (``job_definitions.calendars``, or the
    ``resolved_calendars`` key of the scheduler's schedule document) by name.

    Raises:
        ValueError: A malformed entry.
    """
    found: dict[str, Calendar] = {}
    for entry in doc or ():
        name = str(entry["name"])
        dates, yearly = parse_calendar_dates(entry.get("dates") or (), f"calendars[{name}]")
        found[name] = Calendar(name, CalendarKind(entry["kind"]), dates, yearly)
    return found


def policies_from_json(doc: dict[str, Any]) -> JobPolicies:
    """Decode ``job_definitions.policies``, filling defaults."""
    d = JobPolicies()
    retry = doc.get("retry") or {}
    flow = doc.get("flow") or {}
    return JobPolicies(
        misfire=_enum(doc.get("misfire"), "MISFIRE_POLICY_", MisfirePolicy, d.misfire),
        misfire_threshold=(
            duration_from_json(doc["misfire_threshold"], "policies.misfire_threshold")
            if doc.get("misfire_threshold")
            else d.misfire_threshold
        ),
        catchup_window=(
            duration_from_json(doc["catchup_window"], "policies.catchup_window")
            if doc.get("catchup_window")
            else d.catchup_window
        ),
        max_catchup=int(doc.get("max_catchup") or d.max_catchup),
        overlap=_enum(doc.get("overlap"), "OVERLAP_POLICY_", OverlapPolicy, d.overlap),
        retry_max_attempts=int(retry.get("max_attempts") or d.retry_max_attempts),
        retry_base_delay=(
            duration_from_json(retry["base_delay"], "policies.retry.base_delay")
            if retry.get("base_delay")
            else d.retry_base_delay
        ),
        retry_max_delay=(
            duration_from_json(retry["max_delay"], "policies.retry.max_delay")
            if retry.get("max_delay")
            else d.retry_max_delay
        ),
        run_timeout=(
            duration_from_json(doc["run_timeout"], "policies.run_timeout")
            if doc.get("run_timeout")
            else d.run_timeout
        ),
        lateness_threshold=(
            duration_from_json(doc["lateness_threshold"], "policies.lateness_threshold")
            if doc.get("lateness_threshold")
            else d.lateness_threshold
        ),
        pause_after_consecutive_dead=int(
            (doc.get("failure") or {}).get("pause_after_consecutive_dead") or 0
        ),
        priority=int(flow.get("priority") or d.priority),
        rate_limit_key=str(flow.get("rate_limit_key") or ""),
        concurrency_key=str(flow.get("concurrency_key") or ""),
    )


def policies_to_json(policies: JobPolicies) -> dict[str, Any]:
    """Encode effective policies as ``job_definitions.policies`` (every field written)."""
    return {
        "misfire": f"MISFIRE_POLICY_{policies.misfire.value}",
        "misfire_threshold": duration_to_json(policies.misfire_threshold),
        "catchup_window": duration_to_json(policies.catchup_window),
        "max_catchup": policies.max_catchup,
        "overlap": f"OVERLAP_POLICY_{policies.overlap.value}",
        "retry": {
            "max_attempts": policies.retry_max_attempts,
            "base_delay": duration_to_json(policies.retry_base_delay),
            "max_delay": duration_to_json(policies.retry_max_delay),
        },
        "run_timeout": duration_to_json(policies.run_timeout),
        "lateness_threshold": duration_to_json(policies.lateness_threshold),
        # Read by SQL too (the ledger's failure policy, queries.sql mark_failure_pauses).
        "failure": {"pause_after_consecutive_dead": policies.pause_after_consecutive_dead},
        # Read by SQL too (the ledger's concurrency limit, queries.sql tenant_lease_terms).
        "flow": {
            "priority": policies.priority,
            "rate_limit_key": policies.rate_limit_key,
            "concurrency_key": policies.concurrency_key,
        },
    }


def auth_to_json(auth: TargetAuth) -> dict[str, Any]:
    """A target's ``auth`` as its document (proto JSON: ``json_format.ParseDict`` reads it)."""
    doc: dict[str, Any] = {"standard_webhooks": auth.standard_webhooks}
    if auth.identity_token is not None:
        doc["identity_token"] = {
            "audience": auth.identity_token.audience,
            "lifetime": duration_to_json(timedelta(seconds=auth.identity_token.lifetime_s)),
        }
    return doc


def auth_from_json(doc: Mapping[str, Any] | None) -> TargetAuth:
    """A target document's ``auth`` (absent: none)."""
    if not doc:
        return TargetAuth()
    token = doc.get("identity_token")
    return TargetAuth(
        standard_webhooks=bool(doc.get("standard_webhooks", False)),
        identity_token=None
        if token is None
        else IdentityToken(
            audience=str(token.get("audience") or ""),
            lifetime_s=duration_from_json(
                token.get("lifetime") or DEFAULT_TOKEN_LIFETIME_S, "lifetime"
            ).total_seconds(),
        ),
    )


def target_to_json(target: Target) -> dict[str, Any]:
    """Encode a target as ``job_definitions.target`` (every field written, so a reader
    needs no defaults; ``json_format.ParseDict`` reads it into the wire message too),
    except ``auth``, written only when set so the documents of targets without it stay
    as they were."""
    if isinstance(target, HttpTarget):
        http: dict[str, Any] = {
            "url": target.url,
            "method": target.method,
            "headers": dict(target.headers),
        }
        if target.auth:
            http["auth"] = auth_to_json(target.auth)
        return {"http": http}
    grpc: dict[str, Any] = {
        "address": target.address,
        "plaintext": target.plaintext,
        "metadata": dict(target.metadata),
    }
    if target.auth:
        grpc["auth"] = auth_to_json(target.auth)
    return {"grpc": grpc}


def target_from_json(doc: Mapping[str, Any] | None) -> Target | None:
    """Decode ``job_definitions.target``; None when the document names no kind."""
    doc = doc or {}
    if "http" in doc:
        http = doc["http"] or {}
        return HttpTarget(
            url=str(http.get("url", "")),
            method=str(http.get("method") or "POST").upper(),
            headers={str(k): str(v) for k, v in (http.get("headers") or {}).items()},
            auth=auth_from_json(http.get("auth")),
        )
    if "grpc" in doc:
        grpc = doc["grpc"] or {}
        return GrpcTarget(
            address=str(grpc.get("address", "")),
            plaintext=bool(grpc.get("plaintext", False)),
            metadata={str(k): str(v) for k, v in (grpc.get("metadata") or {}).items()},
            auth=auth_from_json(grpc.get("auth")),
        )
    return None


class Columns(Protocol):
    """A row read by column name (an ``asyncpg.Record``, a dict)."""

    def __getitem__(self, name: str, /) -> Any: ...


def spec_from_columns(row: Columns) -> JobSpec:
    """The spec in a row's definition columns (``jobs`` joined to ``job_definitions``, or
    ``job_revisions``): ``name``, ``schedule``, ``target``, ``description``, ``payload``,
    ``policies``, ``labels``, ``paused``, ``pause_note``.

    Raises:
        ValueError: A malformed document.
    """
    return JobSpec(
        name=row["name"],
        schedule=schedule_from_json(row["schedule"]),
        target=target_from_json(row["target"]),
        description=row["description"],
        payload=bytes(row["payload"]),
        policies=policies_from_json(row["policies"]),
        labels=dict(row["labels"]),
        paused=row["paused"],
        pause_note=row["pause_note"],
    )


def spec_to_columns(spec: JobSpec) -> dict[str, Any]:
    """The definition columns of ``spec``, as :func:`spec_from_columns` reads them back
    (the documents as JSON-ready values; every field written)."""
    return {
        "name": spec.name,
        "schedule": schedule_to_json(spec.schedule),
        "target": None if spec.target is None else target_to_json(spec.target),
        "description": spec.description,
        "payload": spec.payload,
        "policies": policies_to_json(spec.policies),
        "labels": dict(spec.labels),
        "paused": spec.paused,
        "pause_note": spec.pause_note,
    }
