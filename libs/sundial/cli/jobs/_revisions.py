"""``sundial jobs history`` and ``rollback``; ``sundial audit``."""

from __future__ import annotations

from typing import Annotated

import typer

from sundial.cli._client import (
    Connection,
    TokenOption,
    all_pages,
    connected,
    jobs_client,
)
from sundial.cli._output import Column, Output, OutputOption, emit, print_table
from sundial.cli.jobs._options import JobId, Version
from sundial.cli.jobs._show import emit_job, schedule_text
from sundial.v1 import job_service_pb2 as pb


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
