"""``sundial jobs ...``: create, list, inspect and operate jobs over gRPC.

One module per use, the commands registered here in the order ``--help`` lists them:
``_define`` (create, update), ``_read`` (list, get, slo, describe, preview), ``_bulk``
(count; the options by which pause, resume, delete and trigger act on many jobs),
``_operate`` (pause, resume, delete, trigger, backfill), ``_revisions`` (history,
rollback; the top-level ``sundial audit``); ``_options`` holds the options and what
they build, ``_show`` how a job, runs and fire times are shown.
"""

import typer

from sundial.cli.jobs._bulk import count
from sundial.cli.jobs._define import create, update
from sundial.cli.jobs._operate import backfill, delete, pause, resume, trigger
from sundial.cli.jobs._options import GrpcAddress, Header, Url, target_from_options
from sundial.cli.jobs._read import describe, get, list_jobs, preview_job, slo
from sundial.cli.jobs._revisions import audit, history, rollback
from sundial.cli.jobs._show import emit_job, emit_preview, print_runs, target_text

__all__ = [
    "GrpcAddress",
    "Header",
    "Url",
    "app",
    "audit",
    "emit_job",
    "emit_preview",
    "print_runs",
    "target_from_options",
    "target_text",
]

app = typer.Typer(name="jobs", help="Create, list, inspect and operate jobs.", no_args_is_help=True)

for _name, _command in (
    (None, create),
    (None, update),
    ("list", list_jobs),
    (None, count),
    (None, get),
    (None, slo),
    (None, describe),
    ("preview", preview_job),
    (None, pause),
    (None, resume),
    (None, delete),
    (None, trigger),
    (None, backfill),
    (None, history),
    (None, rollback),
):
    app.command(_name)(_command)
