"""The ``sundial`` Typer application; each command group lives in its own module."""

from __future__ import annotations

from typing import Annotated

import typer

from sundial.cli import (
    admin,
    apply,
    calendars,
    dev,
    egress,
    flow,
    jobs,
    migrate,
    notifications,
    preview,
    profiles,
    runs,
    secrets,
    vault,
)
from sundial.core.telemetry import service_version

app = typer.Typer(
    name="sundial",
    help="Sundial: a distributed cron scheduler. Run it locally, manage jobs and runs.",
    no_args_is_help=True,
    # --install-completion / --show-completion for bash, zsh, fish and PowerShell.
    add_completion=True,
)
app.command("dev")(dev.dev)
app.add_typer(jobs.app)
app.add_typer(runs.app)
app.add_typer(admin.app)
app.command("preview")(preview.preview)
app.command("audit")(jobs.audit)
app.command("egress")(egress.tenant_view)
app.command("migrate")(migrate.migrate)
app.command("apply")(apply.apply)
app.command("export")(apply.export)
app.add_typer(profiles.app)
app.add_typer(secrets.app)
app.add_typer(vault.app)
app.add_typer(calendars.app)
app.add_typer(notifications.app)
app.add_typer(flow.app)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"sundial {service_version()}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Sundial's command-line tool."""
