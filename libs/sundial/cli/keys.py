"""``sundial admin identity-keys ...`` and ``sundial admin secrets rewrap``: the keys
Sundial holds for its operator (docs/design.md section 7, "Identity tokens" and
"Secrets").

Rotating the identity-token signing key (the new one signs at once; the old ones stay
in the JWKS for the overlap, so every token they signed expires first)::

    sundial admin identity-keys rotate --overlap 2h
    sundial admin identity-keys list

Rotating the key-encryption key: list the new key first in ``SUNDIAL_SECRET_KEYS``,
keep the old one, restart the API and the schedulers, then::

    sundial admin secrets rewrap     # until nothing remains; then drop the old key
"""

from __future__ import annotations

from typing import Annotated

import typer

from sundial.cli._client import (
    AdminTokenOption,
    Connection,
    admin_client,
    connected,
    fail,
    parse_duration,
    when,
)
from sundial.cli._output import Column, Output, OutputOption, emit, print_fields, print_table
from sundial.v1 import admin_pb2 as pb

identity_keys = typer.Typer(
    name="identity-keys",
    help="The keys that sign per-call identity tokens (published at /.well-known/jwks.json).",
    no_args_is_help=True,
)
secrets = typer.Typer(
    name="secrets",
    help="Tenant secrets at rest: re-wrap them after a key-encryption-key rotation.",
    no_args_is_help=True,
)

# Enough rewrap calls for a million data keys; each call re-wraps up to 1,000.
_MAX_REWRAP_CALLS = 1000


@identity_keys.command("rotate")
@connected
def rotate(
    *,
    overlap: Annotated[
        str,
        typer.Option(
            help="How long the previous keys stay published, 1h to 30d (default: 2h, "
            "longer than any token lives)."
        ),
    ] = "",
    conn: Connection,
    token: AdminTokenOption = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """Make a new identity-token signing key: it signs every token from now on."""
    request = pb.RotateIdentityKeyRequest()
    if overlap:
        request.overlap.CopyFrom(parse_duration(overlap, "--overlap"))
    with admin_client(conn, token) as (stub, md):
        response = stub.RotateIdentityKey(request, metadata=md)
    emit(
        response,
        output,
        table=lambda _w: typer.echo(f"identity key {response.kid} signs from now on"),
        names=lambda: [response.kid],
    )


_KEY_COLUMNS = (
    Column("kid"),
    Column("state"),
    Column("created", 2),
    Column("retires", 1),
    Column("sealed under", 3),
    Column("algorithm", 4, wide=True),
)


def _state(key: pb.IdentityKey) -> str:
    if key.signing:
        return "signing"
    return "published" if key.published else "retired"


@identity_keys.command("list")
@connected
def list_keys(
    *,
    conn: Connection,
    token: AdminTokenOption = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """The stored keys, newest first: which signs, which are published, until when.

    The "sealed under" column is the key-encryption key of each private key (after
    ``sundial admin secrets rewrap``, the primary one for every key not retired)."""
    with admin_client(conn, token) as (stub, md):
        listed = stub.ListIdentityKeys(pb.ListIdentityKeysRequest(), metadata=md)

    def table(wide: bool) -> None:
        print_table(
            _KEY_COLUMNS,
            [
                (
                    key.kid,
                    _state(key),
                    when(key.create_time, relative=False),
                    when(key.retire_time, set_=key.HasField("retire_time"), relative=False),
                    key.key_id,
                    key.algorithm,
                )
                for key in listed.keys
            ],
            wide=wide,
        )

    emit(listed, output, table=table, names=lambda: [k.kid for k in listed.keys])


@secrets.command("rewrap")
@connected
def rewrap(
    *,
    conn: Connection,
    token: AdminTokenOption = "",
    output: OutputOption = Output.TABLE,
) -> None:
    """Re-wrap secrets and identity keys under the primary key-encryption key.

    Calls RewrapSecrets until nothing remains; then the old key can be dropped."""
    total = pb.RewrapSecretsResponse()
    with admin_client(conn, token) as (stub, md):
        for _ in range(_MAX_REWRAP_CALLS):
            answer = stub.RewrapSecrets(pb.RewrapSecretsRequest(), metadata=md)
            total.rewrapped += answer.rewrapped
            total.identity_keys += answer.identity_keys
            total.remaining = answer.remaining
            total.key_id = answer.key_id
            if not answer.remaining or not answer.rewrapped:
                break

    def table(_wide: bool) -> None:
        print_fields(
            f"re-wrapped under {total.key_id}",
            [
                ("data keys", str(total.rewrapped)),
                ("of them identity keys", str(total.identity_keys)),
                ("remaining", str(total.remaining)),
            ],
        )

    emit(total, output, table=table, names=lambda: [total.key_id])
    if total.remaining:  # another caller holds the rest (SKIP LOCKED): not done yet
        fail(f"{total.remaining} data keys remain under another key: run it again")
