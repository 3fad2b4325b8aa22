"""How a command prints what it got: ``-o table|wide|json|yaml|name`` on every command.

- ``table`` (default): aligned plain text. On a terminal, columns are dropped from the
  right end of their priority order until the table fits the width; a value is never
  cut, so ids and times are always whole. Through a pipe (or in a file) every table
  column is printed, whatever the width, and nothing is styled: what a script greps.
- ``wide``: every column, the ``wide``-only ones too (and full error texts).
- ``json`` / ``yaml``: the whole response message, in the proto JSON mapping with the
  proto's field names (``job_id``), the same schema ``sundial apply -f`` reads.
- ``name``: one identifier per line (job ids, run keys, token ids), for ``xargs``.
"""

from __future__ import annotations

import enum
import shutil
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import typer
import yaml
from google.protobuf import json_format
from google.protobuf.message import Message

__all__ = [
    "Column",
    "Output",
    "OutputOption",
    "emit",
    "message_dict",
    "print_fields",
    "print_table",
]


class Output(enum.StrEnum):
    """What ``-o`` may name."""

    TABLE = "table"
    WIDE = "wide"
    JSON = "json"
    YAML = "yaml"
    NAME = "name"


OutputOption = Annotated[
    Output,
    typer.Option(
        "--output",
        "-o",
        help="table (fits the terminal, never cuts a value), wide (every column), json, "
        "yaml (the whole response) or name (ids only).",
        case_sensitive=False,
    ),
]

_GAP = "  "


@dataclass(frozen=True)
class Column:
    """A table column: its header, and how much it matters when the width is short."""

    header: str
    priority: int = 0
    """Lower is kept longer; the key columns (ids, times) are 0 and never dropped."""
    wide: bool = False
    """Shown only with ``-o wide``."""


def message_dict(message: Message) -> dict[str, Any]:
    """``message`` in the proto JSON mapping with proto field names."""
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


def emit(
    message: Message,
    output: Output,
    *,
    table: Callable[[bool], None],
    names: Callable[[], Iterable[str]],
) -> None:
    """Print ``message`` as ``output`` asks: ``table(wide)`` draws the human view,
    ``names()`` gives the identifiers for ``-o name``."""
    if output is Output.JSON:
        sys.stdout.write(
            json_format.MessageToJson(message, preserving_proto_field_name=True, indent=2) + "\n"
        )
    elif output is Output.YAML:
        sys.stdout.write(yaml.safe_dump(message_dict(message), sort_keys=False))
    elif output is Output.NAME:
        for name in names():
            sys.stdout.write(f"{name}\n")
    else:
        table(output is Output.WIDE)


def _terminal_width() -> int | None:
    """The terminal's width, or None when stdout is not a terminal (no limit)."""
    if not sys.stdout.isatty():
        return None
    return shutil.get_terminal_size().columns


def _fits(widths: Sequence[int], limit: int | None) -> bool:
    return limit is None or sum(widths) + len(_GAP) * (len(widths) - 1) <= limit


def print_table(
    columns: Sequence[Column],
    rows: Iterable[Sequence[str]],
    *,
    wide: bool = False,
    title: str = "",
) -> None:
    """Print ``rows`` aligned under ``columns`` (see the module docstring)."""
    shown = [i for i, c in enumerate(columns) if wide or not c.wide]
    body = [list(row) for row in rows]
    widths = {
        i: max([len(columns[i].header), *(len(row[i]) for row in body)])
        for i in range(len(columns))
    }
    limit = None if wide else _terminal_width()
    # Drop the least important columns (the last of equals first) until the rest fit.
    droppable = sorted(
        (i for i in shown if columns[i].priority > 0),
        key=lambda i: (columns[i].priority, i),
    )
    while not _fits([widths[i] for i in shown], limit) and droppable:
        shown.remove(droppable.pop())
    styled = limit is not None
    if title:
        typer.echo(typer.style(title, bold=True) if styled else title)
    header = _GAP.join(columns[i].header.ljust(widths[i]) for i in shown).rstrip()
    typer.echo(typer.style(header, bold=True) if styled else header)
    for row in body:
        typer.echo(_GAP.join(row[i].ljust(widths[i]) for i in shown).rstrip())


def print_fields(title: str, fields: Sequence[tuple[str, str]]) -> None:
    """A record as ``key  value`` lines under a title; values are never cut."""
    styled = sys.stdout.isatty()
    typer.echo(typer.style(title, bold=True) if styled else title)
    width = max(len(key) for key, _ in fields)
    for key, value in fields:
        typer.echo(f"  {key.ljust(width)}  {value}")
