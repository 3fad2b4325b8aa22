"""``sundial preview "<cron>" --tz <zone>``: upcoming fire times, DST annotated.

Computed here, without the API or a token: the schedule library is local, and the code
is the API's own PreviewSchedule (``sundial.api``), so the answer is the one the API
would give and the schedulers follow.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated

import typer

from sundial.api import convert, validation
from sundial.api.jobs import PREVIEW_KEY
from sundial.api.jobs import preview as compute_preview
from sundial.cli._client import fail, parse_time
from sundial.cli._output import Output, OutputOption, emit
from sundial.cli.jobs import print_fire_times
from sundial.core.errors import InvalidArgument
from sundial.v1 import job_pb2
from sundial.v1 import job_service_pb2 as pb

# The request fields the API names in its errors, as this command's arguments.
_ARGUMENTS = {"schedule.cron": "cron", "schedule.time_zone": "--tz", "count": "--count"}


def preview(
    cron: Annotated[str, typer.Argument(help='Cron expression, e.g. "30 2 * * *".')],
    *,
    tz: Annotated[str, typer.Option("--tz", help="IANA time zone.")] = "UTC",
    count: Annotated[int, typer.Option(help="How many fire times (1-1000).")] = 10,
    after: Annotated[str, typer.Option(help="Start after this ISO 8601 instant.")] = "",
    job_id: Annotated[
        str, typer.Option(help="Hash H fields and jitter for the job with this uid.")
    ] = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """Show when a cron schedule fires, with what DST shifts or drops (computed locally)."""
    start = parse_time(after, "--after").ToDatetime(UTC) if after else datetime.now(UTC)
    if job_id:
        try:
            key = str(uuid.UUID(job_id))
        except ValueError:
            fail(f"--job-id: {job_id!r} is not a job uid (a UUID, the job's `uid`)")
    else:
        key = PREVIEW_KEY
    try:
        if not 1 <= count <= validation.MAX_PREVIEW_COUNT:
            raise InvalidArgument("count", f"must be 1 to {validation.MAX_PREVIEW_COUNT}")
        schedule = convert.schedule_in(job_pb2.Schedule(cron=cron, time_zone=tz))
        result = compute_preview(validation.check_schedule(schedule, key), start, count, 0)
    except InvalidArgument as exc:
        fail(f"{_ARGUMENTS.get(exc.field, exc.field)}: {exc.problem}")
    response = pb.PreviewScheduleResponse(
        fire_times=[convert.fire_time_out(entry) for entry in result.entries],
        exhausted=result.exhausted,
    )

    def table(_wide: bool) -> None:
        print_fire_times(response.fire_times, f"{cron} ({tz})")
        if response.exhausted:
            typer.echo("the schedule ends here (no later fire time)")

    emit(
        response,
        output,
        table=table,
        names=lambda: [f.at.ToJsonString() for f in response.fire_times if f.HasField("at")],
    )
