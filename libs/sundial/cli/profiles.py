"""Named connection profiles in a config file, and ``sundial profile ...`` to manage them.

The file is ``$SUNDIAL_CONFIG``, else ``$XDG_CONFIG_HOME/sundial/config.yaml`` (default
``~/.config/sundial/config.yaml``), written with mode 0600 because it may hold tokens::

    current: prod
    profiles:
      prod:
        api: sundial.example.com:443
        token: ...
        tls: true
        ca_file: /etc/ssl/sundial-ca.pem
        server_name: api.sundial.internal

A command uses ``--profile NAME`` (env ``SUNDIAL_PROFILE``), else ``current``, else none;
an option or environment variable given for a setting wins over the profile's value.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from sundial.cli._output import Column, Output, OutputOption, print_fields, print_table

__all__ = ["Profile", "app", "config_path", "load_profile"]

app = typer.Typer(
    name="profile", help="Named API connections (address, token, TLS).", no_args_is_help=True
)


@dataclass(frozen=True)
class Profile:
    """One named connection."""

    api: str = ""
    token: str = ""
    tls: bool | None = None
    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""
    server_name: str = ""


def config_path() -> Path:
    """Where the profiles are kept (see the module docstring)."""
    if explicit := os.environ.get("SUNDIAL_CONFIG"):
        return Path(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "sundial" / "config.yaml"


def _read() -> dict[str, Any]:
    path = config_path()
    try:
        loaded = yaml.safe_load(path.read_text()) or {}
    except FileNotFoundError:
        return {"profiles": {}}
    except (OSError, yaml.YAMLError) as exc:
        raise typer.BadParameter(f"cannot read {path}: {exc}") from exc
    if not isinstance(loaded, dict) or not isinstance(loaded.get("profiles", {}), dict):
        raise typer.BadParameter(f"{path}: expected a mapping with a `profiles` mapping")
    loaded.setdefault("profiles", {})
    return loaded


def _write(config: dict[str, Any]) -> None:
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        yaml.safe_dump(config, file, sort_keys=False)
    path.chmod(0o600)


def load_profile(name: str) -> Profile | None:
    """Profile ``name``, or the current one when ``name`` is empty (None: no profile).

    Raises:
        typer.BadParameter: The file does not parse, or names no such profile.
    """
    config = _read()
    chosen = name or config.get("current") or ""
    if not chosen:
        return None
    entry = config["profiles"].get(chosen)
    if not isinstance(entry, dict):
        raise typer.BadParameter(f"no profile {chosen!r} in {config_path()}")
    known = {f.name for f in fields(Profile)}
    unknown = set(entry) - known
    if unknown:
        raise typer.BadParameter(f"profile {chosen!r}: unknown settings {sorted(unknown)}")
    return Profile(**entry)


@app.command("set")
def set_profile(
    name: Annotated[str, typer.Argument(help="The profile's name.", show_default=False)],
    *,
    api: Annotated[str, typer.Option(help="API address host:port.")] = "",
    token: Annotated[str, typer.Option(help="The API token it uses.")] = "",
    token_file: Annotated[Path | None, typer.Option(help="Read the token from this file.")] = None,
    tls: Annotated[bool | None, typer.Option("--tls/--no-tls", help="Dial over TLS.")] = None,
    ca_file: Annotated[str, typer.Option(help="PEM CA certificates for the API.")] = "",
    cert_file: Annotated[str, typer.Option(help="PEM client certificate (mTLS).")] = "",
    key_file: Annotated[str, typer.Option(help="Its key.")] = "",
    server_name: Annotated[str, typer.Option(help="Verify the API as this name.")] = "",
    use: Annotated[bool, typer.Option("--use", help="Make it the current profile.")] = False,
) -> None:
    """Create a profile or change the settings given (the others stay)."""
    config = _read()
    current = config["profiles"].get(name) or {}
    given: dict[str, Any] = {
        "api": api,
        "token": token_file.read_text().strip() if token_file else token,
        "tls": tls,
        "ca_file": ca_file,
        "cert_file": cert_file,
        "key_file": key_file,
        "server_name": server_name,
    }
    merged = {**current, **{k: v for k, v in given.items() if v not in ("", None)}}
    config["profiles"][name] = merged
    if use or not config.get("current"):
        config["current"] = name
    _write(config)
    typer.echo(f"profile {name} saved in {config_path()}")


@app.command("use")
def use_profile(
    name: Annotated[str, typer.Argument(help="The profile to use from now on.")],
) -> None:
    """Make a profile the current one."""
    config = _read()
    if name not in config["profiles"]:
        raise typer.BadParameter(f"no profile {name!r} in {config_path()}")
    config["current"] = name
    _write(config)
    typer.echo(f"using profile {name}")


@app.command("list")
def list_profiles(output: OutputOption = Output.TABLE) -> None:
    """The profiles and which is current (tokens are never shown)."""
    config = _read()
    current = config.get("current")
    rows = []
    for name, entry in sorted(config["profiles"].items()):
        profile = Profile(**entry)
        rows.append((name, "*" if name == current else "", profile.api, _tls_text(profile)))
    if output is Output.NAME:
        for row in rows:
            typer.echo(row[0])
        return
    if output in (Output.JSON, Output.YAML):
        shown = {
            name: {**asdict(Profile(**entry)), "token": "(set)" if entry.get("token") else ""}
            for name, entry in config["profiles"].items()
        }
        document = {"current": current, "profiles": shown}
        if output is Output.JSON:
            typer.echo(json.dumps(document, indent=2))
        else:
            typer.echo(yaml.safe_dump(document, sort_keys=False).rstrip())
        return
    print_table((Column("name"), Column("current"), Column("api"), Column("tls", 1)), rows)


def _tls_text(profile: Profile) -> str:
    if profile.tls is False:
        return "no"
    if profile.tls or profile.ca_file or profile.cert_file:
        return "mtls" if profile.cert_file else "yes"
    return "no"


@app.command("show")
def show_profile(
    name: Annotated[str, typer.Argument(help="The profile (default: the current one).")] = "",
) -> None:
    """One profile's settings (the token as set or not, never its value)."""
    profile = load_profile(name)
    if profile is None:
        typer.echo("no current profile; create one with `sundial profile set NAME --api ...`")
        return
    print_fields(
        f"profile {name or _read().get('current')}",
        [
            (key, ("(set)" if value else "-") if key == "token" else str(value or "-"))
            for key, value in asdict(profile).items()
        ],
    )
