"""``sundial jobs ...``: create, list, inspect and operate jobs over gRPC."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer
from google.protobuf import field_mask_pb2
from google.protobuf.message import Message

from sundial.cli._client import (
    Connection,
    TokenOption,
    all_pages,
    connected,
    console,
    duration_text,
    enum_name,
    fail,
    jobs_client,
    parse_duration,
    parse_instant,
    parse_pairs,
    parse_time,
    tenant_client,
    when,
)
from sundial.cli._output import Column, Output, OutputOption, emit, print_fields, print_table
from sundial.v1 import job_pb2, run_pb2
from sundial.v1 import job_service_pb2 as pb

app = typer.Typer(name="jobs", help="Create, list, inspect and operate jobs.", no_args_is_help=True)

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


def _spec_text(spec: job_pb2.Schedule | job_pb2.ScheduleSpec, which: str | None) -> str:
    if which == "cron":
        return f"cron {spec.cron}"
    if which == "interval":
        text = f"every {duration_text(spec.interval.every)}"
        if spec.interval.offset.ToTimedelta():
            text += f" +{duration_text(spec.interval.offset)}"
        return text
    if which == "once":
        return f"once {spec.once.ToJsonString()}"
    return "-"


def schedule_text(schedule: job_pb2.Schedule) -> str:
    """``cron 0 9 * * * (Europe/Berlin)``, ``every 5s``, ``once 2026-...Z``; a list of
    specs joined by ``; ``, then ``excluding calendars ...``."""
    if schedule.specs:
        text = "; ".join(_spec_text(s, s.WhichOneof("kind")) for s in schedule.specs)
    else:
        text = _spec_text(schedule, schedule.WhichOneof("spec"))
        if text == "-":
            return text
    if schedule.time_zone and schedule.time_zone != "UTC":
        text += f" ({schedule.time_zone})"
    if schedule.calendars:
        text += f" [calendars {', '.join(schedule.calendars)}]"
    return text


def target_text(target: job_pb2.Target) -> str:
    """``POST http://...`` or ``grpc host:port``."""
    if target.WhichOneof("kind") == "http":
        return f"{target.http.method} {target.http.url}"
    if target.WhichOneof("kind") == "grpc":
        return f"grpc {target.grpc.address}{' (plaintext)' if target.grpc.plaintext else ''}"
    return "-"


def failure_text(failure: job_pb2.FailurePolicy) -> str:
    """What the failure policy does, in words."""
    count = failure.pause_after_consecutive_dead
    if count <= 0:
        return "never pause"
    if count == 1:
        return "pause at the first dead run"
    return f"pause after {count} consecutive dead runs"


def print_job(job: job_pb2.Job) -> None:
    """A job as ``key  value`` lines."""
    policies = job.policies
    rows = [
        ("job id", job.job_id if job.job_id == job.uid else f"{job.job_id} (uid {job.uid})"),
        ("tenant", job.tenant_id),
        ("schedule", schedule_text(job.schedule)),
        ("target", target_text(job.target)),
        ("next run", when(job.next_run_at, set_=job.HasField("next_run_at"))),
        ("paused", f"yes ({job.pause_note})" if job.paused else "no"),
        ("version", str(job.version)),
        ("labels", ", ".join(f"{k}={v}" for k, v in sorted(job.labels.items())) or "-"),
        ("payload", f"{len(job.payload)} bytes"),
        (
            "policies",
            f"misfire {enum_name(policies.misfire, job_pb2.MisfirePolicy, 'MISFIRE_POLICY_')}, "
            f"overlap {enum_name(policies.overlap, job_pb2.OverlapPolicy, 'OVERLAP_POLICY_')}, "
            f"{policies.retry.max_attempts} attempts, "
            f"timeout {duration_text(policies.run_timeout)}, "
            f"late after {duration_text(policies.lateness_threshold)}",
        ),
        ("failure policy", failure_text(policies.failure)),
        ("created", when(job.create_time)),
        ("updated", when(job.update_time)),
    ]
    if job.description:
        rows.insert(1, ("description", job.description))
    print_fields(f"job {job.name}", rows)


_RUN_COLUMNS = (
    Column("run key"),
    Column("kind", 3),
    Column("status"),
    Column("attempt", 2),
    Column("lateness", 1),
    Column("last error", 4),
)


def _error_text(text: str, wide: bool) -> str:
    text = " ".join(text.split())  # one line
    if wide or len(text) <= 60:
        return text or "-"
    return text[:57] + "..."


def print_runs(runs: Sequence[run_pb2.Run], title: str = "", *, wide: bool = False) -> None:
    """Runs as a table, newest first: the run key (job id and scheduled time) whole."""
    print_table(
        _RUN_COLUMNS,
        [
            (
                run.run_key,
                enum_name(run.kind, run_pb2.RunKind, "RUN_KIND_"),
                enum_name(run.status, run_pb2.RunStatus, "RUN_STATUS_"),
                str(run.attempt),
                f"{run.lateness.ToTimedelta().total_seconds():.3f}s"
                if run.HasField("lateness")
                else "-",
                _error_text(run.last_error, wide),
            )
            for run in runs
        ],
        wide=wide,
        title=title,
    )


def print_fire_times(fire_times: Sequence[pb.FireTime], title: str = "") -> None:
    """Fire times with their DST and calendar notes (a time DST or a calendar dropped:
    "(no run)"), and which spec produced each when the schedule has several."""
    several = any(fire.spec_index for fire in fire_times)
    columns = [Column("at (UTC)"), Column("local time"), Column("note", 1)]
    if several:
        columns.insert(2, Column("spec", 2))
    rows = []
    for fire in fire_times:
        row = [
            fire.at.ToJsonString() if fire.HasField("at") else "-",
            fire.local_time,
            " ".join(filter(None, ["(no run)" if fire.dropped else "", fire.note])) or "",
        ]
        if several:
            row.insert(2, str(fire.spec_index))
        rows.append(row)
    print_table(columns, rows, title=title)


def emit_preview(response: pb.PreviewScheduleResponse, title: str, output: Output) -> None:
    """A PreviewSchedule answer as ``-o`` asks (``name``: the times that run)."""

    def table(_wide: bool) -> None:
        print_fire_times(response.fire_times, title)
        if response.exhausted:
            typer.echo("the schedule ends here (no later fire time)")

    emit(
        response,
        output,
        table=table,
        names=lambda: [f.at.ToJsonString() for f in response.fire_times if not f.dropped],
    )


def emit_job(job: job_pb2.Job, response: Message, output: Output) -> None:
    """One job's response as ``-o`` asks (the job's fields for table and wide)."""
    emit(response, output, table=lambda _wide: print_job(job), names=lambda: [job.job_id])


Cron = Annotated[
    list[str] | None,
    typer.Option(help="Cron expression (5 or 6 fields, macros, H); repeatable (a union)."),
]
Every = Annotated[
    list[str] | None, typer.Option(help="Interval, e.g. 5s, 15m, 1h; repeatable (a union).")
]
Offset = Annotated[str, typer.Option(help="Interval phase, e.g. 30s (with one --every).")]
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
RequestId = Annotated[
    str,
    typer.Option(
        help="Idempotency key: the same key again answers the first call's result "
        "(default: a fresh one per call, so retries within it never act twice)."
    ),
]


def _schedule_spec(
    schedule: job_pb2.Schedule, crons: list[str], everys: list[str], offset: str, at: str
) -> str:
    """Set the specs ``--cron``, ``--every`` and ``--at`` give: one sets the schedule's
    single spec, several make a ``specs`` list (their union). Returns the update-mask
    path (``schedule.cron``, ``schedule.specs``...)."""
    count = len(crons) + len(everys) + bool(at)
    if not count:
        fail("give at least one of --cron, --every or --at")
    if offset and len(everys) != 1:
        fail("--offset goes with exactly one --every")
    specs = [job_pb2.ScheduleSpec(cron=cron) for cron in crons]
    for every in everys:
        spec = job_pb2.ScheduleSpec()
        spec.interval.every.CopyFrom(parse_duration(every, "--every"))
        if offset:
            spec.interval.offset.CopyFrom(parse_duration(offset, "--offset"))
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


def target_from_options(
    url: str, method: str, headers: list[str] | None, grpc_address: str, plaintext: bool
) -> job_pb2.Target:
    if bool(url) == bool(grpc_address):
        fail("give exactly one of --url or --grpc")
    pairs = parse_pairs(headers or [], "--header")
    if url:
        return job_pb2.Target(http=job_pb2.HttpTarget(url=url, method=method, headers=pairs))
    return job_pb2.Target(
        grpc=job_pb2.GrpcTarget(address=grpc_address, plaintext=plaintext, metadata=pairs)
    )


def _policies(  # noqa: PLR0917 (one value per option)
    policies: job_pb2.Policies,
    overlap: str,
    misfire: str,
    max_attempts: int,
    timeout: str,
    pause_after_dead: int | None = None,
    *,
    lateness_threshold: str = "",
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
    return paths


def _payload(payload: str, payload_file: Path | None) -> bytes:
    return payload_file.read_bytes() if payload_file else payload.encode()


@app.command()
@connected
def create(
    name: Annotated[str, typer.Argument(help="Job name, unique in the tenant.")],
    *,
    conn: Connection,
    token: TokenOption = "",
    cron: Cron = None,
    every: Every = None,
    offset: Offset = "",
    at: At = "",
    calendar: Calendars = None,
    tz: Annotated[str, typer.Option("--tz", help="IANA time zone of the schedule.")] = "UTC",
    url: Url = "",
    method: Annotated[str, typer.Option(help="HTTP method.")] = "POST",
    header: Header = None,
    grpc_address: GrpcAddress = "",
    plaintext: Annotated[bool, typer.Option(help="gRPC without TLS.")] = False,
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
    paused: Annotated[bool, typer.Option(help="Create the job paused.")] = False,
    request_id: RequestId = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """Create a job."""
    schedule = job_pb2.Schedule(time_zone=tz, max_runs=max_runs, calendars=calendar or [])
    _schedule_spec(schedule, cron or [], every or [], offset, at)
    if jitter:
        schedule.jitter.CopyFrom(parse_duration(jitter, "--jitter"))
    policies = job_pb2.Policies()
    _policies(
        policies,
        overlap,
        misfire,
        max_attempts,
        timeout,
        pause_after_dead,
        lateness_threshold=lateness_threshold,
    )
    job = job_pb2.Job(
        name=name,
        description=description,
        schedule=schedule,
        target=target_from_options(url, method, header, grpc_address, plaintext),
        payload=_payload(payload, payload_file),
        policies=policies,
        labels=parse_pairs(label or [], "--label"),
        paused=paused,
    )
    # Through sundial.client: a request id (yours, or a fresh one) on every create, so
    # the channel's retry of UNAVAILABLE cannot make two jobs.
    with tenant_client(conn, token) as client:
        created = client.create_job(job, request_id=request_id)
    emit_job(created, pb.CreateJobResponse(job=created), output)


@app.command()
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
        paths.append(_schedule_spec(job.schedule, cron or [], every or [], offset, at))
    elif offset:
        fail("--offset goes with --every")
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
    if url or grpc_address:
        job.target.CopyFrom(target_from_options(url, method, header, grpc_address, plaintext))
        paths.append("target")
    elif header:
        fail("--header goes with --url or --grpc (the target is replaced as a whole)")
    if payload or payload_file:
        job.payload = _payload(payload, payload_file)
        paths.append("payload")
    if label or clear_labels:
        job.labels.update(parse_pairs(label or [], "--label"))
        paths.append("labels")
    paths += _policies(
        job.policies,
        overlap,
        misfire,
        max_attempts,
        timeout,
        pause_after_dead,
        lateness_threshold=lateness_threshold,
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


_JOB_COLUMNS = (
    Column("name", 1),
    Column("job id"),
    Column("schedule", 2),
    Column("next run"),
    Column("paused", 3),
    Column("version", 4),
    Column("labels", 5, wide=True),
    Column("target", 5, wide=True),
)


@app.command("list")
@connected
def list_jobs(
    *,
    conn: Connection,
    token: TokenOption = "",
    label: Annotated[list[str] | None, typer.Option(help="Only jobs with label KEY=VALUE.")] = None,
    prefix: Annotated[str, typer.Option(help="Only names starting with this.")] = "",
    paused: Annotated[
        bool | None, typer.Option("--paused/--active", help="Only paused / only active jobs.")
    ] = None,
    forbidden: Annotated[
        bool,
        typer.Option("--forbidden", help="Only jobs whose target your egress policy forbids now."),
    ] = False,
    limit: Annotated[int, typer.Option(help="Show at most this many (0: all).")] = 100,
    page_token: Annotated[str, typer.Option(help="Continue from a previous listing.")] = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """List jobs by name."""
    request = pb.ListJobsRequest(
        labels=parse_pairs(label or [], "--label"),
        name_prefix=prefix,
        page_token=page_token,
        target_forbidden=forbidden,
    )
    if paused is not None:
        request.paused = paused
    with jobs_client(conn, token) as (stub, md):
        listed = all_pages(
            lambda r: stub.ListJobs(r, metadata=md), request, pb.ListJobsResponse(), "jobs", limit
        )

    def table(wide: bool) -> None:
        print_table(
            _JOB_COLUMNS,
            [
                (
                    job.name,
                    job.job_id,
                    schedule_text(job.schedule),
                    when(job.next_run_at, set_=job.HasField("next_run_at"), relative=False),
                    "yes" if job.paused else "no",
                    str(job.version),
                    ",".join(f"{k}={v}" for k, v in sorted(job.labels.items())) or "-",
                    target_text(job.target),
                )
                for job in listed.jobs
            ],
            wide=wide,
        )
        if listed.next_page_token:
            console.print(f"more jobs: --page-token {listed.next_page_token}", highlight=False)

    emit(listed, output, table=table, names=lambda: [job.job_id for job in listed.jobs])


@app.command()
@connected
def get(
    job_id: JobId, *, conn: Connection, token: TokenOption = "", output: OutputOption = Output.TABLE
) -> None:
    """Show a job."""
    with jobs_client(conn, token) as (stub, md):
        response = stub.GetJob(pb.GetJobRequest(job_id=job_id), metadata=md)
    emit_job(response.job, response, output)


def print_slo(slos: Sequence[pb.JobSlo], title: str = "SLO (scheduled runs)") -> None:
    """A job's SLO, one window a row: the occurrences due and how each went."""
    print_table(
        (
            Column("window"),
            Column("due"),
            Column("on time"),
            Column("late"),
            Column("missed", 1),
            Column("skipped", 2),
            Column("failed", 1),
            Column("on time %", 3),
        ),
        [
            (
                duration_text(s.window),
                str(s.due),
                str(s.on_time),
                str(s.late),
                str(s.missed),
                str(s.skipped),
                str(s.failed),
                f"{100 * s.on_time / s.due:.1f}" if s.due else "-",
            )
            for s in slos
        ],
        title=title + (f", late after {duration_text(slos[0].lateness_threshold)}" if slos else ""),
    )


Windows = Annotated[
    list[str] | None,
    typer.Option("--window", help="SLO window, e.g. 1h, 7d (repeatable, up to 4)."),
]


def _describe(
    conn: Connection, token: str, job_id: str, window: list[str] | None
) -> pb.DescribeJobResponse:
    request = pb.DescribeJobRequest(
        job_id=job_id, slo_windows=[parse_duration(w, "--window") for w in window or []]
    )
    with jobs_client(conn, token) as (stub, md):
        response: pb.DescribeJobResponse = stub.DescribeJob(request, metadata=md)
    return response


@app.command()
@connected
def slo(
    job_id: JobId,
    *,
    conn: Connection,
    token: TokenOption = "",
    window: Windows = None,
    output: OutputOption = Output.TABLE,
) -> None:
    """Did the job's schedule run on time: occurrences due, on time, late, missed by the
    misfire policy, skipped by the overlap policy and failed, per window (default 1h, 24h,
    7d)."""
    response = _describe(conn, token, job_id, window)
    slos = list(response.slo)
    emit(
        pb.DescribeJobResponse(slo=slos),
        output,
        table=lambda _wide: print_slo(slos),
        names=lambda: [response.job.job_id],
    )


@app.command()
@connected
def describe(
    job_id: JobId,
    *,
    conn: Connection,
    token: TokenOption = "",
    window: Windows = None,
    output: OutputOption = Output.TABLE,
) -> None:
    """Show a job, its latest runs, its next fire times, its stats and its SLO."""
    response = _describe(conn, token, job_id, window)

    def table(wide: bool) -> None:
        print_job(response.job)
        stats = response.job.stats
        typer.echo(
            f"runs: {stats.total_runs} finished ({stats.succeeded} succeeded, {stats.failed} "
            f"dead, {stats.cancelled} cancelled, {stats.skipped_overlaps} skipped), "
            f"{response.active_runs} active; {stats.skipped_misfires} misfires skipped"
        )
        print_slo(response.slo)
        print_runs(response.recent_runs, "recent runs", wide=wide)
        print_fire_times(response.upcoming, "next fire times")

    emit(response, output, table=table, names=lambda: [response.job.job_id])


@app.command("preview")
@connected
def preview_job(
    job_id: JobId,
    *,
    count: Annotated[int, typer.Option(help="How many fire times (1-1000).")] = 10,
    after: Annotated[str, typer.Option(help="Start after this ISO 8601 instant.")] = "",
    conn: Connection,
    token: TokenOption = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """A job's next fire times from the API: which spec produced each, and what DST rules
    and the job's calendars removed (and which calendar)."""
    with jobs_client(conn, token) as (stub, md):
        job = stub.GetJob(pb.GetJobRequest(job_id=job_id), metadata=md).job
        request = pb.PreviewScheduleRequest(schedule=job.schedule, count=count, job_id=job.uid)
        if after:
            request.after.CopyFrom(parse_time(after, "--after"))
        response = stub.PreviewSchedule(request, metadata=md)

    emit_preview(response, f"{job.name}: {schedule_text(job.schedule)}", output)


@app.command()
@connected
def pause(
    job_id: JobId,
    *,
    conn: Connection,
    token: TokenOption = "",
    note: Note = "",
    expected_version: Version = 0,
    output: OutputOption = Output.TABLE,
) -> None:
    """Pause a job: no scheduled runs until it is resumed."""
    with jobs_client(conn, token) as (stub, md):
        response = stub.PauseJob(
            pb.PauseJobRequest(job_id=job_id, note=note, expected_version=expected_version),
            metadata=md,
        )
    job = response.job
    emit(
        response,
        output,
        table=lambda _wide: typer.echo(f"paused {job.name} (version {job.version})"),
        names=lambda: [job.job_id],
    )


@app.command()
@connected
def resume(
    job_id: JobId,
    *,
    conn: Connection,
    token: TokenOption = "",
    note: Note = "",
    expected_version: Version = 0,
    output: OutputOption = Output.TABLE,
) -> None:
    """Resume a job from now (missed occurrences are not run)."""
    with jobs_client(conn, token) as (stub, md):
        response = stub.ResumeJob(
            pb.ResumeJobRequest(job_id=job_id, note=note, expected_version=expected_version),
            metadata=md,
        )
    job = response.job
    emit(
        response,
        output,
        table=lambda _wide: typer.echo(
            f"resumed {job.name} (version {job.version}); next run "
            f"{when(job.next_run_at, set_=job.HasField('next_run_at'))}"
        ),
        names=lambda: [job.job_id],
    )


@app.command()
@connected
def delete(
    job_id: JobId,
    *,
    conn: Connection,
    token: TokenOption = "",
    expected_version: Version = 0,
    allow_missing: Annotated[bool, typer.Option(help="Succeed if the job is gone.")] = False,
    output: OutputOption = Output.TABLE,
) -> None:
    """Delete a job; its unfinished runs are cancelled."""
    with jobs_client(conn, token) as (stub, md):
        response = stub.DeleteJob(
            pb.DeleteJobRequest(
                job_id=job_id, expected_version=expected_version, allow_missing=allow_missing
            ),
            metadata=md,
        )
    emit(
        response,
        output,
        table=lambda _wide: typer.echo(f"deleted {job_id}"),
        names=lambda: [job_id],
    )


@app.command()
@connected
def trigger(
    job_id: JobId,
    *,
    conn: Connection,
    token: TokenOption = "",
    request_id: RequestId = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """Run a job now (a MANUAL run keyed by this instant)."""
    with tenant_client(conn, token) as client:  # a request id on every trigger, as create
        run = client.trigger_job(job_id, request_id=request_id)
    response = pb.TriggerJobResponse(run=run)
    emit(
        response,
        output,
        table=lambda _wide: typer.echo(
            f"triggered run {run.run_key} "
            f"({enum_name(run.status, run_pb2.RunStatus, 'RUN_STATUS_')})"
        ),
        names=lambda: [run.run_key],
    )


@app.command()
@connected
def backfill(
    job_id: JobId,
    *,
    start: Annotated[
        str, typer.Option(help="From this ISO 8601 instant (inclusive).", show_default=False)
    ],
    end: Annotated[
        str, typer.Option(help="To this instant (exclusive, not after now).", show_default=False)
    ],
    conn: Connection,
    token: TokenOption = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """Create runs for the schedule's occurrences in a past range (all of them: one call
    per 1,000), skipping occurrences that already have a run."""
    first, last = parse_instant(start, "--start"), parse_instant(end, "--end")
    with tenant_client(conn, token) as client:
        created = client.backfill(job_id, first, last)

    def table(wide: bool) -> None:
        print_runs(created.runs, wide=wide)
        typer.echo(
            f"created {len(created.runs)} runs; {created.existing_count} occurrences had one"
        )

    emit(created, output, table=table, names=lambda: [run.run_key for run in created.runs])


@app.command()
@connected
def history(
    job_id: JobId,
    *,
    limit: Annotated[int, typer.Option(help="Show at most this many (0: all).", min=0)] = 50,
    conn: Connection,
    token: TokenOption = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """A job's revisions, newest first: what each change changed, who and when."""
    request = pb.ListJobRevisionsRequest(job_id=job_id)
    with jobs_client(conn, token) as (stub, md):
        listed = all_pages(
            lambda r: stub.ListJobRevisions(r, metadata=md),
            request,
            pb.ListJobRevisionsResponse(),
            "revisions",
            limit,
        )

    def table(wide: bool) -> None:
        print_table(
            (
                Column("version"),
                Column("at"),
                Column("changed"),
                Column("by", 1),
                Column("schedule", 2),
                Column("request id", 3, wide=True),
            ),
            [
                (
                    str(r.version),
                    r.create_time.ToJsonString(),
                    ",".join(r.changed_fields) or "-",
                    r.changed_by or "-",
                    schedule_text(r.job.schedule),
                    r.request_id or "-",
                )
                for r in listed.revisions
            ],
            wide=wide,
        )

    emit(listed, output, table=table, names=lambda: [str(r.version) for r in listed.revisions])


@app.command()
@connected
def rollback(
    job_id: JobId,
    *,
    to_version: Annotated[
        int, typer.Option(help="The revision whose definition to restore.", min=1)
    ],
    expected_version: Version = 0,
    conn: Connection,
    token: TokenOption = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """Restore the definition a revision had (a new revision; paused state unchanged)."""
    request = pb.RollbackJobRequest(
        job_id=job_id, version=to_version, expected_version=expected_version
    )
    with jobs_client(conn, token) as (stub, md):
        response = stub.RollbackJob(request, metadata=md)
    emit_job(response.job, response, output)


@connected
def audit(
    *,
    limit: Annotated[int, typer.Option(help="Show at most this many (0: all).", min=0)] = 50,
    conn: Connection,
    token: TokenOption = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """Your tenant's audit log, newest first: every write call, who, on what, how it ended."""
    with jobs_client(conn, token) as (stub, md):
        listed = all_pages(
            lambda r: stub.ListAuditEvents(r, metadata=md),
            pb.ListAuditEventsRequest(),
            pb.ListAuditEventsResponse(),
            "events",
            limit,
        )

    def table(wide: bool) -> None:
        print_table(
            (
                Column("at"),
                Column("method"),
                Column("resource"),
                Column("code", 1),
                Column("by", 2),
                Column("request id", 3, wide=True),
            ),
            [
                (
                    e.time.ToJsonString(),
                    e.method.rsplit("/", 1)[-1],
                    e.resource or "-",
                    e.code,
                    e.actor,
                    e.request_id,
                )
                for e in listed.events
            ],
            wide=wide,
        )

    emit(listed, output, table=table, names=lambda: [e.request_id for e in listed.events])
