"""``sundial dev``: the local stack and the three services, until Ctrl-C."""

from __future__ import annotations

import secrets
import signal
import threading
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from sundial.devstack import Services, Stack

console = Console()


def dev(
    data_dir: Annotated[
        Path | None,
        typer.Option(help="Folder for server data and logs (default: a new temporary one)."),
    ] = None,
    keep: Annotated[bool, typer.Option(help="Keep the data folder after stopping.")] = False,
) -> None:
    """Start PostgreSQL, NATS JetStream, etcd and the three services; Ctrl-C stops all."""
    admin_token = f"sundial-admin-{secrets.token_urlsafe(24)}"
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stack = Stack(data_dir=data_dir, keep_data=keep or data_dir is not None)
    with console.status("starting PostgreSQL, NATS JetStream and etcd..."):
        stack.start()
    assert stack.data_dir is not None
    services = Services(
        stack,
        log_dir=stack.data_dir / "logs",
        extra_env={
            "SUNDIAL_ADMIN_TOKEN": admin_token,
            "SUNDIAL_LOG_FORMAT": "json",
        },
    )
    try:
        with console.status("starting the API, scheduler and executor services..."):
            services.start()
        _print_endpoints(stack, services, admin_token)
        console.print("[bold green]Sundial is running.[/] Press Ctrl-C to stop everything.")
        stop.wait()
    finally:
        console.print("stopping services...")
        services.stop()
        console.print("stopping PostgreSQL, NATS and etcd...")
        stack.stop()
        console.print("[bold]stopped.[/]")


def _print_endpoints(stack: Stack, services: Services, admin_token: str) -> None:
    table = Table(title="Sundial (local)", show_header=True)
    table.add_column("component")
    table.add_column("address")
    for name, process in services.processes.items():
        table.add_row(f"{name} (gRPC)", process.address)
    table.add_row("PostgreSQL", stack.database_url)
    table.add_row("NATS JetStream", stack.nats_url)
    table.add_row("etcd", ",".join(stack.etcd_endpoints))
    table.add_row("data and logs", str(stack.data_dir))
    console.print(table)
    console.print(f"admin token: [bold]{admin_token}[/]")
