"""``sundial secrets ...``: a tenant's write-only secrets (secret.proto), which target
headers reference as ``${secret:<name>}``. Needs a token with the ``manage`` scope.

A value is read from standard input or a file, never from the command line (where it
would stay in the shell's history and the process list), and is never printed::

    vault kv get -field=token secret/crm | sundial secrets create crm-token
    sundial secrets update crm-token --from-file ./token.txt
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from sundial.cli._client import Connection, TokenOption, connected, fail, jobs_client
from sundial.cli._output import Output, OutputOption, emit
from sundial.v1 import secret_pb2 as pb

app = typer.Typer(
    name="secrets",
    help="Your tenant's write-only secrets, referenced by targets as ${secret:<name>}.",
    no_args_is_help=True,
)

Name = Annotated[str, typer.Argument(help="The secret's name (a-z, 0-9, '-').")]
FromFile = Annotated[
    Path | None, typer.Option(help="Read the value from this file (default: standard input).")
]
Description = Annotated[str, typer.Option(help="Free text for people.")]


def _value(from_file: Path | None) -> str:
    """The value, from the file or stdin, without its trailing new line."""
    text = from_file.read_text() if from_file is not None else sys.stdin.read()
    value = text.rstrip("\r\n")
    if not value:
        fail("no value: pipe it in, or name a file with --from-file")
    return value


def _show(secret: pb.Secret) -> None:
    typer.echo(f"{secret.name}: version {secret.version}")


@app.command()
@connected
def create(
    name: Name,
    *,
    from_file: FromFile = None,
    description: Description = "",
    conn: Connection,
    token: TokenOption = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """Store a secret (its value from stdin or --from-file)."""
    secret = pb.Secret(name=name, value=_value(from_file), description=description)
    with jobs_client(conn, token) as (stub, md):
        response = stub.CreateSecret(pb.CreateSecretRequest(secret=secret), metadata=md)
    emit(response, output, table=lambda _w: _show(response.secret), names=lambda: [name])


@app.command()
@connected
def update(
    name: Name,
    *,
    from_file: FromFile = None,
    description: Description = "",
    expected_version: Annotated[int, typer.Option(help="Only at this version (0: any).")] = 0,
    conn: Connection,
    token: TokenOption = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """Replace a secret's value; targets use it from their next attempt."""
    secret = pb.Secret(name=name, value=_value(from_file), description=description)
    request = pb.UpdateSecretRequest(secret=secret, expected_version=expected_version)
    with jobs_client(conn, token) as (stub, md):
        response = stub.UpdateSecret(request, metadata=md)
    emit(response, output, table=lambda _w: _show(response.secret), names=lambda: [name])


@app.command("list")
@connected
def list_secrets(
    *, conn: Connection, token: TokenOption = "", output: OutputOption = Output.TABLE
) -> None:
    """List the secrets' names and versions (never a value)."""
    listed = pb.ListSecretsResponse()
    with jobs_client(conn, token) as (stub, md):
        page = ""
        while True:
            answer = stub.ListSecrets(pb.ListSecretsRequest(page_token=page), metadata=md)
            listed.secrets.extend(answer.secrets)
            page = answer.next_page_token
            if not page:
                break

    def table(_wide: bool) -> None:
        for secret in listed.secrets:
            _show(secret)

    emit(listed, output, table=table, names=lambda: [s.name for s in listed.secrets])


@app.command()
@connected
def delete(
    name: Name,
    *,
    expected_version: Annotated[int, typer.Option(help="Only at this version (0: any).")] = 0,
    conn: Connection,
    token: TokenOption = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """Delete a secret no target references."""
    request = pb.DeleteSecretRequest(name=name, expected_version=expected_version)
    with jobs_client(conn, token) as (stub, md):
        response = stub.DeleteSecret(request, metadata=md)
    emit(response, output, table=lambda _wide: typer.echo(f"{name}: deleted"), names=lambda: [name])
