"""The CLI's connection options: when TLS is on, and that every command dialling the API
offers them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer

from sundial.cli._client import Connection
from sundial.cli.app import app
from sundial.core.tls import ClientTls

CONNECTION_OPTIONS = {"--api", "--tls", "--ca-file", "--cert-file", "--key-file", "--server-name"}


def test_plaintext_unless_asked() -> None:
    assert Connection.from_options("api:443") == Connection("api:443")
    assert Connection.from_options("api:443", tls=False, ca_file=Path("ca.crt")).tls is None


def test_tls_with_the_flag_a_ca_file_or_a_client_certificate() -> None:
    assert Connection.from_options("api:443", tls=True).tls == ClientTls()
    assert Connection.from_options("api:443", ca_file=Path("ca.crt")).tls == ClientTls(
        ca_file=Path("ca.crt")
    )
    mutual = Connection.from_options(
        "api:443", cert_file=Path("c.crt"), key_file=Path("c.key"), server_name="api.internal"
    )
    assert mutual.tls == ClientTls(
        cert_file=Path("c.crt"), key_file=Path("c.key"), server_name="api.internal"
    )


def test_a_client_certificate_needs_its_key() -> None:
    with pytest.raises(typer.Exit):
        Connection.from_options("api:443", cert_file=Path("c.crt"))


def _commands(group: Any, prefix: str = "") -> dict[str, Any]:
    """Every leaf command under a click group (Typer's own click), by its full name."""
    found: dict[str, Any] = {}
    for name, command in group.commands.items():
        if hasattr(command, "commands"):  # a group
            found.update(_commands(command, f"{prefix}{name} "))
        else:
            found[prefix + name] = command
    return found


def test_every_command_that_dials_the_api_takes_the_tls_options() -> None:
    root = typer.main.get_command(app)
    dialling = {}
    for name, command in _commands(root).items():
        options = {opt for param in command.params for opt in param.opts}
        if "--api" in options:
            dialling[name] = CONNECTION_OPTIONS - options
    assert {"jobs list", "runs get", "preview"} <= set(dialling)
    assert {name: missing for name, missing in dialling.items() if missing} == {}
