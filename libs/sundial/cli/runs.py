"""``sundial runs ...``: list and operate a job's runs over gRPC."""

from __future__ import annotations

from typing import Annotated

import typer

from sundial.cli._client import (
    Connection,
    TokenOption,
    all_pages,
    connected,
    console,
    fail,
    jobs_client,
    parse_time,
)
from sundial.cli._output import Output, OutputOption, emit
from sundial.cli.jobs import print_runs
from sundial.cli.jobs._bulk import Selector
from sundial.core import wire
from sundial.run import RunKind, RunStatus
from sundial.v1 import job_service_pb2 as pb
from sundial.v1 import run_pb2

app = typer.Typer(name="runs", help="List, inspect, replay and cancel runs.", no_args_is_help=True)

RunKey = Annotated[
    str, typer.Argument(help="The run key, <job uid>@<scheduled_at>.", show_default=False)
]

# --status and --kind take the stored spelling ("dead", "backfill"), the words the
# tables show.
_STATUSES = {status.value: wire.enum_out(status) for status in RunStatus}
_KINDS = {kind.value: wire.enum_out(kind) for kind in RunKind}


def _chosen(names: list[str] | None, known: dict[str, int], option: str) -> list[int]:
    chosen = []
    for name in names or []:
        if name.lower() not in known:
            fail(f"{option}: unknown value {name!r}; expected one of {', '.join(known)}")
        chosen.append(known[name.lower()])
    return chosen


@app.command("list")
@connected
def list_runs(
    job_id: Annotated[
        str, typer.Argument(help="The job's id (none: every job's runs).", show_default=False)
    ] = "",
    *,
    status: Annotated[
        list[str] | None,
        typer.Option(help=f"Only runs in this status (repeatable): {', '.join(_STATUSES)}."),
    ] = None,
    kind: Annotated[
        list[str] | None,
        typer.Option(help=f"Only runs of this kind (repeatable): {', '.join(_KINDS)}."),
    ] = None,
    after: Annotated[
        str, typer.Option(help="Only runs scheduled at or after this ISO 8601 instant.")
    ] = "",
    before: Annotated[str, typer.Option(help="Only runs scheduled before this instant.")] = "",
    started_after: Annotated[
        str, typer.Option(help="Only runs that started at or after this instant (no job id).")
    ] = "",
    started_before: Annotated[
        str, typer.Option(help="Only runs that started before this instant (no job id).")
    ] = "",
    selector: Selector = "",
    late: Annotated[
        bool, typer.Option("--late", help="Only scheduled runs that started or wait late.")
    ] = False,
    limit: Annotated[int, typer.Option(help="Show at most this many (0: all).", min=0)] = 20,
    page_token: Annotated[str, typer.Option(help="Continue from a previous listing.")] = "",
    conn: Connection,
    token: TokenOption = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """A job's runs, or every job's (no job id; -l selects the jobs), newest first, with
    status, attempt and lateness."""
    request = pb.ListRunsRequest(
        job_id=job_id,
        statuses=_chosen(status, _STATUSES, "--status"),  # type: ignore[arg-type]
        kinds=_chosen(kind, _KINDS, "--kind"),  # type: ignore[arg-type]
        page_token=page_token,
        selector=selector,
        late_only=late,
    )
    if started_after:
        request.started_after.CopyFrom(parse_time(started_after, "--started-after"))
    if started_before:
        request.started_before.CopyFrom(parse_time(started_before, "--started-before"))
    if after:
        request.scheduled_after.CopyFrom(parse_time(after, "--after"))
    if before:
        request.scheduled_before.CopyFrom(parse_time(before, "--before"))
    with jobs_client(conn, token) as (stub, md):
        listed = all_pages(
            lambda r: stub.ListRuns(r, metadata=md), request, pb.ListRunsResponse(), "runs", limit
        )

    def table(wide: bool) -> None:
        print_runs(listed.runs, wide=wide)
        if listed.next_page_token:
            console.print(f"more runs: --page-token {listed.next_page_token}", highlight=False)

    emit(listed, output, table=table, names=lambda: [run.run_key for run in listed.runs])


def _emit_run(
    response: pb.GetRunResponse | pb.ReplayRunResponse | pb.CancelRunResponse, output: Output
) -> None:
    run: run_pb2.Run = response.run
    emit(
        response,
        output,
        table=lambda wide: print_runs([run], wide=wide),
        names=lambda: [run.run_key],
    )


@app.command()
@connected
def get(
    run_key: RunKey,
    *,
    conn: Connection,
    token: TokenOption = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """Show one run."""
    with jobs_client(conn, token) as (stub, md):
        response = stub.GetRun(pb.GetRunRequest(run_key=run_key), metadata=md)
    _emit_run(response, output)


@app.command()
@connected
def replay(
    run_key: RunKey,
    *,
    conn: Connection,
    token: TokenOption = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """Queue a dead or cancelled run again under the same run key."""
    with jobs_client(conn, token) as (stub, md):
        response = stub.ReplayRun(pb.ReplayRunRequest(run_key=run_key), metadata=md)
    _emit_run(response, output)


@app.command()
@connected
def cancel(
    run_key: RunKey,
    reason: Annotated[str, typer.Option(help="Why (kept with the run).")] = "",
    *,
    conn: Connection,
    token: TokenOption = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """Cancel a run (a running target call is cancelled through its heartbeat)."""
    with jobs_client(conn, token) as (stub, md):
        response = stub.CancelRun(pb.CancelRunRequest(run_key=run_key, reason=reason), metadata=md)
    _emit_run(response, output)
