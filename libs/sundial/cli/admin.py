"""``sundial admin ...``: operator commands over AdminService (an admin token is needed).

``sundial admin tokens create`` prints the new token's secret on stdout and nothing else
there (its id, role and expiry go to stderr), so a script captures it with
``TOKEN=$(sundial admin tokens create ...)`` or pipes it straight into a secret store::

    sundial admin tokens create --role executor --description "executors, prod" \\
        | kubectl create secret generic sundial-ledger-token --from-file=token=/dev/stdin

The secret ends with a newline only when stdout is a terminal, so a pipe stores exactly
the token. ``--json`` prints the whole response (metadata and secret) on stdout instead;
``--quiet`` drops the note on stderr. The secret is shown this once: the API keeps only
its hash.
"""

from __future__ import annotations

import enum
import sys
from datetime import UTC, datetime
from typing import Annotated

import typer
from google.protobuf import timestamp_pb2
from rich.table import Table

from sundial.cli import egress
from sundial.cli._client import (
    AdminTokenOption,
    Connection,
    Json,
    admin_client,
    connected,
    console,
    enum_name,
    err_console,
    fail,
    parse_duration,
    parse_time,
    print_json,
    when,
)
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
app.add_typer(egress.app)


class Role(enum.StrEnum):
    """What a token may do (``TokenRole`` on the wire)."""

    EXECUTOR = "executor"
    ADMIN = "admin"
    TENANT = "tenant"


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
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No note on stderr.")] = False,
    conn: Connection,
    token: AdminTokenOption = "",
    json: Annotated[
        bool, typer.Option("--json", help="Print the whole response, secret included, as JSON.")
    ] = False,
) -> None:
    """Issue a token and print its secret (once) on stdout; details go to stderr."""
    if role is Role.TENANT and not tenant:
        fail("--tenant is required with --role tenant")
    if role is not Role.TENANT and tenant:
        fail(f"--tenant is only for --role tenant (an {role} token has no tenant)")
    request = pb.CreateApiTokenRequest(tenant_id=tenant, role=_ROLES[role], description=description)
    if expires:
        request.expire_time.CopyFrom(_expiry(expires))
    with admin_client(conn, token) as (stub, md):
        response = stub.CreateApiToken(request, metadata=md)
    if json:
        print_json(response)
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
    json: Json = False,
) -> None:
    """List tokens, newest first (never their secrets)."""
    request = pb.ListApiTokensRequest(
        tenant_id=tenant, include_revoked=include_revoked, page_size=1000
    )
    listed = pb.ListApiTokensResponse()
    with admin_client(conn, token) as (stub, md):
        while True:
            page = stub.ListApiTokens(request, metadata=md)
            listed.tokens.extend(page.tokens)
            if not page.next_page_token:
                break
            request.page_token = page.next_page_token
    if json:
        print_json(listed)
        return
    table = Table(title="API tokens", title_justify="left")
    columns = ("token id", "role", "tenant", "description", "prefix", "created", "expires")
    for column in (*columns, "last used", "revoked"):
        table.add_column(column)
    for item in listed.tokens:
        table.add_row(
            item.token_id,
            enum_name(item.role, pb.TokenRole, "TOKEN_ROLE_"),
            item.tenant_id or "-",
            item.description,
            item.prefix,
            when(item.create_time),
            when(item.expire_time, set_=item.HasField("expire_time")),
            when(item.last_used_time, set_=item.HasField("last_used_time")),
            when(item.revoke_time, set_=item.HasField("revoke_time")),
        )
    console.print(table)


@tokens.command()
@connected
def revoke(
    token_id: Annotated[
        str, typer.Argument(help="The token's id (from list).", show_default=False)
    ],
    *,
    conn: Connection,
    token: AdminTokenOption = "",
    json: Json = False,
) -> None:
    """Revoke a token: it stops working at once (revoking it again changes nothing)."""
    with admin_client(conn, token) as (stub, md):
        response = stub.RevokeApiToken(pb.RevokeApiTokenRequest(token_id=token_id), metadata=md)
    if json:
        print_json(response)
        return
    revoked = response.token
    console.print(
        f"revoked {revoked.token_id} ({revoked.prefix}..., {revoked.description})",
        highlight=False,
    )
