"""``sundial jobs list``, ``get``, ``slo``, ``describe`` and ``preview``."""

from __future__ import annotations

from typing import Annotated

import typer

from sundial.cli._client import (
    Connection,
    TokenOption,
    all_pages,
    connected,
    console,
    jobs_client,
    parse_duration,
    parse_pairs,
    parse_time,
    when,
)
from sundial.cli._output import Column, Output, OutputOption, emit, print_table
from sundial.cli.jobs._bulk import Search, Selector
from sundial.cli.jobs._options import JobId
from sundial.cli.jobs._show import (
    emit_job,
    emit_preview,
    print_fire_times,
    print_job,
    print_runs,
    print_slo,
    schedule_text,
    target_text,
)
from sundial.v1 import job_service_pb2 as pb

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
    selector: Selector = "",
    search: Search = "",
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
        selector=selector,
        search=search,
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


@connected
def get(
    job_id: JobId, *, conn: Connection, token: TokenOption = "", output: OutputOption = Output.TABLE
) -> None:
    """Show a job."""
    with jobs_client(conn, token) as (stub, md):
        response = stub.GetJob(pb.GetJobRequest(job_id=job_id), metadata=md)
    emit_job(response.job, response, output)


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
