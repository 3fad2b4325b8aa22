"""The options of ``sundial jobs`` and what they build: a schedule, a target, policies,
a payload."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sundial.cli._client import (
    fail,
    parse_duration,
    parse_pairs,
    parse_time,
)
from sundial.v1 import job_pb2

JobId = Annotated[str, typer.Argument(help="The job's id.", show_default=False)]


Note = Annotated[str, typer.Option(help="Why (stored as the job's pause note).")]


Version = Annotated[
    int, typer.Option(help="Only if the job is at this version (0: unconditionally).")
]


_OVERLAP = {
    n.removeprefix("OVERLAP_POLICY_").lower().replace("_", "-"): v
    for n, v in job_pb2.OverlapPolicy.items()
    if v
}


_MISFIRE = {
    n.removeprefix("MISFIRE_POLICY_").lower().replace("_", "-"): v
    for n, v in job_pb2.MisfirePolicy.items()
    if v
}


Cron = Annotated[
    list[str] | None,
    typer.Option(help="Cron expression (5 or 6 fields, macros, H); repeatable (a union)."),
]


Every = Annotated[
    list[str] | None, typer.Option(help="Interval, e.g. 5s, 15m, 1h; repeatable (a union).")
]


Offset = Annotated[str, typer.Option(help="Interval phase, e.g. 30s (with one --every).")]


FromEnd = Annotated[
    bool,
    typer.Option(
        "--from-end",
        help="With one --every: count it from the end of the previous run (fixed delay), "
        "not on a fixed grid.",
    ),
]


Calendars = Annotated[
    list[str] | None,
    typer.Option("--calendar", help="Name of a calendar that filters the times; repeatable."),
]


At = Annotated[str, typer.Option(help="Run once at this ISO 8601 instant.")]


Url = Annotated[str, typer.Option(help="HTTP(S) target URL.")]


Header = Annotated[
    list[str] | None, typer.Option(help="HTTP header (gRPC: metadata) KEY=VALUE, repeatable.")
]


GrpcAddress = Annotated[str, typer.Option("--grpc", help="gRPC target host:port (TargetService).")]


StandardWebhooks = Annotated[
    bool | None,
    typer.Option(
        "--standard-webhooks/--no-standard-webhooks",
        help="Also sign calls in the Standard Webhooks format (webhook-id, "
        "webhook-timestamp, webhook-signature).",
        show_default=False,
    ),
]


IdentityTokenFlag = Annotated[
    bool | None,
    typer.Option(
        "--identity-token/--no-identity-token",
        help="Send a short-lived JWT signed by Sundial as Authorization: Bearer on every "
        "call (verify it against the API's /.well-known/jwks.json).",
        show_default=False,
    ),
]


Audience = Annotated[
    str | None,
    typer.Option(
        help="The identity token's aud claim (empty: the target's URL or address); "
        "implies --identity-token.",
        show_default=False,
    ),
]


TokenLifetime = Annotated[
    str,
    typer.Option(
        help="How long an identity token is valid, 1m to 60m (default 5m); implies "
        "--identity-token."
    ),
]


Payload = Annotated[str, typer.Option(help="Body sent on every run (text).")]


PayloadFile = Annotated[Path | None, typer.Option(help="Body read from a file.")]


Labels = Annotated[list[str] | None, typer.Option("--label", help="Label KEY=VALUE, repeatable.")]


Jitter = Annotated[str, typer.Option(help="Random delay bound, e.g. 30s.")]


Overlap = Annotated[str, typer.Option(help=f"One of {', '.join(_OVERLAP)}.")]


Misfire = Annotated[str, typer.Option(help=f"One of {', '.join(_MISFIRE)}.")]


MaxAttempts = Annotated[int, typer.Option(help="Attempts per run (0: default 5).")]


Timeout = Annotated[str, typer.Option(help="Per-attempt timeout, e.g. 5m.")]


LatenessThreshold = Annotated[
    str,
    typer.Option(help="SLO: a run starting later than this after its due time is late, e.g. 2m."),
]


PauseAfterDead = Annotated[
    int | None,
    typer.Option(
        "--pause-after-dead",
        help="Pause the job after this many dead runs in a row (0: never; 1: at the first).",
    ),
]


Priority = Annotated[
    int | None,
    typer.Option(
        help="Among the tenant's waiting runs, 1 goes first and 5 last (0: the default, 3).",
        show_default=False,
    ),
]


RateLimitKey = Annotated[
    str | None,
    typer.Option(
        help="The key of the rate limit its runs are called under (`sundial flow set`); "
        "empty: the target's origin.",
        show_default=False,
    ),
]


ConcurrencyKey = Annotated[
    str | None,
    typer.Option(
        help="The key of the concurrency limit its runs count toward, e.g. customer=42 "
        "(`sundial flow set KEY --max-running N`); empty: none.",
        show_default=False,
    ),
]


RequestId = Annotated[
    str,
    typer.Option(
        help="Idempotency key: the same key again answers the first call's result "
        "(default: a fresh one per call, so retries within it never act twice)."
    ),
]


def schedule_from_options(
    schedule: job_pb2.Schedule,
    crons: list[str],
    everys: list[str],
    offset: str,
    at: str,
    *,
    from_end: bool = False,
) -> str:
    """Set the specs ``--cron``, ``--every`` and ``--at`` give: one sets the schedule's
    single spec, several make a ``specs`` list (their union); ``--from-end`` makes the one
    ``--every`` a fixed delay. Returns the update-mask path (``schedule.cron``,
    ``schedule.specs``...)."""
    count = len(crons) + len(everys) + bool(at)
    if not count:
        fail("give at least one of --cron, --every or --at")
    if offset and len(everys) != 1:
        fail("--offset goes with exactly one --every")
    if from_end and (len(everys) != 1 or count != 1):
        fail("--from-end goes with exactly one --every and no other spec")
    specs = [job_pb2.ScheduleSpec(cron=cron) for cron in crons]
    for every in everys:
        spec = job_pb2.ScheduleSpec()
        spec.interval.every.CopyFrom(parse_duration(every, "--every"))
        if offset:
            spec.interval.offset.CopyFrom(parse_duration(offset, "--offset"))
        spec.interval.from_end = from_end
        specs.append(spec)
    if at:
        specs.append(job_pb2.ScheduleSpec(once=parse_time(at, "--at")))
    if count > 1:
        schedule.specs.extend(specs)
        return "schedule.specs"
    which = specs[0].WhichOneof("kind")
    assert which is not None
    if which == "cron":
        schedule.cron = specs[0].cron
    else:
        getattr(schedule, which).CopyFrom(getattr(specs[0], which))
    return f"schedule.{which}"


def target_from_options(  # noqa: PLR0917 (one value per option)
    url: str,
    method: str,
    headers: list[str] | None,
    grpc_address: str,
    plaintext: bool,
    auth: job_pb2.TargetAuth | None = None,
) -> job_pb2.Target:
    if bool(url) == bool(grpc_address):
        fail("give exactly one of --url or --grpc")
    pairs = parse_pairs(headers or [], "--header")
    if url:
        return job_pb2.Target(
            http=job_pb2.HttpTarget(url=url, method=method, headers=pairs, auth=auth)
        )
    return job_pb2.Target(
        grpc=job_pb2.GrpcTarget(
            address=grpc_address, plaintext=plaintext, metadata=pairs, auth=auth
        )
    )


def auth_from_options(
    auth: job_pb2.TargetAuth,
    standard_webhooks: bool | None,
    identity_token: bool | None,
    audience: str | None,
    token_lifetime: str,
) -> bool:
    """Apply the target-auth options to ``auth`` (empty for a new target, the current
    one for an update); whether any was given."""
    wants_token = audience is not None or bool(token_lifetime)
    if identity_token is False and wants_token:
        fail("--audience and --token-lifetime go with an identity token, not --no-identity-token")
    if standard_webhooks is not None:
        auth.standard_webhooks = standard_webhooks
    if identity_token is False:
        auth.ClearField("identity_token")
    elif identity_token or wants_token:
        auth.identity_token.SetInParent()
        if audience is not None:
            auth.identity_token.audience = audience
        if token_lifetime:
            auth.identity_token.lifetime.CopyFrom(
                parse_duration(token_lifetime, "--token-lifetime")
            )
    return standard_webhooks is not None or identity_token is not None or wants_token


def policies_from_options(  # noqa: PLR0917 (one value per option)
    policies: job_pb2.Policies,
    overlap: str,
    misfire: str,
    max_attempts: int,
    timeout: str,
    pause_after_dead: int | None = None,
    *,
    lateness_threshold: str = "",
    priority: int | None = None,
    rate_limit_key: str | None = None,
    concurrency_key: str | None = None,
) -> list[str]:
    """Set the policies the options give; returns their update-mask paths."""
    paths = []
    if overlap:
        if overlap not in _OVERLAP:
            fail(f"--overlap: expected one of {', '.join(_OVERLAP)}")
        policies.overlap = _OVERLAP[overlap]  # type: ignore[assignment]
        paths.append("policies.overlap")
    if misfire:
        if misfire not in _MISFIRE:
            fail(f"--misfire: expected one of {', '.join(_MISFIRE)}")
        policies.misfire = _MISFIRE[misfire]  # type: ignore[assignment]
        paths.append("policies.misfire")
    if max_attempts:
        policies.retry.max_attempts = max_attempts
        paths.append("policies.retry.max_attempts")
    if timeout:
        policies.run_timeout.CopyFrom(parse_duration(timeout, "--timeout"))
        paths.append("policies.run_timeout")
    if lateness_threshold:
        policies.lateness_threshold.CopyFrom(
            parse_duration(lateness_threshold, "--lateness-threshold")
        )
        paths.append("policies.lateness_threshold")

    if pause_after_dead is not None:
        policies.failure.pause_after_consecutive_dead = pause_after_dead
        paths.append("policies.failure.pause_after_consecutive_dead")
    for name, value in (
        ("priority", priority),
        ("rate_limit_key", rate_limit_key),
        ("concurrency_key", concurrency_key),
    ):
        if value is not None:  # "" (a key back to its default) is a change too
            setattr(policies.flow, name, value)
            paths.append(f"policies.flow.{name}")
    return paths


def read_payload(payload: str, payload_file: Path | None) -> bytes:
    return payload_file.read_bytes() if payload_file else payload.encode()
