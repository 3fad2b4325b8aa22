"""``sundial signing-secret rotate``: a tenant rotates its own signing secret.

The new secret is printed once on stdout and nothing else there (without a newline into
a pipe), the note on stderr, as ``sundial admin tokens create`` does, so a script stores
it straight away::

    sundial signing-secret rotate --overlap 1h | vault kv put secret/sundial signing=-

The current secrets keep signing for the overlap: deploy the new one to your targets
within it.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from sundial.cli._client import (
    Connection,
    TokenOption,
    connected,
    err_console,
    jobs_client,
    parse_duration,
)
from sundial.cli._output import Output, OutputOption, emit
from sundial.v1 import job_service_pb2 as pb

app = typer.Typer(
    name="signing-secret",
    help="Your tenant's signing secret (what Sundial-Signature is made with).",
    no_args_is_help=True,
)


@app.command()
@connected
def rotate(
    *,
    overlap: Annotated[
        str, typer.Option(help="How long the current secrets keep signing, e.g. 1h (24h).")
    ] = "",
    conn: Connection,
    token: TokenOption = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """Issue a new signing secret and print it (once) on stdout."""
    request = pb.RotateOwnSigningSecretRequest()
    if overlap:
        request.overlap.CopyFrom(parse_duration(overlap, "--overlap"))
    with jobs_client(conn, token) as (stub, md):
        response = stub.RotateOwnSigningSecret(request, metadata=md)
    if output is not Output.TABLE and output is not Output.WIDE:
        emit(response, output, table=lambda _wide: None, names=lambda: [response.secret_id])
        return
    until = (
        response.previous_expire_time.ToJsonString()
        if response.HasField("previous_expire_time")
        else "now"
    )
    err_console.print(
        f"new signing secret {response.secret_id} (stdout, shown only this once); the "
        f"previous ones keep signing until {until}",
        highlight=False,
        markup=False,
    )
    sys.stdout.write(response.signing_secret + ("\n" if sys.stdout.isatty() else ""))
    sys.stdout.flush()
