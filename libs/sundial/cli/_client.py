"""What the API commands share: the connection, error reporting, parsing, formatting.

The address and token come from ``--api``/``--token`` or ``SUNDIAL_API``/``SUNDIAL_TOKEN``
(``sundial dev`` prints both). Calls are synchronous gRPC: one command, one or a few
calls. A failed call prints ``error: CODE: details`` and exits with status 1.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, NoReturn

import grpc
import typer
from google.protobuf import duration_pb2, json_format, timestamp_pb2
from rich.console import Console

from sundial.v1 import job_service_pb2_grpc

console = Console()
err_console = Console(stderr=True)

ApiOption = Annotated[
    str,
    typer.Option(
        "--api",
        envvar="SUNDIAL_API",
        help="API address host:port (env SUNDIAL_API; `sundial dev` prints it).",
        show_default=False,
    ),
]
TokenOption = Annotated[
    str,
    typer.Option(
        "--token",
        envvar="SUNDIAL_TOKEN",
        help="Tenant API token (env SUNDIAL_TOKEN).",
        show_default=False,
    ),
]

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
TIMEOUT_S = 30.0


def fail(message: str) -> NoReturn:
    """Print ``error: message`` and exit with status 1."""
    err_console.print(f"[bold red]error:[/] {message}", highlight=False)
    raise typer.Exit(1)


@contextlib.contextmanager
def jobs_client(api: str, token: str) -> Iterator[tuple[job_service_pb2_grpc.JobServiceStub, Any]]:
    """A JobService stub and the call metadata; RPC errors end the command cleanly."""
    if not api:
        fail("no API address: pass --api host:port or set SUNDIAL_API")
    if not token:
        fail("no token: pass --token or set SUNDIAL_TOKEN")
    metadata = (("authorization", f"Bearer {token}"),)
    with grpc.insecure_channel(api) as channel:
        try:
            yield job_service_pb2_grpc.JobServiceStub(channel), metadata
        except grpc.RpcError as exc:
            code = exc.code()
            details = exc.details()
            if code == grpc.StatusCode.UNAVAILABLE:
                fail(f"cannot reach the API at {api}: {details}")
            fail(f"{code.name}: {details}")


def parse_duration(text: str, option: str) -> duration_pb2.Duration:
    """``90s``, ``15m``, ``1h30m``, ``2d``, ``500ms`` (or a bare number of seconds)."""
    text = text.strip()
    try:
        seconds = float(text)
    except ValueError:
        parts = _DURATION_PART.findall(text)
        if not parts or "".join(n + u for n, u in parts) != text:
            fail(f"{option}: {text!r} is not a duration (e.g. 30s, 15m, 1h30m)")
        seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    message = duration_pb2.Duration()
    message.FromTimedelta(timedelta(seconds=seconds))
    return message


def parse_time(text: str, option: str) -> timestamp_pb2.Timestamp:
    """An ISO 8601 instant with an offset (``2026-03-08T09:00:00+01:00``, ``...Z``)."""
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        fail(f"{option}: {text!r} is not an ISO 8601 time")
    if value.tzinfo is None:
        fail(f"{option}: {text!r} needs an offset or Z (times are instants)")
    message = timestamp_pb2.Timestamp()
    message.FromDatetime(value.astimezone(UTC))
    return message


def parse_pairs(items: Sequence[str], option: str) -> dict[str, str]:
    """``KEY=VALUE`` items as a dict."""
    pairs: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            fail(f"{option}: expected KEY=VALUE, got {item!r}")
        pairs[key] = value
    return pairs


def when(ts: timestamp_pb2.Timestamp, *, set_: bool = True, relative: bool = True) -> str:
    """A timestamp as ``2026-03-08T09:00:00Z (in 3h)``; ``-`` when unset."""
    if not set_:
        return "-"
    value = ts.ToDatetime(UTC)
    text = ts.ToJsonString()
    if not relative:
        return text
    delta = value - datetime.now(UTC)
    return f"{text} ({ago(delta)})"


def ago(delta: timedelta) -> str:
    """``in 5m`` / ``5m ago``, coarsely."""
    seconds = abs(delta.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            amount = f"{seconds / size:.0f}{unit}"
            break
    else:
        amount = f"{seconds:.0f}s"
    return f"in {amount}" if delta.total_seconds() >= 0 else f"{amount} ago"


def duration_text(d: duration_pb2.Duration) -> str:
    """A Duration as ``30s`` / ``1h`` / ``1.5s``."""
    seconds = d.ToTimedelta().total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:g}s"


def enum_name(value: int, enum: Any, prefix: str) -> str:
    """``OVERLAP_POLICY_SKIP`` -> ``skip``."""
    return str(enum.Name(value)).removeprefix(prefix).lower()


def print_json(message: Any) -> None:
    """A message as indented proto JSON on stdout."""
    sys.stdout.write(
        json_format.MessageToJson(message, preserving_proto_field_name=True, indent=2) + "\n"
    )
