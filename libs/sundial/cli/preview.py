"""``sundial preview "<cron>" --tz <zone>``: upcoming fire times, DST annotated."""

from __future__ import annotations

from typing import Annotated

import typer

from sundial.cli._client import (
    Connection,
    TokenOption,
    connected,
    console,
    jobs_client,
    parse_time,
)
from sundial.cli.jobs import print_fire_times
from sundial.v1 import job_pb2
from sundial.v1 import job_service_pb2 as pb


@connected
def preview(
    cron: Annotated[str, typer.Argument(help='Cron expression, e.g. "30 2 * * *".')],
    *,
    tz: Annotated[str, typer.Option("--tz", help="IANA time zone.")] = "UTC",
    count: Annotated[int, typer.Option(help="How many fire times (1-1000).")] = 10,
    after: Annotated[str, typer.Option(help="Start after this ISO 8601 instant.")] = "",
    job_id: Annotated[str, typer.Option(help="Hash H fields and jitter for this job.")] = "",
    conn: Connection,
    token: TokenOption = "",
) -> None:
    """Show when a cron schedule fires, with what DST shifts or drops."""
    request = pb.PreviewScheduleRequest(
        schedule=job_pb2.Schedule(cron=cron, time_zone=tz), count=count, job_id=job_id
    )
    if after:
        request.after.CopyFrom(parse_time(after, "--after"))
    with jobs_client(conn, token) as (stub, md):
        response = stub.PreviewSchedule(request, metadata=md)
    print_fire_times(list(response.fire_times), f"{cron} ({tz})")
    if response.exhausted:
        console.print("the schedule ends here (no later fire time)")
