"""What the API commands share: the connection, error reporting, parsing, formatting.

The address and token come from ``--api``/``--token`` or ``SUNDIAL_API``/``SUNDIAL_TOKEN``
(``sundial dev`` prints both), else from a connection profile (:mod:`sundial.cli.profiles`).
Calls are synchronous gRPC: one command, one or a few calls. A failed call prints
``error: CODE: details`` and exits with status 1.

How to reach the API is one :class:`Connection`: a command decorated with
:func:`connected` takes ``conn: Connection`` and gets the options ``--api``, ``--tls``,
``--ca-file``, ``--cert-file``, ``--key-file``, ``--server-name`` and ``--profile`` (env
``SUNDIAL_API``, ``SUNDIAL_API_TLS``, ``SUNDIAL_API_CA_FILE``, ``SUNDIAL_API_CERT_FILE``,
``SUNDIAL_API_KEY_FILE``, ``SUNDIAL_API_SERVER_NAME``, ``SUNDIAL_PROFILE``; not the
server's ``SUNDIAL_TLS_*``, so a shell that runs a service can run the CLI too). TLS is
on with ``--tls`` or when a CA file or client certificate is given; ``--no-tls`` turns
it off whatever the environment says. Then :func:`tenant_client` (a
:class:`sundial.client.Client`: request ids on creates and triggers, UNAVAILABLE retried,
a deadline per call), :func:`jobs_client` (its stub, for calls it does not wrap) or
:func:`admin_client` dial it. Pages are read by :class:`sundial.client.Pages`, times and
durations converted by :mod:`sundial.client`'s functions: the CLI is a client of the
library.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import grpc
import typer
from google.protobuf import duration_pb2, timestamp_pb2
from google.protobuf.message import Message
from rich.console import Console

from sundial import client as library
from sundial.cli.profiles import load_profile
from sundial.client import CHANNEL_OPTIONS, Client, Pages
from sundial.core.tls import ClientTls, TlsError, dial_sync
from sundial.v1 import admin_pb2_grpc, job_service_pb2_grpc

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

AdminTokenOption = Annotated[
    str,
    typer.Option(
        "--token",
        envvar="SUNDIAL_TOKEN",
        help="Admin API token (env SUNDIAL_TOKEN): an issued admin token or the API's "
        "bootstrap SUNDIAL_ADMIN_TOKEN.",
        show_default=False,
    ),
]

TlsOption = Annotated[
    bool | None,
    typer.Option(
        "--tls/--no-tls",
        envvar="SUNDIAL_API_TLS",
        help="Dial the API over TLS (env SUNDIAL_API_TLS); on by itself with --ca-file or "
        "--cert-file. --no-tls: plaintext, whatever else is set.",
        show_default=False,
    ),
]
CaFileOption = Annotated[
    Path | None,
    typer.Option(
        "--ca-file",
        envvar="SUNDIAL_API_CA_FILE",
        help="PEM CA certificates to verify the API with (env SUNDIAL_API_CA_FILE); "
        "default with --tls: the system's roots.",
        show_default=False,
    ),
]
CertFileOption = Annotated[
    Path | None,
    typer.Option(
        "--cert-file",
        envvar="SUNDIAL_API_CERT_FILE",
        help="PEM client certificate for an API that requires one, mTLS "
        "(env SUNDIAL_API_CERT_FILE).",
        show_default=False,
    ),
]
KeyFileOption = Annotated[
    Path | None,
    typer.Option(
        "--key-file",
        envvar="SUNDIAL_API_KEY_FILE",
        help="PEM key of the client certificate (env SUNDIAL_API_KEY_FILE).",
        show_default=False,
    ),
]
ProfileOption = Annotated[
    str,
    typer.Option(
        "--profile",
        envvar="SUNDIAL_PROFILE",
        help="Connection profile from the config file (env SUNDIAL_PROFILE; default: the "
        "current one, see `sundial profile`); options and variables given win over it.",
        show_default=False,
    ),
]
ServerNameOption = Annotated[
    str,
    typer.Option(
        "--server-name",
        envvar="SUNDIAL_API_SERVER_NAME",
        help="Verify the API's certificate for this name instead of the --api host, e.g. "
        "through a port-forward (env SUNDIAL_API_SERVER_NAME).",
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


@dataclass(frozen=True)
class Connection:
    """Where the API is and how to dial it (see the module docstring)."""

    api: str
    """The API's host:port."""
    tls: ClientTls | None = None
    """TLS settings, or None for plaintext."""
    token: str = ""
    """The profile's token, used when a command is given none."""

    @classmethod
    def from_options(
        cls,
        api: str,
        *,
        tls: bool | None = None,
        ca_file: Path | None = None,
        cert_file: Path | None = None,
        key_file: Path | None = None,
        server_name: str = "",
        profile: str = "",
    ) -> Connection:
        """The connection the command-line options describe, completed from the profile
        (exits on a bad combination)."""
        try:
            chosen = load_profile(profile)
        except typer.BadParameter as exc:
            fail(str(exc.message))
        token = ""
        if chosen is not None:
            api = api or chosen.api
            tls = chosen.tls if tls is None else tls
            ca_file = ca_file or (Path(chosen.ca_file) if chosen.ca_file else None)
            cert_file = cert_file or (Path(chosen.cert_file) if chosen.cert_file else None)
            key_file = key_file or (Path(chosen.key_file) if chosen.key_file else None)
            server_name = server_name or chosen.server_name
            token = chosen.token
        if not api:
            fail("no API address: pass --api host:port, set SUNDIAL_API or use a profile")
        wanted = tls if tls is not None else bool(ca_file or cert_file)
        if not wanted:
            return cls(api, token=token)
        if (cert_file is None) != (key_file is None):
            fail("--cert-file and --key-file go together (a client certificate and its key)")
        return cls(
            api,
            ClientTls(
                ca_file=ca_file, cert_file=cert_file, key_file=key_file, server_name=server_name
            ),
            token,
        )

    @contextlib.contextmanager
    def reported(self) -> Iterator[None]:
        """RPC errors in the block end the command cleanly (``error: CODE: details``)."""
        try:
            yield
        except grpc.RpcError as exc:
            code = exc.code()
            details = exc.details()
            if code == grpc.StatusCode.UNAVAILABLE:
                fail(f"cannot reach the API at {self.api}: {details}")
            fail(f"{code.name}: {details}")

    @contextlib.contextmanager
    def channel(self) -> Iterator[grpc.Channel]:
        """A channel to the API; RPC errors in the block end the command cleanly."""
        try:
            # Retried by gRPC's retry policy as sundial.client's calls are (UNAVAILABLE;
            # RESOURCE_EXHAUSTED and ABORTED when the API's pushback allows).
            channel = dial_sync(self.api, self.tls, CHANNEL_OPTIONS)
        except TlsError as exc:
            fail(str(exc))
        with channel, self.reported():
            yield channel


# The options `connected` puts in place of a command's `conn` parameter, by name.
_CONNECTION_OPTIONS: dict[str, tuple[Any, Any]] = {
    "api": (ApiOption, ""),
    "tls": (TlsOption, None),
    "ca_file": (CaFileOption, None),
    "cert_file": (CertFileOption, None),
    "key_file": (KeyFileOption, None),
    "server_name": (ServerNameOption, ""),
    "profile": (ProfileOption, ""),
}

F = TypeVar("F", bound=Callable[..., Any])


def connected(command: F) -> F:
    """Give an API command the connection options, collected into its ``conn`` parameter.

    The command declares a keyword-only ``conn: Connection``; Typer sees the options of
    :data:`_CONNECTION_OPTIONS` in its place (so ``--help`` lists them there) and the
    command receives them as one :class:`Connection`. Use it below ``@app.command()``.
    """
    # Evaluated annotations: Typer reads the options from the Annotated objects.
    signature = inspect.signature(command, eval_str=True)
    parameters = list(signature.parameters.values())
    names = [p.name for p in parameters]
    clash = set(names) & set(_CONNECTION_OPTIONS)
    if "conn" not in names or clash:
        raise TypeError(f"{command.__name__}: needs a `conn` parameter and none of {clash}")
    at = names.index("conn")
    options = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=hint)
        for name, (hint, default) in _CONNECTION_OPTIONS.items()
    ]

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        values = {name: kwargs.pop(name) for name in _CONNECTION_OPTIONS}
        return command(*args, conn=Connection.from_options(**values), **kwargs)

    run.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[*parameters[:at], *options, *parameters[at + 1 :]]
    )
    return run  # type: ignore[return-value]


S = TypeVar("S")


@contextlib.contextmanager
def api_client(
    conn: Connection, token: str, stub: Callable[[grpc.Channel], S], *, token_kind: str = ""
) -> Iterator[tuple[S, Any]]:
    """A stub of ``stub``'s service on the API and the call metadata carrying ``token``.

    RPC errors in the block end the command cleanly; ``token_kind`` (e.g. ``an admin
    token``) completes the message when no token is given.
    """
    metadata = (("authorization", f"Bearer {_token(conn, token, token_kind)}"),)
    with conn.channel() as channel:
        yield stub(channel), metadata


def _token(conn: Connection, token: str, kind: str = "") -> str:
    """The token given, else the profile's; exits when there is none."""
    token = token or conn.token
    if not token:
        told = f" ({kind})" if kind else ""
        fail(f"no token: pass --token, set SUNDIAL_TOKEN{told} or use a profile with one")
    return token


@contextlib.contextmanager
def tenant_client(conn: Connection, token: str) -> Iterator[Client]:
    """A :class:`sundial.client.Client` for a tenant token; RPC errors in the block end
    the command cleanly."""
    try:
        client = Client(conn.api, _token(conn, token), tls=conn.tls, timeout_s=TIMEOUT_S)
    except TlsError as exc:
        fail(str(exc))
    with client, conn.reported():
        yield client


@contextlib.contextmanager
def jobs_client(
    conn: Connection, token: str
) -> Iterator[tuple[job_service_pb2_grpc.JobServiceStub, Any]]:
    """The JobService stub of :func:`tenant_client` and its call metadata, for the calls
    the client does not wrap."""
    with tenant_client(conn, token) as client:
        yield client.stub, client.metadata


def admin_client(
    conn: Connection, token: str
) -> contextlib.AbstractContextManager[tuple[admin_pb2_grpc.AdminServiceStub, Any]]:
    """An AdminService stub and the call metadata (an admin token)."""
    return api_client(conn, token, admin_pb2_grpc.AdminServiceStub, token_kind="an admin token")


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
    return library.duration(timedelta(seconds=seconds))


def parse_instant(text: str, option: str) -> datetime:
    """An ISO 8601 instant with an offset (``2026-03-08T09:00:00+01:00``, ``...Z``)."""
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        fail(f"{option}: {text!r} is not an ISO 8601 time")
    if value.tzinfo is None:
        fail(f"{option}: {text!r} needs an offset or Z (times are instants)")
    return value


def parse_time(text: str, option: str) -> timestamp_pb2.Timestamp:
    """:func:`parse_instant` as a Timestamp."""
    return library.timestamp(parse_instant(text, option))


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


M = TypeVar("M", bound=Message)


def all_pages(call: Callable[[Any], Any], request: Any, listed: M, field: str, limit: int = 0) -> M:
    """Fill ``listed`` (an empty List response) with the ``field`` items of every page
    ``call(request)`` returns, at most ``limit`` (0: all); its ``next_page_token`` is where
    a later listing would go on (empty when everything was read)."""
    pages: Pages[Any] = Pages(call, request, field, limit=limit)
    getattr(listed, field).extend(pages)
    listed.next_page_token = pages.next_page_token  # type: ignore[attr-defined]
    return listed
