"""``sundial notifications ...``: the tenant's notification channels.

A channel is where job events go (dead runs, auto-pauses, skipped misfires, late runs),
signed like runs; with ``--digest`` the events of a window go out as one notification::

    sundial notifications create ops --url https://hooks.example.com/sundial \\
        --event dead-run --event auto-paused --digest 5m
    sundial notifications list -o wide
    sundial notifications update <channel-id> --event dead-run
    sundial notifications delete <channel-id>
"""

from __future__ import annotations

from typing import Annotated

import typer
from google.protobuf import field_mask_pb2

from sundial.cli._client import (
    Connection,
    TokenOption,
    all_pages,
    connected,
    console,
    duration_text,
    fail,
    jobs_client,
    parse_duration,
    when,
)
from sundial.cli._output import Column, Output, OutputOption, emit, print_fields, print_table
from sundial.cli.jobs import GrpcAddress, Header, Url, target_from_options, target_text
from sundial.v1 import job_service_pb2 as pb

app = typer.Typer(
    name="notifications",
    help="Where your job events go: dead runs, auto-pauses, skipped misfires, late runs.",
    no_args_is_help=True,
)

_PREFIX = "NOTIFICATION_EVENT_KIND_"
_KINDS = {
    name.removeprefix(_PREFIX).lower().replace("_", "-"): number
    for name, number in pb.NotificationEventKind.items()
    if number
}

ChannelId = Annotated[str, typer.Argument(help="The channel's id.")]
Events = Annotated[
    list[str] | None,
    typer.Option("--event", help=f"An event kind, repeatable: {', '.join(_KINDS)}."),
]
Digest = Annotated[
    str, typer.Option(help="Send the events of this window as one notification, e.g. 5m (0s: off).")
]


def _kind_text(number: int) -> str:
    return pb.NotificationEventKind.Name(number).removeprefix(_PREFIX).lower().replace("_", "-")


def _kinds(events: list[str]) -> list[int]:
    unknown = [e for e in events if e not in _KINDS]
    if unknown:
        fail(f"--event: {unknown[0]!r} is not one of {', '.join(_KINDS)}")
    return [_KINDS[e] for e in events]


def print_channel(channel: pb.NotificationChannel) -> None:
    """A channel as ``key  value`` lines."""
    window = channel.digest_window
    print_fields(
        f"notification channel {channel.display_name}",
        [
            ("channel id", channel.channel_id),
            ("target", target_text(channel.target)),
            ("events", ", ".join(_kind_text(k) for k in channel.event_kinds)),
            ("digest", duration_text(window) if window.seconds else "off: one per event"),
            ("version", str(channel.version)),
            ("created", when(channel.create_time)),
            ("updated", when(channel.update_time)),
        ],
    )


def _emit(channel: pb.NotificationChannel, response: object, output: Output) -> None:
    emit(
        response,  # type: ignore[arg-type]
        output,
        table=lambda _wide: print_channel(channel),
        names=lambda: [channel.channel_id],
    )


@app.command()
@connected
def create(
    name: Annotated[str, typer.Argument(help="Channel name, unique in the tenant.")],
    *,
    conn: Connection,
    token: TokenOption = "",
    url: Url = "",
    method: Annotated[str, typer.Option(help="HTTP method.")] = "POST",
    header: Header = None,
    grpc_address: GrpcAddress = "",
    plaintext: Annotated[bool, typer.Option(help="gRPC without TLS.")] = False,
    event: Events = None,
    digest: Digest = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """Register a notification channel."""
    if not event:
        fail("give at least one --event")
    channel = pb.NotificationChannel(
        display_name=name,
        target=target_from_options(url, method, header, grpc_address, plaintext),
        event_kinds=_kinds(event),  # type: ignore[arg-type]
    )
    if digest:
        channel.digest_window.CopyFrom(parse_duration(digest, "--digest"))
    with jobs_client(conn, token) as (stub, md):
        response = stub.CreateNotificationChannel(
            pb.CreateNotificationChannelRequest(channel=channel), metadata=md
        )
    _emit(response.channel, response, output)


_COLUMNS = (
    Column("name", 1),
    Column("channel id"),
    Column("events", 2),
    Column("digest", 3),
    Column("target", 4, wide=True),
)


@app.command("list")
@connected
def list_channels(
    *,
    conn: Connection,
    token: TokenOption = "",
    limit: Annotated[int, typer.Option(help="Show at most this many (0: all).")] = 100,
    output: OutputOption = Output.TABLE,
) -> None:
    """List the notification channels by name."""
    with jobs_client(conn, token) as (stub, md):
        listed = all_pages(
            lambda r: stub.ListNotificationChannels(r, metadata=md),
            pb.ListNotificationChannelsRequest(),
            pb.ListNotificationChannelsResponse(),
            "channels",
            limit,
        )

    def table(wide: bool) -> None:
        print_table(
            _COLUMNS,
            [
                (
                    c.display_name,
                    c.channel_id,
                    ",".join(_kind_text(k) for k in c.event_kinds),
                    duration_text(c.digest_window) if c.digest_window.seconds else "-",
                    target_text(c.target),
                )
                for c in listed.channels
            ],
            wide=wide,
        )
        if listed.next_page_token:
            console.print(f"more channels: --limit {limit * 2}", highlight=False)

    emit(listed, output, table=table, names=lambda: [c.channel_id for c in listed.channels])


@app.command()
@connected
def get(
    channel_id: ChannelId,
    *,
    conn: Connection,
    token: TokenOption = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """Show a notification channel."""
    with jobs_client(conn, token) as (stub, md):
        response = stub.GetNotificationChannel(
            pb.GetNotificationChannelRequest(channel_id=channel_id), metadata=md
        )
    _emit(response.channel, response, output)


@app.command()
@connected
def update(
    channel_id: ChannelId,
    *,
    conn: Connection,
    token: TokenOption = "",
    name: Annotated[str, typer.Option(help="A new name.")] = "",
    url: Url = "",
    method: Annotated[str, typer.Option(help="HTTP method (with --url).")] = "POST",
    header: Header = None,
    grpc_address: GrpcAddress = "",
    plaintext: Annotated[bool, typer.Option(help="gRPC without TLS (with --grpc).")] = False,
    event: Annotated[
        list[str] | None,
        typer.Option("--event", help="Event kinds; replaces all of them, repeatable."),
    ] = None,
    digest: Digest = "",
    expected_version: Annotated[
        int, typer.Option(help="Only if the channel is at this version (0: unconditionally).")
    ] = 0,
    output: OutputOption = Output.TABLE,
) -> None:
    """Change a notification channel (only what the options name)."""
    channel = pb.NotificationChannel(channel_id=channel_id, display_name=name)
    paths = ["display_name"] if name else []
    if url or grpc_address:
        channel.target.CopyFrom(target_from_options(url, method, header, grpc_address, plaintext))
        paths.append("target")
    if event:
        channel.event_kinds.extend(_kinds(event))  # type: ignore[arg-type]
        paths.append("event_kinds")
    if digest:
        channel.digest_window.CopyFrom(parse_duration(digest, "--digest"))
        paths.append("digest_window")
    if not paths:
        fail("nothing to change: give at least one option (see --help)")
    request = pb.UpdateNotificationChannelRequest(
        channel=channel,
        update_mask=field_mask_pb2.FieldMask(paths=paths),
        expected_version=expected_version,
    )
    with jobs_client(conn, token) as (stub, md):
        response = stub.UpdateNotificationChannel(request, metadata=md)
    _emit(response.channel, response, output)


@app.command()
@connected
def delete(
    channel_id: ChannelId,
    *,
    conn: Connection,
    token: TokenOption = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """Delete a notification channel (its undelivered notifications are dropped)."""
    with jobs_client(conn, token) as (stub, md):
        response = stub.DeleteNotificationChannel(
            pb.DeleteNotificationChannelRequest(channel_id=channel_id), metadata=md
        )
    emit(
        response,
        output,
        table=lambda _wide: typer.echo(f"deleted notification channel {channel_id}"),
        names=lambda: [channel_id],
    )
