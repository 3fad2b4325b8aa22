"""``sundial dev``: the local stack and the three services, until Ctrl-C."""

from __future__ import annotations

import io
import secrets
import signal
import sys
import threading
from pathlib import Path
from typing import Annotated

import grpc
import typer
from google.protobuf import duration_pb2
from rich.console import Console
from rich.table import Table

from sundial.core.tls import dial_sync
from sundial.devstack import DemoTarget, Services, Stack, start_demo_target
from sundial.v1 import admin_pb2, admin_pb2_grpc, job_pb2, job_service_pb2, job_service_pb2_grpc

console = Console()

DEV_TENANT = "dev"
DEMO_JOB = "demo-every-5s"


def create_dev_tenant(channel: grpc.Channel, admin_token: str) -> str:
    """Create the ``dev`` tenant (if it does not exist yet) and return a new tenant token.

    Args:
        channel: A channel to the API service.
        admin_token: An admin bearer token (``sundial dev`` generates one).
    """
    return _dev_tenant(channel, admin_token)[0]


def _dev_tenant(channel: grpc.Channel, admin_token: str) -> tuple[str, str]:
    """The ``dev`` tenant's new token and its signing secret: the one it was created
    with, or a new one (rotated) when it already existed from an earlier run."""
    admin = admin_pb2_grpc.AdminServiceStub(channel)
    metadata = (("authorization", f"Bearer {admin_token}"),)
    try:
        created = admin.CreateTenant(
            admin_pb2.CreateTenantRequest(
                tenant=admin_pb2.Tenant(tenant_id=DEV_TENANT, display_name="Local development")
            ),
            metadata=metadata,
            timeout=10,
        )
        secret = created.signing_secret
    except grpc.RpcError as exc:
        if exc.code() != grpc.StatusCode.ALREADY_EXISTS:
            raise
        secret = admin.RotateSigningSecret(
            admin_pb2.RotateSigningSecretRequest(tenant_id=DEV_TENANT),
            metadata=metadata,
            timeout=10,
        ).signing_secret
    issued = admin.CreateApiToken(
        admin_pb2.CreateApiTokenRequest(
            tenant_id=DEV_TENANT, role=admin_pb2.TOKEN_ROLE_TENANT, description="sundial dev"
        ),
        metadata=metadata,
        timeout=10,
    )
    return issued.secret, secret


def create_demo(channel: grpc.Channel, token: str, target_url: str) -> job_pb2.Job:
    """Create (idempotently) a job that calls ``target_url`` every 5 seconds.

    Applied under the client id ``demo-every-5s``: a reused data folder keeps its demo
    job, pointed at this run's target.

    Args:
        channel: A channel to the API service.
        token: A tenant token.
        target_url: The HTTP endpoint the demo job calls (the local demo target).

    Returns:
        The demo job.
    """
    jobs = job_service_pb2_grpc.JobServiceStub(channel)
    job = job_pb2.Job(
        job_id=DEMO_JOB,
        name=DEMO_JOB,
        description="Created by `sundial dev`: calls the local demo target every 5 s.",
        schedule=job_pb2.Schedule(
            interval=job_pb2.IntervalSchedule(every=duration_pb2.Duration(seconds=5))
        ),
        target=job_pb2.Target(http=job_pb2.HttpTarget(url=target_url)),
        payload=b'{"hello": "sundial"}',
        labels={"created-by": "sundial-dev"},
    )
    metadata = (("authorization", f"Bearer {token}"),)
    applied = jobs.ApplyJob(job_service_pb2.ApplyJobRequest(job=job), metadata=metadata, timeout=10)
    return applied.job


def dev(
    data_dir: Annotated[
        Path | None,
        typer.Option(help="Folder for server data and logs (default: a new temporary one)."),
    ] = None,
    keep: Annotated[bool, typer.Option(help="Keep the data folder after stopping.")] = False,
    cluster: Annotated[
        bool,
        typer.Option(
            help="Run NATS and etcd as three-node clusters (streams at 3 replicas) and two "
            "schedulers and two executors: the shape of a production deployment."
        ),
    ] = False,
) -> None:
    """Start PostgreSQL, NATS JetStream, etcd and the three services; Ctrl-C stops all."""
    # Redirected to a file or a pipe, stdout would be block-buffered: a script waiting
    # for the addresses and tokens would see them only at exit.
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=True)
    # SIGINT (Ctrl-C) and SIGTERM stop it at any point, while starting too:
    # KeyboardInterrupt unwinds through the `finally` below, which stops what already
    # started. Both are set explicitly: a shell starting it in the background (`&` in a
    # script) leaves SIGINT ignored, and Python then installs no handler of its own. A
    # second Ctrl-C while stopping interrupts the stop; the children then die with this
    # process (they are started with a parent-death signal, see sundial.devstack).
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.default_int_handler)
    admin_token = f"sundial-admin-{secrets.token_urlsafe(24)}"
    stack = Stack(
        data_dir=data_dir, keep_data=keep or data_dir is not None, cluster_size=3 if cluster else 1
    )
    try:
        with console.status("starting PostgreSQL, NATS JetStream and etcd..."):
            stack.start()
    except KeyboardInterrupt:
        console.print("[bold]stopped.[/]")  # Stack.start stopped what it had started
        raise typer.Exit(130) from None
    assert stack.data_dir is not None
    services = Services(
        stack,
        log_dir=stack.data_dir / "logs",
        extra_env={
            "SUNDIAL_ADMIN_TOKEN": admin_token,
            "SUNDIAL_LOG_FORMAT": "json",
            # The demo target (and anything else you run locally) listens on loopback.
            "SUNDIAL_ALLOW_LOOPBACK_TARGETS": "1",
        },
        http=True,
    )
    demo: DemoTarget | None = None
    try:
        demo = start_demo_target(stack.data_dir / "logs")
        with console.status("starting the API, scheduler and executor services..."):
            services.start(replicas=2 if cluster else 1)
        api_address = services.processes["api"].address
        with (
            console.status("creating the dev tenant and the demo job..."),
            dial_sync(api_address, services.client_tls) as channel,
        ):
            token, signing_secret = _dev_tenant(channel, admin_token)
            job = create_demo(channel, token, f"{demo.url}/demo")
        _print_endpoints(stack, services, admin_token)
        _print_demo(api_address, token, job, stack.data_dir / "logs" / "demo-target.log")
        http_url = services.processes["api"].http_url
        if http_url:
            console.print(
                f"Web console: [bold]{http_url}/console/[/] (log in with the token above)."
                "\nHTTP/JSON:\n"
                f"  curl -H 'authorization: Bearer {token}' -H 'content-type: application/json'"
                f" -d '{{}}' {http_url}/sundial.v1.JobService/ListJobs\n",
                highlight=False,
                soft_wrap=True,
            )
        console.print(
            f"tenant [bold]{DEV_TENANT}[/] signing secret (verifies Sundial-Signature on "
            f"calls to your targets): [bold]{signing_secret}[/]",
            soft_wrap=True,
        )
        console.print("[bold green]Sundial is running.[/] Press Ctrl-C to stop everything.")
        threading.Event().wait()  # until Ctrl-C or SIGTERM raises KeyboardInterrupt
    except KeyboardInterrupt:
        pass  # the way to stop it: clean up below and exit 0
    finally:
        console.print("stopping services...")
        if demo is not None:
            demo.stop()
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
        if process.http_url:
            table.add_row(f"{name} (HTTP/JSON, Connect)", process.http_url)
            table.add_row("web console", f"{process.http_url}/console/")
    table.add_row("PostgreSQL", stack.database_url)
    table.add_row("NATS JetStream", stack.nats_url)
    table.add_row("etcd", ",".join(stack.etcd_endpoints))
    table.add_row("data and logs", str(stack.data_dir))
    console.print(table)
    console.print(f"admin token: [bold]{admin_token}[/]")


def _print_demo(api_address: str, token: str, job: job_pb2.Job, demo_log: Path) -> None:
    console.print(f"tenant [bold]{DEV_TENANT}[/] token: [bold]{token}[/]")
    console.print(
        f"demo job [bold]{job.name}[/] ({job.job_id}) calls {job.target.http.url} every 5 s;"
        f" calls are logged to {demo_log}"
    )
    console.print("\nTry:", style="bold")
    console.print(
        f"  export SUNDIAL_API={api_address} SUNDIAL_TOKEN={token}\n"
        "  sundial jobs list\n"
        f"  sundial runs list {job.job_id}\n"
        f"  sundial jobs describe {job.job_id}\n"
        f"  sundial jobs trigger {job.job_id}\n"
        f"  sundial jobs pause {job.job_id} --note 'quiet please'\n"
        '  sundial preview "30 2 * * *" --tz America/New_York --after 2026-03-07T00:00:00Z\n',
        highlight=False,
        soft_wrap=True,
    )
