"""``sundial jobs ...``: create, list, inspect and operate jobs over gRPC."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from sundial.cli._client import (
    Connection,
    TokenOption,
    connected,
    console,
    duration_text,
    enum_name,
    fail,
    jobs_client,
    parse_duration,
    parse_pairs,
    parse_time,
    print_json,
    when,
)
from sundial.v1 import job_pb2, run_pb2
from sundial.v1 import job_service_pb2 as pb

app = typer.Typer(name="jobs", help="Create, list, inspect and operate jobs.", no_args_is_help=True)

JobId = Annotated[str, typer.Argument(help="The job's id.", show_default=False)]
Json = Annotated[bool, typer.Option("--json", help="Print the raw response as JSON.")]
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


def schedule_text(schedule: job_pb2.Schedule) -> str:
    """``cron 0 9 * * * (Europe/Berlin)``, ``every 5s``, ``once 2026-...Z``."""
    which = schedule.WhichOneof("spec")
    if which == "cron":
        text = f"cron {schedule.cron}"
    elif which == "interval":
        text = f"every {duration_text(schedule.interval.every)}"
        if schedule.interval.offset.ToTimedelta():
            text += f" +{duration_text(schedule.interval.offset)}"
    elif which == "once":
        text = f"once {schedule.once.ToJsonString()}"
    else:
        return "-"
    if schedule.time_zone and schedule.time_zone != "UTC":
        text += f" ({schedule.time_zone})"
    return text


def target_text(target: job_pb2.Target) -> str:
    """``POST http://...`` or ``grpc host:port``."""
    if target.WhichOneof("kind") == "http":
        return f"{target.http.method} {target.http.url}"
    if target.WhichOneof("kind") == "grpc":
        return f"grpc {target.grpc.address}{' (plaintext)' if target.grpc.plaintext else ''}"
    return "-"


def print_job(job: job_pb2.Job) -> None:
    """A job as a two-column table."""
    table = Table(title=f"job {job.name}", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
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
            f"timeout {duration_text(policies.run_timeout)}",
        ),
        ("created", when(job.create_time)),
        ("updated", when(job.update_time)),
    ]
    if job.description:
        rows.insert(1, ("description", job.description))
    for key, value in rows:
        table.add_row(key, value)
    console.print(table)


def print_runs(runs: list[run_pb2.Run], title: str) -> None:
    """Runs as a table, newest first."""
    table = Table(title=title, title_justify="left")
    for column in ("scheduled at", "kind", "status", "attempt", "lateness", "last error"):
        table.add_column(column)
    for run in runs:
        table.add_row(
            run.scheduled_at.ToJsonString(),
            enum_name(run.kind, run_pb2.RunKind, "RUN_KIND_"),
            enum_name(run.status, run_pb2.RunStatus, "RUN_STATUS_"),
            str(run.attempt),
            f"{run.lateness.ToTimedelta().total_seconds():.3f}s"
            if run.HasField("lateness")
            else "-",
            (run.last_error[:60] + "...") if len(run.last_error) > 60 else run.last_error or "-",
        )
    console.print(table)


def print_fire_times(fire_times: list[pb.FireTime], title: str) -> None:
    """Fire times with their DST notes."""
    table = Table(title=title, title_justify="left")
    for column in ("at (UTC)", "local time", "note"):
        table.add_column(column)
    for fire in fire_times:
        at = fire.at.ToJsonString() if fire.HasField("at") else "-"
        note = fire.note or ""
        if fire.dropped:
            at = f"[dim]{at}[/]"
            note = f"[dim](no run) {note}[/]"
        table.add_row(at, fire.local_time, note)
    console.print(table)


@app.command()
@connected
def create(
    name: Annotated[str, typer.Argument(help="Job name, unique in the tenant.")],
    *,
    conn: Connection,
    token: TokenOption = "",
    cron: Annotated[str, typer.Option(help="Cron expression (5 or 6 fields, macros, H).")] = "",
    every: Annotated[str, typer.Option(help="Interval, e.g. 5s, 15m, 1h.")] = "",
    offset: Annotated[str, typer.Option(help="Interval phase, e.g. 30s.")] = "",
    at: Annotated[str, typer.Option(help="Run once at this ISO 8601 instant.")] = "",
    tz: Annotated[str, typer.Option("--tz", help="IANA time zone of the schedule.")] = "UTC",
    url: Annotated[str, typer.Option(help="HTTP(S) target URL.")] = "",
    method: Annotated[str, typer.Option(help="HTTP method.")] = "POST",
    header: Annotated[list[str] | None, typer.Option(help="HTTP header KEY=VALUE.")] = None,
    grpc_address: Annotated[
        str, typer.Option("--grpc", help="gRPC target host:port (TargetService).")
    ] = "",
    plaintext: Annotated[bool, typer.Option(help="gRPC without TLS.")] = False,
    payload: Annotated[str, typer.Option(help="Body sent on every run (text).")] = "",
    payload_file: Annotated[Path | None, typer.Option(help="Body read from a file.")] = None,
    label: Annotated[list[str] | None, typer.Option(help="Label KEY=VALUE.")] = None,
    description: Annotated[str, typer.Option(help="Free text.")] = "",
    jitter: Annotated[str, typer.Option(help="Random delay bound, e.g. 30s.")] = "",
    max_runs: Annotated[int, typer.Option(help="Stop after this many runs (0: never).")] = 0,
    overlap: Annotated[str, typer.Option(help=f"One of {', '.join(_OVERLAP)}.")] = "",
    misfire: Annotated[str, typer.Option(help=f"One of {', '.join(_MISFIRE)}.")] = "",
    max_attempts: Annotated[int, typer.Option(help="Attempts per run (0: default 5).")] = 0,
    timeout: Annotated[str, typer.Option(help="Per-attempt timeout, e.g. 5m.")] = "",
    paused: Annotated[bool, typer.Option(help="Create the job paused.")] = False,
    request_id: Annotated[str, typer.Option(help="Idempotency key for retries.")] = "",
    json: Json = False,
) -> None:
    """Create a job."""
    specs = [bool(cron), bool(every), bool(at)]
    if sum(specs) != 1:
        fail("give exactly one of --cron, --every or --at")
    schedule = job_pb2.Schedule(time_zone=tz, max_runs=max_runs)
    if cron:
        schedule.cron = cron
    elif every:
        schedule.interval.every.CopyFrom(parse_duration(every, "--every"))
        if offset:
            schedule.interval.offset.CopyFrom(parse_duration(offset, "--offset"))
    else:
        schedule.once.CopyFrom(parse_time(at, "--at"))
    if jitter:
        schedule.jitter.CopyFrom(parse_duration(jitter, "--jitter"))
    if bool(url) == bool(grpc_address):
        fail("give exactly one of --url or --grpc")
    if url:
        target = job_pb2.Target(
            http=job_pb2.HttpTarget(
                url=url, method=method, headers=parse_pairs(header or [], "--header")
            )
        )
    else:
        target = job_pb2.Target(
            grpc=job_pb2.GrpcTarget(
                address=grpc_address,
                plaintext=plaintext,
                metadata=parse_pairs(header or [], "--header"),
            )
        )
    policies = job_pb2.Policies()
    if overlap:
        if overlap not in _OVERLAP:
            fail(f"--overlap: expected one of {', '.join(_OVERLAP)}")
        policies.overlap = _OVERLAP[overlap]  # type: ignore[assignment]
    if misfire:
        if misfire not in _MISFIRE:
            fail(f"--misfire: expected one of {', '.join(_MISFIRE)}")
        policies.misfire = _MISFIRE[misfire]  # type: ignore[assignment]
    if max_attempts:
        policies.retry.max_attempts = max_attempts
    if timeout:
        policies.run_timeout.CopyFrom(parse_duration(timeout, "--timeout"))
    body = payload_file.read_bytes() if payload_file else payload.encode()
    job = job_pb2.Job(
        name=name,
        description=description,
        schedule=schedule,
        target=target,
        payload=body,
        policies=policies,
        labels=parse_pairs(label or [], "--label"),
        paused=paused,
    )
    with jobs_client(conn, token) as (stub, md):
        response = stub.CreateJob(pb.CreateJobRequest(job=job, request_id=request_id), metadata=md)
    if json:
        print_json(response)
        return
    print_job(response.job)


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
    limit: Annotated[int, typer.Option(help="Show at most this many (0: all).")] = 100,
    page_token: Annotated[str, typer.Option(help="Continue from a previous listing.")] = "",
) -> None:
    """List jobs by name."""
    request = pb.ListJobsRequest(
        labels=parse_pairs(label or [], "--label"), name_prefix=prefix, page_token=page_token
    )
    if paused is not None:
        request.paused = paused
    table = Table(title="jobs", title_justify="left")
    for column in ("name", "job id", "schedule", "next run", "paused", "version"):
        table.add_column(column)
    shown = 0
    with jobs_client(conn, token) as (stub, md):
        while True:
            request.page_size = min(1000, limit - shown) if limit else 1000
            page = stub.ListJobs(request, metadata=md)
            for job in page.jobs:
                table.add_row(
                    job.name,
                    job.job_id,
                    schedule_text(job.schedule),
                    when(job.next_run_at, set_=job.HasField("next_run_at")),
                    "yes" if job.paused else "no",
                    str(job.version),
                )
            shown += len(page.jobs)
            request.page_token = page.next_page_token
            if not page.next_page_token or (limit and shown >= limit):
                break
    console.print(table)
    if request.page_token:
        console.print(f"more jobs: --page-token {request.page_token}", highlight=False)


@app.command()
@connected
def get(job_id: JobId, *, conn: Connection, token: TokenOption = "", json: Json = False) -> None:
    """Show a job."""
    with jobs_client(conn, token) as (stub, md):
        response = stub.GetJob(pb.GetJobRequest(job_id=job_id), metadata=md)
    if json:
        print_json(response)
        return
    print_job(response.job)


@app.command()
@connected
def describe(
    job_id: JobId, *, conn: Connection, token: TokenOption = "", json: Json = False
) -> None:
    """Show a job, its latest runs, its next fire times and its stats."""
    with jobs_client(conn, token) as (stub, md):
        response = stub.DescribeJob(pb.DescribeJobRequest(job_id=job_id), metadata=md)
    if json:
        print_json(response)
        return
    print_job(response.job)
    stats = response.job.stats
    console.print(
        f"runs: {stats.total_runs} finished ({stats.succeeded} succeeded, {stats.failed} dead, "
        f"{stats.cancelled} cancelled, {stats.skipped_overlaps} skipped), "
        f"{response.active_runs} active; {stats.skipped_misfires} misfires skipped",
        highlight=False,
    )
    print_runs(list(response.recent_runs), "recent runs")
    print_fire_times(list(response.upcoming), "next fire times")


@app.command()
@connected
def pause(
    job_id: JobId,
    *,
    conn: Connection,
    token: TokenOption = "",
    note: Note = "",
    expected_version: Version = 0,
) -> None:
    """Pause a job: no scheduled runs until it is resumed."""
    with jobs_client(conn, token) as (stub, md):
        response = stub.PauseJob(
            pb.PauseJobRequest(job_id=job_id, note=note, expected_version=expected_version),
            metadata=md,
        )
    console.print(f"paused {response.job.name} (version {response.job.version})")


@app.command()
@connected
def resume(
    job_id: JobId,
    *,
    conn: Connection,
    token: TokenOption = "",
    note: Note = "",
    expected_version: Version = 0,
) -> None:
    """Resume a job from now (missed occurrences are not run)."""
    with jobs_client(conn, token) as (stub, md):
        response = stub.ResumeJob(
            pb.ResumeJobRequest(job_id=job_id, note=note, expected_version=expected_version),
            metadata=md,
        )
    job = response.job
    console.print(
        f"resumed {job.name} (version {job.version}); next run "
        f"{when(job.next_run_at, set_=job.HasField('next_run_at'))}",
        highlight=False,
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
) -> None:
    """Delete a job; its unfinished runs are cancelled."""
    with jobs_client(conn, token) as (stub, md):
        stub.DeleteJob(
            pb.DeleteJobRequest(
                job_id=job_id, expected_version=expected_version, allow_missing=allow_missing
            ),
            metadata=md,
        )
    console.print(f"deleted {job_id}")


@app.command()
@connected
def trigger(
    job_id: JobId,
    *,
    conn: Connection,
    token: TokenOption = "",
    request_id: Annotated[str, typer.Option(help="Idempotency key for retries.")] = "",
    json: Json = False,
) -> None:
    """Run a job now (a MANUAL run keyed by this instant)."""
    with jobs_client(conn, token) as (stub, md):
        response = stub.TriggerJob(
            pb.TriggerJobRequest(job_id=job_id, request_id=request_id), metadata=md
        )
    if json:
        print_json(response)
        return
    run = response.run
    console.print(
        f"triggered run {run.run_key} ({enum_name(run.status, run_pb2.RunStatus, 'RUN_STATUS_')})",
        highlight=False,
    )
