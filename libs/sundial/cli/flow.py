"""``sundial flow ...``: the tenant's rate and concurrency limits per key.

A job's runs are called under a rate-limit key (``--rate-limit-key``, default its
target's origin such as ``https://crm.example.com:443``) and may name a concurrency key
(``--concurrency-key customer=42``); a limit on a key holds its runs back (they wait,
QUEUED, and are never dropped)::

    sundial flow set https://crm.example.com:443 --rate 600/m --burst 20
    sundial flow set customer=42 --max-running 5
    sundial flow list
    sundial flow delete customer=42
"""

from __future__ import annotations

import re
from typing import Annotated

import typer

from sundial.cli._client import (
    Connection,
    TokenOption,
    all_pages,
    connected,
    fail,
    jobs_client,
    when,
)
from sundial.cli._output import Column, Output, OutputOption, emit, print_fields, print_table
from sundial.v1 import flow_pb2

app = typer.Typer(
    name="flow",
    help="Rate and concurrency limits per key: runs over a limit wait, never dropped.",
    no_args_is_help=True,
)

Key = Annotated[
    str,
    typer.Argument(
        help="The key: a target origin (https://host:443), a job's --rate-limit-key or "
        "--concurrency-key.",
        show_default=False,
    ),
]

_RATE = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*/\s*(s|m|h)")
_PER = {"s": 1.0, "m": 60.0, "h": 3600.0}


def parse_rate(text: str, option: str = "--rate") -> float:
    """``50/s``, ``600/m``, ``30/h`` (or a bare number: per second) as calls a second."""
    text = text.strip()
    match = _RATE.fullmatch(text)
    try:
        return float(match.group(1)) / _PER[match.group(2)] if match else float(text)
    except ValueError:
        fail(f"{option}: {text!r} is not a rate (e.g. 50/s, 600/m, 30/h)")


def rate_text(rate: float) -> str:
    """Calls a second as people set them: ``50/s``, ``30/m`` below one a second."""
    if not rate:
        return "-"
    if rate >= 1:
        return f"{rate:g}/s"
    per_minute = round(rate * 60, 6)
    return f"{per_minute:g}/m" if per_minute >= 1 else f"{round(rate * 3600, 6):g}/h"


def _blocked_text(limit: flow_pb2.FlowLimit) -> str:
    return when(limit.blocked_until, set_=limit.HasField("blocked_until"))


def print_limit(limit: flow_pb2.FlowLimit) -> None:
    """A limit and its state as ``key  value`` lines."""
    rows = [
        ("rate", rate_text(limit.rate_per_second)),
        ("burst", str(limit.burst) if limit.rate_per_second else "-"),
        ("max running", str(limit.max_running or "-")),
        ("waiting runs", str(limit.waiting_runs)),
        ("running runs", str(limit.running_runs)),
        ("tokens", f"{limit.available_tokens:g}" if limit.rate_per_second else "-"),
        ("blocked until", _blocked_text(limit)),
        ("updated", when(limit.update_time)),
    ]
    print_fields(f"flow limit {limit.key}", rows)


@app.command("set")
@connected
def set_limit(
    key: Key,
    *,
    rate: Annotated[
        str,
        typer.Option(help="Calls that may start per second or minute: 50/s, 600/m (0: none)."),
    ] = "",
    burst: Annotated[
        int,
        typer.Option(
            help="Calls that may start at once after a quiet spell (0: a second's worth)."
        ),
    ] = 0,
    max_running: Annotated[
        int, typer.Option(help="At most this many of the key's runs RUNNING at once (0: none).")
    ] = 0,
    conn: Connection,
    token: TokenOption = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """Set a key's limits (replacing what it had): --rate, --max-running or both."""
    if not rate and not max_running:
        fail("give --rate, --max-running or both")
    limit = flow_pb2.FlowLimit(
        key=key,
        rate_per_second=parse_rate(rate) if rate else 0.0,
        burst=burst,
        max_running=max_running,
    )
    with jobs_client(conn, token) as (stub, md):
        response = stub.SetFlowLimit(flow_pb2.SetFlowLimitRequest(limit=limit), metadata=md)
    emit(
        response,
        output,
        table=lambda _wide: print_limit(response.limit),
        names=lambda: [response.limit.key],
    )


@app.command("list")
@connected
def list_limits(
    *,
    limit: Annotated[int, typer.Option(help="Show at most this many (0: all).", min=0)] = 0,
    conn: Connection,
    token: TokenOption = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """The tenant's limits by key, each with its waiting and running runs now."""
    with jobs_client(conn, token) as (stub, md):
        listed = all_pages(
            lambda r: stub.ListFlowLimits(r, metadata=md),
            flow_pb2.ListFlowLimitsRequest(),
            flow_pb2.ListFlowLimitsResponse(),
            "limits",
            limit,
        )

    def table(wide: bool) -> None:
        print_table(
            (
                Column("key"),
                Column("rate"),
                Column("burst", 2),
                Column("max running"),
                Column("waiting"),
                Column("running"),
                Column("tokens", 1),
                Column("blocked until", 1),
            ),
            [
                (
                    f.key,
                    rate_text(f.rate_per_second),
                    str(f.burst) if f.rate_per_second else "-",
                    str(f.max_running or "-"),
                    str(f.waiting_runs),
                    str(f.running_runs),
                    f"{f.available_tokens:.1f}" if f.rate_per_second else "-",
                    _blocked_text(f),
                )
                for f in listed.limits
            ],
            wide=wide,
        )

    emit(listed, output, table=table, names=lambda: [f.key for f in listed.limits])


@app.command()
@connected
def delete(
    key: Key,
    *,
    conn: Connection,
    token: TokenOption = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """Remove a key's limits: its waiting runs go as the tenant's fair share lets them."""
    with jobs_client(conn, token) as (stub, md):
        response = stub.DeleteFlowLimit(flow_pb2.DeleteFlowLimitRequest(key=key), metadata=md)
    emit(
        response,
        output,
        table=lambda _wide: typer.echo(f"deleted the flow limit of {key}"),
        names=lambda: [key],
    )
