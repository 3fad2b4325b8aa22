"""``sundial jobs pause``, ``resume``, ``delete``, ``trigger`` and ``backfill``."""

from __future__ import annotations

from typing import Annotated

import typer

from sundial.cli._client import (
    Connection,
    TokenOption,
    connected,
    enum_name,
    jobs_client,
    parse_instant,
    parse_time,
    tenant_client,
    when,
)
from sundial.cli._output import Output, OutputOption, emit
from sundial.cli.jobs._bulk import (
    DryRun,
    Limit,
    MaybeJobId,
    Search,
    Selector,
    Until,
    bulk_wanted,
    run_bulk,
)
from sundial.cli.jobs._options import JobId, Note, RequestId, Version
from sundial.cli.jobs._show import print_runs
from sundial.v1 import bulk_pb2, run_pb2
from sundial.v1 import job_service_pb2 as pb


@connected
def pause(
    job_id: MaybeJobId = "",
    *,
    conn: Connection,
    token: TokenOption = "",
    note: Note = "",
    until: Until = "",
    expected_version: Version = 0,
    selector: Selector = "",
    search: Search = "",
    dry_run: DryRun = False,
    limit: Limit = 0,
    output: OutputOption = Output.TABLE,
) -> None:
    """Pause a job, or every job a selector matches (-l): no scheduled runs until
    resumed (or until --until)."""
    pause_until = parse_time(until, "--until") if until else None
    if bulk_wanted(job_id, selector, search):
        request = bulk_pb2.PauseJobsRequest(
            selector=selector, search=search, note=note, dry_run=dry_run, limit=limit
        )
        if pause_until is not None:
            request.pause_until.CopyFrom(pause_until)
        run_bulk(conn, token, "PauseJobs", request, words=("pause", "paused"), output=output)
        return
    with jobs_client(conn, token) as (stub, md):
        request_one = pb.PauseJobRequest(
            job_id=job_id, note=note, expected_version=expected_version
        )
        if pause_until is not None:
            request_one.pause_until.CopyFrom(pause_until)
        response = stub.PauseJob(request_one, metadata=md)
    job = response.job
    emit(
        response,
        output,
        table=lambda _wide: typer.echo(f"paused {job.name} (version {job.version})"),
        names=lambda: [job.job_id],
    )


@connected
def resume(
    job_id: MaybeJobId = "",
    *,
    conn: Connection,
    token: TokenOption = "",
    note: Note = "",
    expected_version: Version = 0,
    selector: Selector = "",
    search: Search = "",
    dry_run: DryRun = False,
    limit: Limit = 0,
    output: OutputOption = Output.TABLE,
) -> None:
    """Resume a job, or every paused job a selector matches (-l), from now (missed
    occurrences are not run)."""
    if bulk_wanted(job_id, selector, search):
        request = bulk_pb2.ResumeJobsRequest(
            selector=selector, search=search, note=note, dry_run=dry_run, limit=limit
        )
        run_bulk(conn, token, "ResumeJobs", request, words=("resume", "resumed"), output=output)
        return
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


@connected
def delete(
    job_id: MaybeJobId = "",
    *,
    conn: Connection,
    token: TokenOption = "",
    expected_version: Version = 0,
    allow_missing: Annotated[bool, typer.Option(help="Succeed if the job is gone.")] = False,
    selector: Selector = "",
    search: Search = "",
    dry_run: DryRun = False,
    limit: Limit = 0,
    output: OutputOption = Output.TABLE,
) -> None:
    """Delete a job, or every job a selector matches (-l); their unfinished runs are
    cancelled."""
    if bulk_wanted(job_id, selector, search):
        request = bulk_pb2.DeleteJobsRequest(
            selector=selector, search=search, dry_run=dry_run, limit=limit
        )
        run_bulk(conn, token, "DeleteJobs", request, words=("delete", "deleted"), output=output)
        return
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


@connected
def trigger(
    job_id: MaybeJobId = "",
    *,
    conn: Connection,
    token: TokenOption = "",
    request_id: RequestId = "",
    selector: Selector = "",
    search: Search = "",
    dry_run: DryRun = False,
    limit: Limit = 0,
    output: OutputOption = Output.TABLE,
) -> None:
    """Run a job now, or every job a selector matches (-l): a MANUAL run each, keyed by
    this instant."""
    if bulk_wanted(job_id, selector, search):
        request = bulk_pb2.TriggerJobsRequest(
            selector=selector, search=search, dry_run=dry_run, limit=limit
        )
        run_bulk(conn, token, "TriggerJobs", request, words=("trigger", "triggered"), output=output)
        return
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
