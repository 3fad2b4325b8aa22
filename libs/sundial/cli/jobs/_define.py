"""``sundial jobs create`` and ``update``."""

from __future__ import annotations

from typing import Annotated

import typer
from google.protobuf import field_mask_pb2

from sundial.cli._client import (
    Connection,
    TokenOption,
    connected,
    fail,
    jobs_client,
    parse_duration,
    parse_pairs,
    tenant_client,
)
from sundial.cli._output import Output, OutputOption
from sundial.cli.jobs._options import (
    At,
    Audience,
    Calendars,
    ConcurrencyKey,
    Cron,
    Every,
    FromEnd,
    GrpcAddress,
    Header,
    IdentityTokenFlag,
    Jitter,
    JobId,
    Labels,
    LatenessThreshold,
    MaxAttempts,
    Misfire,
    Offset,
    Overlap,
    PauseAfterDead,
    Payload,
    PayloadFile,
    Priority,
    RateLimitKey,
    RequestId,
    StandardWebhooks,
    Timeout,
    TokenLifetime,
    Url,
    Version,
    auth_from_options,
    policies_from_options,
    read_payload,
    schedule_from_options,
    target_from_options,
)
from sundial.cli.jobs._show import emit_job
from sundial.v1 import job_pb2
from sundial.v1 import job_service_pb2 as pb


@connected
def create(
    name: Annotated[str, typer.Argument(help="Job name, unique in the tenant.")],
    *,
    conn: Connection,
    token: TokenOption = "",
    cron: Cron = None,
    every: Every = None,
    offset: Offset = "",
    from_end: FromEnd = False,
    at: At = "",
    calendar: Calendars = None,
    tz: Annotated[str, typer.Option("--tz", help="IANA time zone of the schedule.")] = "UTC",
    url: Url = "",
    method: Annotated[str, typer.Option(help="HTTP method.")] = "POST",
    header: Header = None,
    grpc_address: GrpcAddress = "",
    plaintext: Annotated[bool, typer.Option(help="gRPC without TLS.")] = False,
    standard_webhooks: StandardWebhooks = None,
    identity_token: IdentityTokenFlag = None,
    audience: Audience = None,
    token_lifetime: TokenLifetime = "",
    payload: Payload = "",
    payload_file: PayloadFile = None,
    label: Labels = None,
    description: Annotated[str, typer.Option(help="Free text.")] = "",
    jitter: Jitter = "",
    max_runs: Annotated[int, typer.Option(help="Stop after this many runs (0: never).")] = 0,
    overlap: Overlap = "",
    misfire: Misfire = "",
    max_attempts: MaxAttempts = 0,
    timeout: Timeout = "",
    lateness_threshold: LatenessThreshold = "",
    pause_after_dead: PauseAfterDead = None,
    priority: Priority = None,
    rate_limit_key: RateLimitKey = None,
    concurrency_key: ConcurrencyKey = None,
    paused: Annotated[bool, typer.Option(help="Create the job paused.")] = False,
    request_id: RequestId = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """Create a job."""
    schedule = job_pb2.Schedule(time_zone=tz, max_runs=max_runs, calendars=calendar or [])
    schedule_from_options(schedule, cron or [], every or [], offset, at, from_end=from_end)
    if jitter:
        schedule.jitter.CopyFrom(parse_duration(jitter, "--jitter"))
    auth = job_pb2.TargetAuth()
    auth_from_options(auth, standard_webhooks, identity_token, audience, token_lifetime)
    policies = job_pb2.Policies()
    policies_from_options(
        policies,
        overlap,
        misfire,
        max_attempts,
        timeout,
        pause_after_dead,
        lateness_threshold=lateness_threshold,
        priority=priority,
        rate_limit_key=rate_limit_key,
        concurrency_key=concurrency_key,
    )
    job = job_pb2.Job(
        name=name,
        description=description,
        schedule=schedule,
        target=target_from_options(url, method, header, grpc_address, plaintext, auth),
        payload=read_payload(payload, payload_file),
        policies=policies,
        labels=parse_pairs(label or [], "--label"),
        paused=paused,
    )
    # Through sundial.client: a request id (yours, or a fresh one) on every create, so
    # the channel's retry of UNAVAILABLE cannot make two jobs.
    with tenant_client(conn, token) as client:
        created = client.create_job(job, request_id=request_id)
    emit_job(created, pb.CreateJobResponse(job=created), output)


@connected
def update(
    job_id: JobId,
    *,
    conn: Connection,
    token: TokenOption = "",
    name: Annotated[str, typer.Option(help="A new name.")] = "",
    description: Annotated[str | None, typer.Option(help="New free text.")] = None,
    cron: Cron = None,
    every: Every = None,
    offset: Offset = "",
    from_end: FromEnd = False,
    at: At = "",
    calendar: Calendars = None,
    no_calendars: Annotated[
        bool, typer.Option("--no-calendars", help="Stop filtering by any calendar.")
    ] = False,
    tz: Annotated[str, typer.Option("--tz", help="A new time zone.")] = "",
    url: Url = "",
    method: Annotated[str, typer.Option(help="HTTP method (with --url).")] = "POST",
    header: Header = None,
    grpc_address: GrpcAddress = "",
    plaintext: Annotated[bool, typer.Option(help="gRPC without TLS (with --grpc).")] = False,
    standard_webhooks: StandardWebhooks = None,
    identity_token: IdentityTokenFlag = None,
    audience: Audience = None,
    token_lifetime: TokenLifetime = "",
    payload: Payload = "",
    payload_file: PayloadFile = None,
    label: Annotated[
        list[str] | None,
        typer.Option("--label", help="Label KEY=VALUE; replaces all labels, repeatable."),
    ] = None,
    clear_labels: Annotated[bool, typer.Option(help="Remove every label.")] = False,
    jitter: Jitter = "",
    overlap: Overlap = "",
    misfire: Misfire = "",
    max_attempts: MaxAttempts = 0,
    timeout: Timeout = "",
    lateness_threshold: LatenessThreshold = "",
    pause_after_dead: PauseAfterDead = None,
    priority: Priority = None,
    rate_limit_key: RateLimitKey = None,
    concurrency_key: ConcurrencyKey = None,
    expected_version: Version = 0,
    output: OutputOption = Output.TABLE,
) -> None:
    """Change the fields the options name; everything else stays as it is."""
    job = job_pb2.Job(job_id=job_id)
    paths: list[str] = []
    if name:
        job.name = name
        paths.append("name")
    if description is not None:
        job.description = description
        paths.append("description")
    if cron or every or at:
        paths.append(
            schedule_from_options(
                job.schedule, cron or [], every or [], offset, at, from_end=from_end
            )
        )
    elif offset or from_end:
        fail("--offset and --from-end go with --every")
    if calendar and no_calendars:
        fail("give --calendar or --no-calendars, not both")
    if calendar or no_calendars:
        job.schedule.calendars.extend(calendar or [])
        paths.append("schedule.calendars")
    if tz:
        job.schedule.time_zone = tz
        paths.append("schedule.time_zone")
    if jitter:
        job.schedule.jitter.CopyFrom(parse_duration(jitter, "--jitter"))
        paths.append("schedule.jitter")
    auth = job_pb2.TargetAuth()
    if url or grpc_address:
        # The target is replaced as a whole: its auth is what the options say.
        auth_from_options(auth, standard_webhooks, identity_token, audience, token_lifetime)
        target = target_from_options(url, method, header, grpc_address, plaintext, auth)
        job.target.CopyFrom(target)
        paths.append("target")
    elif header:
        fail("--header goes with --url or --grpc (the target is replaced as a whole)")
    else:
        paths += _auth_update(
            job, conn, token, standard_webhooks, identity_token, audience, token_lifetime
        )
    if payload or payload_file:
        job.payload = read_payload(payload, payload_file)
        paths.append("payload")
    if label or clear_labels:
        job.labels.update(parse_pairs(label or [], "--label"))
        paths.append("labels")
    paths += policies_from_options(
        job.policies,
        overlap,
        misfire,
        max_attempts,
        timeout,
        pause_after_dead,
        lateness_threshold=lateness_threshold,
        priority=priority,
        rate_limit_key=rate_limit_key,
        concurrency_key=concurrency_key,
    )
    if not paths:
        fail("nothing to change: give at least one option (see --help)")
    request = pb.UpdateJobRequest(
        job=job,
        update_mask=field_mask_pb2.FieldMask(paths=paths),
        expected_version=expected_version,
    )
    with jobs_client(conn, token) as (stub, md):
        response = stub.UpdateJob(request, metadata=md)
    emit_job(response.job, response, output)


def _auth_update(  # noqa: PLR0917 (one value per option)
    job: job_pb2.Job,
    conn: Connection,
    token: str,
    standard_webhooks: bool | None,
    identity_token: bool | None,
    audience: str | None,
    token_lifetime: str,
) -> list[str]:
    """The auth options applied to the job's current target auth (read first: the
    mask names ``target.http.auth`` or ``target.grpc.auth``, whichever it has);
    returns the path, or none when no auth option was given."""
    auth = job_pb2.TargetAuth()
    if not auth_from_options(auth, standard_webhooks, identity_token, audience, token_lifetime):
        return []
    with tenant_client(conn, token) as client:
        current = client.get_job(job.job_id)
    kind = current.target.WhichOneof("kind")
    if kind is None:
        fail("the job has no target to authenticate calls to")
    auth.CopyFrom(getattr(current.target, kind).auth)
    auth_from_options(auth, standard_webhooks, identity_token, audience, token_lifetime)
    getattr(job.target, kind).auth.CopyFrom(auth)
    return [f"target.{kind}.auth"]
