"""``sundial runs ...``: list and operate a job's runs over gRPC."""

from __future__ import annotations

from typing import Annotated

import typer

from sundial.cli._client import (
    Connection,
    TokenOption,
    connected,
    console,
    fail,
    jobs_client,
    print_json,
)
from sundial.cli.jobs import print_runs
from sundial.core import wire
from sundial.run import RunStatus
from sundial.v1 import job_service_pb2 as pb

app = typer.Typer(name="runs", help="List, inspect, replay and cancel runs.", no_args_is_help=True)

RunKey = Annotated[
    str, typer.Argument(help="The run key, <job_id>@<scheduled_at>.", show_default=False)
]
Json = Annotated[bool, typer.Option("--json", help="Print the raw response as JSON.")]

# --status takes the stored spelling of a status ("dead"), the same word the tables show.
_STATUSES = {status.value: wire.enum_out(status) for status in RunStatus}


@app.command("list")
@connected
def list_runs(
    job_id: Annotated[str, typer.Argument(help="The job's id.", show_default=False)],
    *,
    status: Annotated[
        list[str] | None,
        typer.Option(help=f"Only runs in this status (repeatable): {', '.join(_STATUSES)}."),
    ] = None,
    limit: Annotated[int, typer.Option(help="Most runs shown.", min=1, max=1000)] = 20,
    conn: Connection,
    token: TokenOption = "",
    json: Json = False,
) -> None:
    """A job's runs, newest first, with status, attempt and lateness."""
    statuses = []
    for name in status or []:
        if name.lower() not in _STATUSES:
            fail(f"--status: unknown status {name!r}; expected one of {', '.join(_STATUSES)}")
        statuses.append(_STATUSES[name.lower()])
    request = pb.ListRunsRequest(job_id=job_id, statuses=statuses, page_size=limit)
    with jobs_client(conn, token) as (stub, md):
        response = stub.ListRuns(request, metadata=md)
    if json:
        print_json(response)
        return
    print_runs(list(response.runs), f"runs of {job_id}")
    if response.next_page_token:
        console.print(f"(newest {len(response.runs)} shown; --limit shows more)")


@app.command()
@connected
def get(run_key: RunKey, *, conn: Connection, token: TokenOption = "", json: Json = False) -> None:
    """Show one run."""
    with jobs_client(conn, token) as (stub, md):
        response = stub.GetRun(pb.GetRunRequest(run_key=run_key), metadata=md)
    if json:
        print_json(response)
        return
    print_runs([response.run], f"run {run_key}")


@app.command()
@connected
def replay(run_key: RunKey, *, conn: Connection, token: TokenOption = "") -> None:
    """Queue a dead or cancelled run again under the same run key."""
    with jobs_client(conn, token) as (stub, md):
        response = stub.ReplayRun(pb.ReplayRunRequest(run_key=run_key), metadata=md)
    print_runs([response.run], f"replayed {run_key}")


@app.command()
@connected
def cancel(
    run_key: RunKey,
    reason: Annotated[str, typer.Option(help="Why (kept with the run).")] = "",
    *,
    conn: Connection,
    token: TokenOption = "",
) -> None:
    """Cancel a run (a running target call is cancelled through its heartbeat)."""
    with jobs_client(conn, token) as (stub, md):
        response = stub.CancelRun(pb.CancelRunRequest(run_key=run_key, reason=reason), metadata=md)
    print_runs([response.run], f"cancelled {run_key}")
