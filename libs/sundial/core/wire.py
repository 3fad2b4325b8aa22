"""Between Python values and ``sundial.v1`` protobuf, once for every service.

Timestamps, durations, run references, targets and the run vocabulary's enums
(:mod:`sundial.run`) are converted here and nowhere else. Inbound conversions take the
field path of the value and raise :class:`~sundial.core.errors.InvalidArgument` naming
it; outbound ones cannot fail.

Each run enum maps to the proto enum of the same name by member name
(``RunStatus.DEAD`` <-> ``RUN_STATUS_DEAD``); ``tests/unit/run/test_vocabulary.py`` pins
every member to its number, so a proto change that renames or renumbers one fails there.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from asyncpg.pgproto.pgproto import UUID as _FastUUID
from google.protobuf import duration_pb2, timestamp_pb2
from google.protobuf.internal.enum_type_wrapper import EnumTypeWrapper

from sundial.core import egress
from sundial.core.errors import InvalidArgument
from sundial.internal.v1 import ledger_pb2
from sundial.run import (
    DEFAULT_TOKEN_LIFETIME_S,
    ErrorClass,
    FenceReason,
    GrpcTarget,
    HttpTarget,
    IdentityToken,
    OutcomeStatus,
    RejectReason,
    RunKind,
    RunRef,
    RunStatus,
    SkipReason,
    Target,
    TargetAuth,
)
from sundial.v1 import egress_pb2, job_pb2, run_pb2

__all__ = [
    "MAX_TIME",
    "MIN_TIME",
    "duration",
    "enum_in",
    "enum_out",
    "optional_timestamp",
    "run_ref",
    "run_ref_in",
    "target",
    "target_in",
    "timedelta_in",
    "timestamp",
    "timestamp_in",
]

E = TypeVar("E", bound=enum.Enum)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MIN_SECONDS = 0  # 1970-01-01T00:00:00Z
_MAX_SECONDS = 253_402_300_799  # 9999-12-31T23:59:59Z
_MAX_DURATION_SECONDS = 315_576_000_000  # +-10,000 years, the Duration range

MIN_TIME = _EPOCH
"""The earliest instant accepted inbound: the Unix epoch.

Nothing Sundial schedules or records precedes it (interval schedules are anchored on
it), and it keeps nearly two thousand years of datetime's range below every accepted
instant, so no arithmetic on one (a microsecond, a zone offset, a catch-up window) can
leave that range. A Timestamp goes down to year 1, where ``start - 1 µs`` overflows.
An unset Timestamp (0 s) is still in range."""
MAX_TIME = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)
"""The latest instant accepted inbound: the last whole second of year 9999.

Nearly the end of the Timestamp (and datetime) range, kept since clients send it as
"no upper bound" (a ListRuns filter, a token that never expires); values arithmetic
runs forward from have tighter bounds where they are checked (a schedule's times end
before 9999-01-01). Not the range's last microsecond: asyncpg writes datetime.max as
PostgreSQL's ``infinity`` and reads it back naive."""
_RANGE = f"{MIN_TIME:%Y-%m-%dT%H:%M:%SZ} to {MAX_TIME:%Y-%m-%dT%H:%M:%SZ}"


# --- scalars --------------------------------------------------------------------------


def timestamp(at: datetime) -> timestamp_pb2.Timestamp:
    """An aware datetime as a Timestamp (microsecond precision)."""
    # timedelta keeps seconds and microseconds non-negative (days carry the sign): the
    # Timestamp's normal form, without dividing a count of microseconds (a hot path).
    since = at - _EPOCH
    return timestamp_pb2.Timestamp(
        seconds=since.days * 86_400 + since.seconds, nanos=since.microseconds * 1000
    )


def timestamp_in(ts: timestamp_pb2.Timestamp, field: str, *, exact: bool = False) -> datetime:
    """A Timestamp as an aware UTC datetime, range-checked before any arithmetic.

    Every service reads inbound instants through here, so every one is within
    :data:`MIN_TIME` to :data:`MAX_TIME` before anything computes with it.

    Args:
        ts: The message.
        field: Its path, for errors.
        exact: Refuse sub-microsecond nanos (run keys) instead of truncating them.

    Raises:
        InvalidArgument: Outside :data:`MIN_TIME` to :data:`MAX_TIME`, malformed nanos,
            or (``exact``) finer than a microsecond.
    """
    if not 0 <= ts.nanos < 1_000_000_000:
        raise InvalidArgument(field, f"nanos must be 0 to 999,999,999, got {ts.nanos}")
    if not _MIN_SECONDS <= ts.seconds <= _MAX_SECONDS or (ts.seconds == _MAX_SECONDS and ts.nanos):
        raise InvalidArgument(field, f"must be from {_RANGE}")
    if exact and ts.nanos % 1000:
        raise InvalidArgument(field, "must have microsecond precision (nanos a multiple of 1000)")
    return _EPOCH + timedelta(seconds=ts.seconds, microseconds=ts.nanos // 1000)


def optional_timestamp(message: Any, name: str, field: str) -> datetime | None:
    """The Timestamp field ``name`` of ``message`` if set (see :func:`timestamp_in`)."""
    return timestamp_in(getattr(message, name), field) if message.HasField(name) else None


def duration(delta: timedelta) -> duration_pb2.Duration:
    """A timedelta as a Duration."""
    micros = delta // timedelta(microseconds=1)
    sign = -1 if micros < 0 else 1
    seconds, rest = divmod(abs(micros), 1_000_000)
    return duration_pb2.Duration(seconds=sign * seconds, nanos=sign * rest * 1000)


def timedelta_in(d: duration_pb2.Duration, field: str) -> timedelta:
    """A Duration as a timedelta (sub-microsecond nanos truncated).

    Raises:
        InvalidArgument: Malformed (mixed signs, nanos out of range) or out of range.
    """
    if abs(d.nanos) >= 1_000_000_000 or (d.seconds > 0 > d.nanos) or (d.seconds < 0 < d.nanos):
        raise InvalidArgument(field, "malformed duration")
    if abs(d.seconds) > _MAX_DURATION_SECONDS:
        raise InvalidArgument(field, "duration out of range")
    return timedelta(seconds=d.seconds, microseconds=int(d.nanos / 1000))


# --- run references -------------------------------------------------------------------


def run_ref(ref: RunRef) -> run_pb2.RunRef:
    """The wire form of a run reference."""
    return run_pb2.RunRef(job_id=str(ref.job_id), scheduled_at=timestamp(ref.scheduled_at))


def job_id_in(text: str, field: str = "job_id") -> uuid.UUID:
    """A job id string (required).

    Raises:
        InvalidArgument: Empty or not a UUID.
    """
    if not text:
        raise InvalidArgument(field, "is required")
    try:
        # asyncpg's UUID (a uuid.UUID, equal and hashing alike, the type the database
        # rows carry) parses in C: uuid.UUID's parse was a per-run cost of every service
        # reading run references. It refuses the braces and urn: spellings uuid.UUID
        # takes, which go the slow way, so the same texts are accepted as before.
        return _FastUUID(text)
    except ValueError:
        pass
    try:
        return uuid.UUID(text)
    except ValueError:
        raise InvalidArgument(field, f"{text!r} is not a job id (a UUID)") from None


def run_ref_in(ref: run_pb2.RunRef, field: str) -> RunRef:
    """Parse a wire run reference.

    Raises:
        InvalidArgument: The job id is not a UUID, or scheduled_at is missing, out of
            range or not a whole number of microseconds.
    """
    job_id = job_id_in(ref.job_id, f"{field}.job_id")
    if not ref.HasField("scheduled_at"):
        raise InvalidArgument(f"{field}.scheduled_at", "is required")
    return RunRef(job_id, timestamp_in(ref.scheduled_at, f"{field}.scheduled_at", exact=True))


# --- targets --------------------------------------------------------------------------


def target_auth(value: TargetAuth) -> job_pb2.TargetAuth | None:
    """A target's auth as its wire form (None when it asks for nothing)."""
    if not value:
        return None
    message = job_pb2.TargetAuth(standard_webhooks=value.standard_webhooks)
    if value.identity_token is not None:
        message.identity_token.audience = value.identity_token.audience
        message.identity_token.lifetime.CopyFrom(
            duration(timedelta(seconds=value.identity_token.lifetime_s))
        )
    return message


def target_auth_in(message: job_pb2.TargetAuth) -> TargetAuth:
    """A wire target's auth (the lifetime's range is checked with the target)."""
    token = None
    if message.HasField("identity_token"):
        lifetime = message.identity_token.lifetime
        token = IdentityToken(
            audience=message.identity_token.audience,
            lifetime_s=(
                lifetime.seconds + lifetime.nanos / 1e9
                if message.identity_token.HasField("lifetime")
                else DEFAULT_TOKEN_LIFETIME_S
            ),
        )
    return TargetAuth(standard_webhooks=message.standard_webhooks, identity_token=token)


def target(value: Target | None) -> job_pb2.Target:
    """A target as its wire form (an empty Target for None)."""
    if isinstance(value, HttpTarget):
        return job_pb2.Target(
            http=job_pb2.HttpTarget(
                url=value.url,
                method=value.method,
                headers=dict(value.headers),
                auth=target_auth(value.auth),
            )
        )
    if isinstance(value, GrpcTarget):
        return job_pb2.Target(
            grpc=job_pb2.GrpcTarget(
                address=value.address,
                plaintext=value.plaintext,
                metadata=dict(value.metadata),
                auth=target_auth(value.auth),
            )
        )
    return job_pb2.Target()


def target_in(message: job_pb2.Target) -> Target | None:
    """A wire target, or None when no kind is set."""
    which = message.WhichOneof("kind")
    if which == "http":
        http = message.http
        return HttpTarget(
            url=http.url,
            method=http.method or "POST",  # the domain's default, as for any unset field
            headers=dict(http.headers),
            auth=target_auth_in(http.auth),
        )
    if which == "grpc":
        grpc_target = message.grpc
        return GrpcTarget(
            address=grpc_target.address,
            plaintext=grpc_target.plaintext,
            metadata=dict(grpc_target.metadata),
            auth=target_auth_in(grpc_target.auth),
        )
    return None


# --- egress policies -----------------------------------------------------------------

_PROTOCOL_OUT = {
    egress.Protocol.HTTP: egress_pb2.EGRESS_PROTOCOL_HTTP,
    egress.Protocol.GRPC: egress_pb2.EGRESS_PROTOCOL_GRPC,
}
_PROTOCOL_IN = {number: protocol for protocol, number in _PROTOCOL_OUT.items()}


def egress_policy(policy: egress.EgressPolicy) -> egress_pb2.EgressPolicy:
    """An egress policy as its wire form (both protocols listed when a rule has both)."""
    message = egress_pb2.EgressPolicy()
    for rule in policy.rules:
        protocols = sorted(_PROTOCOL_OUT[p] for p in rule.protocols)
        if rule.host is not None:
            message.rules.add(host=rule.host, protocols=protocols)
        else:
            message.rules.add(cidr=str(rule.network), protocols=protocols)
    return message


def egress_policy_in(message: egress_pb2.EgressPolicy, field: str) -> egress.EgressPolicy:
    """A wire egress policy, checked.

    Raises:
        InvalidArgument: A malformed rule (named ``<field>.rules[i].host`` or ``.cidr``),
            an unknown protocol, or too many rules.
    """
    if len(message.rules) > egress.MAX_RULES:
        raise InvalidArgument(
            f"{field}.rules", f"at most {egress.MAX_RULES} rules, got {len(message.rules)}"
        )
    rules = []
    for i, rule in enumerate(message.rules):
        where = f"{field}.rules[{i}]"
        protocols = []
        for number in rule.protocols:
            if number not in _PROTOCOL_IN:
                raise InvalidArgument(f"{where}.protocols", f"unknown protocol {number}")
            protocols.append(_PROTOCOL_IN[number])
        chosen = protocols or list(egress.Protocol)
        which = rule.WhichOneof("match")
        try:
            if which == "host":
                rules.append(egress.host_rule(rule.host, chosen, f"{where}.host"))
            elif which == "cidr":
                rules.append(egress.network_rule(rule.cidr, chosen, f"{where}.cidr"))
            else:
                raise InvalidArgument(where, "one of host or cidr is required")
        except egress.EgressError as exc:
            raise InvalidArgument(exc.field, exc.problem) from None
    return egress.policy_of(rules)


# --- the run vocabulary ---------------------------------------------------------------

_ENUMS: Mapping[type[enum.Enum], tuple[EnumTypeWrapper, str]] = {
    RunStatus: (run_pb2.RunStatus, "RUN_STATUS_"),
    RunKind: (run_pb2.RunKind, "RUN_KIND_"),
    ErrorClass: (run_pb2.ErrorClass, "ERROR_CLASS_"),
    SkipReason: (run_pb2.SkipReason, "SKIP_REASON_"),
    OutcomeStatus: (ledger_pb2.OutcomeStatus, "OUTCOME_STATUS_"),
    RejectReason: (ledger_pb2.RejectReason, "REJECT_REASON_"),
    FenceReason: (ledger_pb2.FenceReason, "FENCE_REASON_"),
}


def _tables() -> tuple[dict[enum.Enum, int], dict[type[enum.Enum], dict[int, enum.Enum]]]:
    out: dict[enum.Enum, int] = {}
    into: dict[type[enum.Enum], dict[int, enum.Enum]] = {}
    for kind, (wrapper, prefix) in _ENUMS.items():
        into[kind] = {}
        for member in kind:
            number = wrapper.Value(prefix + member.name)
            out[member] = number
            into[kind][number] = member
    return out, into


_OUT, _IN = _tables()


def enum_out(member: enum.Enum | None) -> Any:
    """The proto number of a run enum member (0, UNSPECIFIED, for None).

    Typed ``Any``: at run time an ``int``, which protobuf accepts for every enum field,
    while the generated stubs type each field with its own enum's ``ValueType``.
    """
    return 0 if member is None else _OUT[member]


def enum_in(kind: type[E], number: int, field: str) -> E | None:
    """The member of ``kind`` for a proto number; None for 0 (UNSPECIFIED).

    Raises:
        InvalidArgument: ``number`` is no value of the enum.
    """
    if number == 0:
        return None
    try:
        return _IN[kind][number]  # type: ignore[return-value]
    except KeyError:
        raise InvalidArgument(field, f"unknown value {number}") from None
