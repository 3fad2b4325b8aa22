"""Many jobs at once: the options of ``pause``, ``resume``, ``delete`` and ``trigger``
by selector, ``sundial jobs count``, and how a bulk action is run and shown."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from sundial.cli._client import Connection, TokenOption, connected, fail, tenant_client
from sundial.cli._output import Output, OutputOption, emit
from sundial.v1 import bulk_pb2

MaybeJobId = Annotated[
    str, typer.Argument(help="The job's id (or none, with -l/--search).", show_default=False)
]

Selector = Annotated[
    str,
    typer.Option(
        "--selector",
        "-l",
        help="Label selector, Kubernetes syntax: 'customer=42,tier in (gold,silver),!beta'.",
    ),
]

Search = Annotated[
    str, typer.Option(help="Only jobs whose name or description contains this (any case).")
]

DryRun = Annotated[
    bool, typer.Option(help="Change nothing: count the jobs and name the first ones.")
]

Limit = Annotated[
    int, typer.Option(help="Jobs per call (0: 1,000; at most 10,000); repeated until done.")
]

Until = Annotated[
    str, typer.Option(help="Resume by itself at this ISO 8601 instant (a timed pause).")
]


def bulk_wanted(job_id: str, selector: str, search: str) -> bool:
    """Whether the command acts on one job (False) or on the jobs the filters match."""
    if job_id and (selector or search):
        fail("give a job id, or -l/--search, not both")
    if not job_id and not (selector or search):
        fail("give a job id, or -l SELECTOR / --search TEXT for many jobs")
    return not job_id


def run_bulk(
    conn: Connection,
    token: str,
    method: str,
    request: Any,
    *,
    words: tuple[str, str],
    output: Output,
) -> None:
    """Run a bulk action (repeated until no matched job needs it), and show it."""
    with tenant_client(conn, token) as client:
        answer = client.bulk(method, request) if method != "TriggerJobs" else None
        if answer is None:
            answer = client.stub.TriggerJobs(request, metadata=client.metadata)

    ids = list(getattr(answer, "job_ids", None) or getattr(answer, "run_keys", []))

    def table(_wide: bool) -> None:
        verb, done = words
        if request.dry_run:
            typer.echo(f"would {verb} {answer.affected} of {answer.matched} matching jobs")
            for shown in ids:
                typer.echo(f"  {shown}")
            return
        typer.echo(f"{done} {answer.affected} of {answer.matched} matching jobs")
        for shown in ids:
            typer.echo(f"  {shown}")
        if getattr(answer, "remaining", 0):
            typer.echo(f"{answer.remaining} still to {verb}: run the command again")

    emit(answer, output, table=table, names=lambda: ids)


@connected
def count(
    *,
    conn: Connection,
    token: TokenOption = "",
    selector: Selector = "",
    search: Search = "",
    prefix: Annotated[str, typer.Option(help="Only names starting with this.")] = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """Count the jobs a selector (and search, prefix) matches."""
    with tenant_client(conn, token) as client:
        count = client.count_jobs(selector, search=search, name_prefix=prefix)
    emit(
        bulk_pb2.CountJobsResponse(count=count),
        output,
        table=lambda _wide: typer.echo(count),
        names=lambda: [str(count)],
    )
