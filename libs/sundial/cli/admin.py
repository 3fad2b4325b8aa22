"""``sundial admin ...``: operator commands over AdminService (an admin token is needed).

``sundial admin tokens create`` prints the new token's secret on stdout and nothing else
there (its id, role and expiry go to stderr), so a script captures it with
``TOKEN=$(sundial admin tokens create ...)`` or pipes it straight into a secret store::

    sundial admin tokens create --role executor --description "executors, prod" \\
        | kubectl create secret generic sundial-ledger-token --from-file=token=/dev/stdin

The secret ends with a newline only when stdout is a terminal, so a pipe stores exactly
the token. ``-o json`` (or ``yaml``) prints the whole response (metadata and secret) on
stdout instead; ``--quiet`` drops the note on stderr. The secret is shown this once: the
API keeps only its hash. ``tenants create`` and ``tenants rotate-secret`` print a
tenant's new signing secret the same way.
"""

from __future__ import annotations

import enum
import sys
from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from google.protobuf import field_mask_pb2, timestamp_pb2

from sundial.cli import cluster, egress, keys
from sundial.cli._client import (
    AdminTokenOption,
    Connection,
    admin_client,
    all_pages,
    connected,
    enum_name,
    err_console,
    fail,
    parse_duration,
    parse_time,
    when,
)
from sundial.cli._output import Column, Output, OutputOption, emit, print_fields, print_table
from sundial.v1 import admin_pb2 as pb

app = typer.Typer(
    name="admin",
    help="Operate the cluster through AdminService (needs an admin token).",
    no_args_is_help=True,
)
tokens = typer.Typer(
    name="tokens",
    help="Issue, list and revoke API tokens (tenant, admin and executor roles).",
    no_args_is_help=True,
)
app.add_typer(tokens)
tenants = typer.Typer(
    name="tenants",
    help="Create, list and change tenants; rotate a tenant's signing secret.",
    no_args_is_help=True,
)
app.add_typer(tenants)
app.add_typer(cluster.app)
app.add_typer(egress.app)
app.add_typer(keys.identity_keys)
app.add_typer(keys.secrets)


class Role(enum.StrEnum):
    """What a token may do (``TokenRole`` on the wire)."""

    EXECUTOR = "executor"
    ADMIN = "admin"
    TENANT = "tenant"


class Scope(enum.StrEnum):
    """What a tenant token may do (``TokenScope`` on the wire)."""

    READ = "read"
    WRITE = "write"
    MANAGE = "manage"


_SCOPES = {
    Scope.READ: pb.TOKEN_SCOPE_READ,
    Scope.WRITE: pb.TOKEN_SCOPE_WRITE,
    Scope.MANAGE: pb.TOKEN_SCOPE_MANAGE,
}

_ROLES = {
    Role.EXECUTOR: pb.TOKEN_ROLE_EXECUTOR,
    Role.ADMIN: pb.TOKEN_ROLE_ADMIN,
    Role.TENANT: pb.TOKEN_ROLE_TENANT,
}


def _expiry(text: str) -> timestamp_pb2.Timestamp:
    """``30d``/``12h`` from now, or an ISO 8601 instant (durations hold no ``-`` or ``:``)."""
    if "-" in text or ":" in text:
        return parse_time(text, "--expires")
    at = timestamp_pb2.Timestamp()
    at.FromDatetime(datetime.now(UTC) + parse_duration(text, "--expires").ToTimedelta())
    return at


def _token_rows(token: pb.ApiToken) -> list[tuple[str, str]]:
    return [
        ("token id", token.token_id),
        ("role", enum_name(token.role, pb.TokenRole, "TOKEN_ROLE_")),
        ("tenant", token.tenant_id or "-"),
        ("description", token.description),
        ("prefix", token.prefix),
        (
            "scopes",
            ",".join(enum_name(s, pb.TokenScope, "TOKEN_SCOPE_") for s in token.scopes) or "-",
        ),
        ("expires", when(token.expire_time, set_=token.HasField("expire_time"))),
    ]


@tokens.command()
@connected
def create(
    *,
    role: Annotated[Role, typer.Option(help="What the token may do.", show_default=False)],
    description: Annotated[
        str, typer.Option(help="Who or what it is for (1-200 chars).", show_default=False)
    ],
    tenant: Annotated[
        str, typer.Option(help="The tenant a tenant token acts for (--role tenant only).")
    ] = "",
    expires: Annotated[
        str,
        typer.Option(help="Lifetime (30d, 12h) or an ISO 8601 instant; default: never."),
    ] = "",
    scope: Annotated[
        list[Scope] | None,
        typer.Option(
            help="What a tenant token may do (repeat: --scope read --scope write); "
            "default: read, write and manage."
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No note on stderr.")] = False,
    conn: Connection,
    token: AdminTokenOption = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """Issue a token and print its secret (once) on stdout; details go to stderr."""
    if role is Role.TENANT and not tenant:
        fail("--tenant is required with --role tenant")
    if role is not Role.TENANT and tenant:
        fail(f"--tenant is only for --role tenant (an {role} token has no tenant)")
    if role is not Role.TENANT and scope:
        fail(f"--scope is only for --role tenant (an {role} token has no scopes)")
    request = pb.CreateApiTokenRequest(
        tenant_id=tenant,
        role=_ROLES[role],
        description=description,
        scopes=[_SCOPES[s] for s in scope or ()],
    )
    if expires:
        request.expire_time.CopyFrom(_expiry(expires))
    with admin_client(conn, token) as (stub, md):
        response = stub.CreateApiToken(request, metadata=md)
    if output in (Output.JSON, Output.YAML):
        emit(response, output, table=lambda _wide: None, names=list)
        return
    if output is Output.NAME:
        typer.echo(response.token.token_id)
        return
    if not quiet:
        lines = [f"{key}: {value}" for key, value in _token_rows(response.token)]
        err_console.print(
            "\n".join(["issued a token; its secret (stdout) is shown only this once", *lines]),
            highlight=False,
            soft_wrap=True,
            markup=False,
        )
    sys.stdout.write(response.secret + ("\n" if sys.stdout.isatty() else ""))
    sys.stdout.flush()


@tokens.command("list")
@connected
def list_tokens(
    *,
    tenant: Annotated[str, typer.Option(help="Only this tenant's tokens.")] = "",
    include_revoked: Annotated[
        bool, typer.Option("--include-revoked", help="Also revoked and expired tokens.")
    ] = False,
    conn: Connection,
    token: AdminTokenOption = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """List tokens, newest first (never their secrets)."""
    request = pb.ListApiTokensRequest(tenant_id=tenant, include_revoked=include_revoked)
    with admin_client(conn, token) as (stub, md):
        listed = all_pages(
            lambda r: stub.ListApiTokens(r, metadata=md),
            request,
            pb.ListApiTokensResponse(),
            "tokens",
        )

    def table(wide: bool) -> None:
        print_table(
            _TOKEN_COLUMNS,
            [
                (
                    item.token_id,
                    enum_name(item.role, pb.TokenRole, "TOKEN_ROLE_"),
                    item.tenant_id or "-",
                    item.description,
                    item.prefix,
                    when(item.create_time, relative=False),
                    when(item.expire_time, set_=item.HasField("expire_time"), relative=False),
                    when(item.last_used_time, set_=item.HasField("last_used_time"), relative=False),
                    when(item.revoke_time, set_=item.HasField("revoke_time"), relative=False),
                )
                for item in listed.tokens
            ],
            wide=wide,
        )

    emit(listed, output, table=table, names=lambda: [t.token_id for t in listed.tokens])


_TOKEN_COLUMNS = (
    Column("token id"),
    Column("role"),
    Column("tenant", 1),
    Column("description", 3),
    Column("prefix", 2),
    Column("created", 4, wide=True),
    Column("expires", 4),
    Column("last used", 5, wide=True),
    Column("revoked", 4),
)


@tokens.command()
@connected
def revoke(
    token_id: Annotated[
        str, typer.Argument(help="The token's id (from list).", show_default=False)
    ],
    *,
    conn: Connection,
    token: AdminTokenOption = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """Revoke a token: it stops working at once (revoking it again changes nothing)."""
    with admin_client(conn, token) as (stub, md):
        response = stub.RevokeApiToken(pb.RevokeApiTokenRequest(token_id=token_id), metadata=md)
    revoked = response.token
    emit(
        response,
        output,
        table=lambda _wide: typer.echo(
            f"revoked {revoked.token_id} ({revoked.prefix}..., {revoked.description})"
        ),
        names=lambda: [revoked.token_id],
    )


# --- tenants ----------------------------------------------------------------------------

TenantId = Annotated[str, typer.Argument(help="The tenant's id.", show_default=False)]
MaxJobs = Annotated[int, typer.Option(help="Quota: most jobs (0: the cluster default).")]
MaxConcurrent = Annotated[
    int, typer.Option(help="Quota: most runs RUNNING at once (0: the cluster default).")
]


def print_tenant(tenant: pb.Tenant) -> None:
    secrets = [
        f"{s.secret_id} (since {s.create_time.ToJsonString()}"
        + (f", until {s.expire_time.ToJsonString()})" if s.HasField("expire_time") else ")")
        for s in tenant.signing_secrets
    ]
    print_fields(
        f"tenant {tenant.tenant_id}",
        [
            ("display name", tenant.display_name),
            ("max jobs", str(tenant.quotas.max_jobs)),
            ("max concurrent runs", str(tenant.quotas.max_concurrent_runs)),
            ("max calendars", str(tenant.quotas.max_calendars or "default")),
            (
                "max waiting requested runs",
                str(tenant.quotas.max_waiting_requested_runs or "default"),
            ),
            ("revisions per job", str(tenant.quotas.revisions_per_job or "default")),
            ("fair weight", str(tenant.quotas.fair_weight)),
            ("signing secrets", "; ".join(secrets) or "-"),
            ("created", when(tenant.create_time, relative=False)),
            ("updated", when(tenant.update_time, relative=False)),
        ],
    )


def _emit_tenant(response: Any, output: Output) -> None:
    tenant = response.tenant
    emit(
        response, output, table=lambda _wide: print_tenant(tenant), names=lambda: [tenant.tenant_id]
    )


def _secret_out(response: Any, output: Output, what: str) -> None:
    """A response carrying a signing secret: the secret alone on stdout (no newline
    into a pipe) and the tenant on stderr, as ``tokens create`` does."""
    if output in (Output.JSON, Output.YAML):
        emit(response, output, table=lambda _wide: None, names=list)
        return
    err_console.print(
        f"{what} for tenant {response.tenant.tenant_id}; the signing secret (stdout) is "
        "shown only this once",
        highlight=False,
        markup=False,
    )
    sys.stdout.write(response.signing_secret + ("\n" if sys.stdout.isatty() else ""))
    sys.stdout.flush()


@tenants.command("create")
@connected
def create_tenant(
    tenant_id: TenantId,
    *,
    display_name: Annotated[str, typer.Option(help="Its name for people (default: the id).")] = "",
    max_jobs: MaxJobs = 0,
    max_concurrent_runs: MaxConcurrent = 0,
    conn: Connection,
    token: AdminTokenOption = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """Create a tenant and print its first signing secret (once) on stdout."""
    tenant = pb.Tenant(
        tenant_id=tenant_id,
        display_name=display_name or tenant_id,
        quotas=pb.Quotas(max_jobs=max_jobs, max_concurrent_runs=max_concurrent_runs),
    )
    with admin_client(conn, token) as (stub, md):
        response = stub.CreateTenant(pb.CreateTenantRequest(tenant=tenant), metadata=md)
    _secret_out(response, output, "created")


@tenants.command("get")
@connected
def get_tenant(
    tenant_id: TenantId,
    *,
    conn: Connection,
    token: AdminTokenOption = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """Show a tenant: quotas and signing secrets (metadata only)."""
    with admin_client(conn, token) as (stub, md):
        response = stub.GetTenant(pb.GetTenantRequest(tenant_id=tenant_id), metadata=md)
    _emit_tenant(response, output)


@tenants.command("list")
@connected
def list_tenants(
    *,
    conn: Connection,
    token: AdminTokenOption = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """List every tenant."""
    with admin_client(conn, token) as (stub, md):
        listed = all_pages(
            lambda r: stub.ListTenants(r, metadata=md),
            pb.ListTenantsRequest(),
            pb.ListTenantsResponse(),
            "tenants",
        )

    def table(wide: bool) -> None:
        print_table(
            (
                Column("tenant id"),
                Column("display name", 2),
                Column("max jobs", 1),
                Column("max concurrent runs", 1),
                Column("created", 3, wide=True),
            ),
            [
                (
                    t.tenant_id,
                    t.display_name,
                    str(t.quotas.max_jobs),
                    str(t.quotas.max_concurrent_runs),
                    when(t.create_time, relative=False),
                )
                for t in listed.tenants
            ],
            wide=wide,
        )

    emit(listed, output, table=table, names=lambda: [t.tenant_id for t in listed.tenants])


@tenants.command("update")
@connected
def update_tenant(
    tenant_id: TenantId,
    *,
    display_name: Annotated[str, typer.Option(help="A new name for people.")] = "",
    max_jobs: Annotated[int | None, typer.Option(help="Quota: most jobs (0: default).")] = None,
    max_concurrent_runs: Annotated[
        int | None, typer.Option(help="Quota: most runs RUNNING at once (0: default).")
    ] = None,
    max_calendars: Annotated[
        int | None, typer.Option(help="Quota: most calendars (0: the operator's default).")
    ] = None,
    max_waiting_requested_runs: Annotated[
        int | None,
        typer.Option(
            help="Quota: most triggered/backfilled runs waiting to start (0: the default)."
        ),
    ] = None,
    revisions_per_job: Annotated[
        int | None, typer.Option(help="Revisions kept per job (0: the operator's default).")
    ] = None,
    fair_weight: Annotated[
        int | None,
        typer.Option(
            help="Its weight in sharing executors when they are contended, 1-100 (0: the "
            "operator's default, SUNDIAL_FAIR_WEIGHT)."
        ),
    ] = None,
    conn: Connection,
    token: AdminTokenOption = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """Change a tenant's display name or quotas (only the options given)."""
    tenant = pb.Tenant(tenant_id=tenant_id, display_name=display_name)
    paths = ["display_name"] if display_name else []
    for name, value in (
        ("max_jobs", max_jobs),
        ("max_concurrent_runs", max_concurrent_runs),
        ("max_calendars", max_calendars),
        ("max_waiting_requested_runs", max_waiting_requested_runs),
        ("revisions_per_job", revisions_per_job),
        ("fair_weight", fair_weight),
    ):
        if value is not None:
            setattr(tenant.quotas, name, value)
            paths.append(f"quotas.{name}")
    if not paths:
        fail("nothing to change: give --display-name or a quota option (see --help)")
    request = pb.UpdateTenantRequest(
        tenant=tenant, update_mask=field_mask_pb2.FieldMask(paths=paths)
    )
    with admin_client(conn, token) as (stub, md):
        response = stub.UpdateTenant(request, metadata=md)
    _emit_tenant(response, output)


@tenants.command("rotate-secret")
@connected
def rotate_secret(
    tenant_id: TenantId,
    *,
    overlap: Annotated[
        str,
        typer.Option(help="How long the old secret stays valid, e.g. 24h (default: the API's)."),
    ] = "",
    conn: Connection,
    token: AdminTokenOption = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """Issue a new signing secret (printed once on stdout); the old one keeps signing
    and verifying until the overlap ends, so targets can switch without a gap."""
    request = pb.RotateSigningSecretRequest(tenant_id=tenant_id)
    if overlap:
        request.overlap.CopyFrom(parse_duration(overlap, "--overlap"))
    with admin_client(conn, token) as (stub, md):
        response = stub.RotateSigningSecret(request, metadata=md)
    _secret_out(response, output, "rotated")
