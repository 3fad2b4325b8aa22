"""``sundial admin egress ...`` and ``sundial egress``: tenants' egress policies.

An admin sets which non-public addresses a tenant's targets may reach (egress.proto)::

    sundial admin egress set payments --allow '*.svc.cluster.local' --allow 10.96.0.0/12
    sundial admin egress set payments --file egress-policy.json
    sundial admin egress show payments
    sundial admin egress clear payments        # back to the operator's default

A rule is a host pattern (an exact name or ``*.suffix``) or a CIDR, optionally followed
by ``=http``, ``=grpc`` or ``=http,grpc`` (the default: both). ``--file`` reads the
policy as egress.proto's JSON (``{"rules": [{"host": ...}, {"cidr": ...,
"protocols": ["EGRESS_PROTOCOL_GRPC"]}]}``). A tenant sees its own with
``sundial egress`` (a tenant token).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from google.protobuf import json_format

from sundial.cli._client import (
    AdminTokenOption,
    Connection,
    TokenOption,
    admin_client,
    connected,
    enum_name,
    fail,
    jobs_client,
    when,
)
from sundial.cli._output import Column, Output, OutputOption, emit, print_table
from sundial.core import wire
from sundial.core.egress import EgressError, parse_rule, policy_of
from sundial.v1 import admin_pb2, egress_pb2, job_service_pb2

app = typer.Typer(
    name="egress",
    help="Set and show tenants' egress policies: the non-public addresses their targets may reach.",
    no_args_is_help=True,
)

TenantArgument = Annotated[str, typer.Argument(help="The tenant's id.", show_default=False)]


def _policy(allow: list[str], file: Path | None, no_rules: bool) -> egress_pb2.EgressPolicy:
    """The policy the options describe (checked here, so a typo fails before any call)."""
    if sum((bool(allow), file is not None, no_rules)) != 1:
        fail("give the rules with --allow (repeatable) or --file, or --no-rules for none")
    if file is not None:
        try:
            return json_format.Parse(file.read_text(), egress_pb2.EgressPolicy())
        except (OSError, json_format.ParseError) as exc:
            fail(f"--file {file}: {exc}")
    try:
        rules = [parse_rule(text, f"--allow {text!r}") for text in allow]
    except EgressError as exc:
        fail(str(exc))
    return wire.egress_policy(policy_of(rules))


def show_policy(egress: egress_pb2.EffectiveEgressPolicy, title: str) -> None:
    """Print a policy in force as a table with where it comes from."""
    source = (
        f"the tenant's own (set {when(egress.update_time)})"
        if egress.tenant_specific
        else "the operator's default"
    )
    typer.echo(f"{title}: {source}")
    if egress.policy.rules:
        print_table(
            (Column("allows"), Column("for")),
            [
                (
                    rule.host or rule.cidr,
                    ", ".join(
                        sorted(
                            enum_name(p, egress_pb2.EgressProtocol, "EGRESS_PROTOCOL_")
                            for p in rule.protocols
                        )
                    )
                    or "http, grpc",
                )
                for rule in egress.policy.rules
            ],
        )
    else:
        typer.echo("no rule: public addresses only")
    loopback = "allowed (development)" if egress.loopback_allowed else "never"
    typer.echo(
        f"always refused: cloud metadata, unspecified, multicast, reserved; loopback: {loopback}"
    )


def _answer(response: Any, title: str, output: Output) -> None:
    """Print an answer carrying ``egress`` as ``-o`` asks (table: :func:`show_policy`)."""
    emit(
        response,
        output,
        table=lambda _wide: show_policy(response.egress, title),
        names=lambda: [r.host or r.cidr for r in response.egress.policy.rules],
    )


@app.command("set")
@connected
def set_policy(
    tenant: TenantArgument,
    *,
    allow: Annotated[
        list[str] | None,
        typer.Option(help="A rule: NAME, *.SUFFIX or CIDR, then =http, =grpc (default both)."),
    ] = None,
    file: Annotated[
        Path | None, typer.Option(help="The policy as egress.proto JSON.", show_default=False)
    ] = None,
    no_rules: Annotated[
        bool, typer.Option("--no-rules", help="An empty policy: no non-public address.")
    ] = False,
    conn: Connection,
    token: AdminTokenOption = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """Give a tenant its own policy (it replaces the operator's default, at once)."""
    request = admin_pb2.SetTenantEgressPolicyRequest(
        tenant_id=tenant, policy=_policy(allow or [], file, no_rules)
    )
    with admin_client(conn, token) as (stub, md):
        _answer(stub.SetTenantEgressPolicy(request, metadata=md), tenant, output)


@app.command()
@connected
def clear(
    tenant: TenantArgument,
    *,
    conn: Connection,
    token: AdminTokenOption = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """Drop a tenant's own policy: the operator's default applies again."""
    request = admin_pb2.SetTenantEgressPolicyRequest(tenant_id=tenant, use_default=True)
    with admin_client(conn, token) as (stub, md):
        _answer(stub.SetTenantEgressPolicy(request, metadata=md), tenant, output)


@app.command()
@connected
def show(
    tenant: TenantArgument,
    *,
    conn: Connection,
    token: AdminTokenOption = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """Show the policy in force for a tenant."""
    request = admin_pb2.GetTenantEgressPolicyRequest(tenant_id=tenant)
    with admin_client(conn, token) as (stub, md):
        _answer(stub.GetTenantEgressPolicy(request, metadata=md), tenant, output)


@connected
def tenant_view(
    *,
    conn: Connection,
    token: TokenOption = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """Show your tenant's egress policy (set by an admin): the non-public addresses your
    targets may reach."""
    with jobs_client(conn, token) as (stub, md):
        answer = stub.GetEgressPolicy(job_service_pb2.GetEgressPolicyRequest(), metadata=md)
    _answer(answer, "egress policy", output)
