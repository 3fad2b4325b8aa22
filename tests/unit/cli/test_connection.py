"""The CLI's connection options: when TLS is on, and that every command dialling the API
offers them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from sundial.cli._client import Connection
from sundial.cli.app import app
from sundial.core.tls import ClientTls

CONNECTION_OPTIONS = {
    "--api",
    "--tls",
    "--ca-file",
    "--cert-file",
    "--key-file",
    "--server-name",
    "--profile",
}


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
        if "--api" in options and not name.startswith("profile "):  # it saves one
            dialling[name] = CONNECTION_OPTIONS - options
    assert {"jobs list", "runs get", "admin cluster status"} <= set(dialling)
    assert {name: missing for name, missing in dialling.items() if missing} == {}


# Commands that print no API response: they start servers or manage the local config.
NO_OUTPUT_FORMAT = {"dev", "migrate", "profile set", "profile use", "profile show"}


def test_every_command_that_prints_a_response_takes_the_output_option() -> None:
    root = typer.main.get_command(app)
    commands = _commands(root)
    assert len(commands) > 25
    missing = {
        name
        for name, command in commands.items()
        if name not in NO_OUTPUT_FORMAT
        and not {"-o", "--output"} <= {opt for param in command.params for opt in param.opts}
    }
    assert missing == set()


def test_a_profile_fills_what_the_options_do_not_give(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUNDIAL_CONFIG", str(tmp_path / "sundial" / "config.yaml"))
    runner = CliRunner()
    for args in (
        ["profile", "set", "prod", "--api", "prod:443", "--token", "t-prod", "--tls"],
        ["profile", "set", "dev", "--api", "127.0.0.1:7000", "--token", "t-dev"],
    ):
        assert runner.invoke(app, args).exit_code == 0
    config = tmp_path / "sundial" / "config.yaml"
    assert config.stat().st_mode & 0o777 == 0o600  # it holds tokens
    # The first profile saved became the current one.
    assert Connection.from_options("") == Connection("prod:443", ClientTls(), "t-prod")
    assert Connection.from_options("", profile="dev") == Connection("127.0.0.1:7000", None, "t-dev")
    # An option given wins over the profile's value.
    assert Connection.from_options("other:1", tls=False).api == "other:1"
    assert Connection.from_options("other:1", tls=False).tls is None
    assert runner.invoke(app, ["profile", "use", "dev"]).exit_code == 0
    assert Connection.from_options("").api == "127.0.0.1:7000"
    listing = runner.invoke(app, ["profile", "list", "-o", "json"])
    assert listing.exit_code == 0 and "t-dev" not in listing.output  # never the token
    with pytest.raises(typer.Exit):
        Connection.from_options("", profile="missing")
