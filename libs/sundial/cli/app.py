"""The ``sundial`` Typer application; each command group lives in its own module."""

from __future__ import annotations

import typer

from sundial.cli import admin, apply, dev, jobs, migrate, preview, runs

app = typer.Typer(
    name="sundial",
    help="Sundial: a distributed cron scheduler. Run it locally, manage jobs and runs.",
    no_args_is_help=True,
    add_completion=False,
)
app.command("dev")(dev.dev)
app.add_typer(jobs.app)
app.add_typer(runs.app)
app.add_typer(admin.app)
app.command("preview")(preview.preview)
app.command("migrate")(migrate.migrate)
app.command("apply")(apply.apply)
app.command("export")(apply.export)


@app.callback()
def _root() -> None:
    """Sundial's command-line tool."""
