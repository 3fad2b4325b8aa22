"""The API's HTTP port: JobService and AdminService over Connect, and the web console.

One ASGI application (Starlette for routing, static files and CORS) served by uvicorn
on ``SUNDIAL_HTTP_LISTEN`` (HTTP/1.1, so curl and browsers reach it; TLS with the gRPC
port's certificate files when they are set):

- ``POST /sundial.v1.JobService/<Method>`` and ``/sundial.v1.AdminService/<Method>``:
  the Connect protocol (a JSON body in the proto JSON mapping, or binary protobuf, and
  gRPC-Web), served by the gRPC servicers themselves (:mod:`sundial.core.connect`).
- ``GET /api``: the services, their methods' URLs and message types, as JSON;
  ``GET /api/descriptors.binpb``: the protos as a ``FileDescriptorSet`` (for
  ``buf curl --schema`` and generated clients).
- ``GET /openapi.json``: the OpenAPI 3.1 document of these endpoints (generated from the
  protos by ``scripts/gen_openapi.py``), for client generators.
- ``GET /console/``: the console, static files committed under ``console/``.

Security (docs/design.md section 7): the token travels only in the ``authorization``
header (no cookies, so no CSRF; never in a URL), every response has a
Content-Security-Policy without inline scripts and a frame ban, cross-origin calls are
refused by browsers unless their origin is in ``SUNDIAL_HTTP_CORS_ORIGINS``, and no
request is logged (uvicorn's access log is off), so tokens are not either.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import uvicorn
from connectrpc.server import ConnectASGIApplication
from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import FileDescriptor, ServiceDescriptor
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sundial.api.config import ApiConfig
from sundial.core.connect import CODECS, GrpcBridge
from sundial.core.grpc import Server
from sundial.core.identity import JWKS_PATH
from sundial.v1 import admin_connect, job_service_connect

log = logging.getLogger(__name__)

CONSOLE_DIR = Path(__file__).parent / "console"
"""The console's static files (HTML, CSS, JavaScript), committed; no build step."""

DESCRIPTOR_SET_PATH = "/api/descriptors.binpb"

OPENAPI_PATH = Path(__file__).parent / "openapi.json"
"""The OpenAPI 3.1 document of the HTTP/JSON API, generated from the protos by
scripts/gen_openapi.py (make generate; make verify fails when it is stale)."""

# The page may load its own scripts, styles and images and call its own origin; nothing
# inline, nothing from elsewhere, never framed.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)

_SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
)

# What a browser on an allowed origin may send and read (Connect's and gRPC-Web's own).
_CORS_HEADERS = (
    "authorization",
    "content-type",
    "connect-protocol-version",
    "connect-timeout-ms",
    "x-request-id",
    "x-grpc-web",
    "x-user-agent",
    "grpc-timeout",
)
_CORS_EXPOSED = ("x-request-id", "grpc-status", "grpc-message", "grpc-status-details-bin")


def connect_apps(server: Server, *, max_bytes: int) -> list[ConnectASGIApplication[Any]]:
    """The public services' generated Connect applications, each served by the gRPC
    servicers of ``server``, reading requests of up to ``max_bytes`` (the gRPC port's
    limit). RunLedgerService is not among them: executors speak gRPC only."""
    # Any: the bridge has every method of every service, generically (__getattr__),
    # which no static Protocol check can see.
    bridge: Any = GrpcBridge(server)
    return [
        job_service_connect.JobServiceASGIApplication(
            bridge, codecs=CODECS, read_max_bytes=max_bytes
        ),
        admin_connect.AdminServiceASGIApplication(bridge, codecs=CODECS, read_max_bytes=max_bytes),
    ]


class _SecurityHeaders:
    """Adds the security headers to every response, and ``Cache-Control: no-store`` to
    API answers (they hold a tenant's data)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # The console's files and the public keys may be cached; API answers not.
        api = not scope["path"].startswith("/console/") and scope["path"] != JWKS_PATH

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", ()))
                headers.extend(_SECURITY_HEADERS)
                if api:
                    headers.append((b"cache-control", b"no-store"))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _files(services: Sequence[ServiceDescriptor]) -> Iterator[FileDescriptor]:
    seen: set[str] = set()
    pending = [s.file for s in services]
    ordered: list[FileDescriptor] = []
    while pending:  # dependencies first, as protoc writes a descriptor set
        file = pending.pop()
        if file.name in seen:
            continue
        missing = [d for d in file.dependencies if d.name not in seen]
        if missing:
            pending.extend([file, *missing])
            continue
        seen.add(file.name)
        ordered.append(file)
    yield from ordered


def descriptor_set(services: Sequence[ServiceDescriptor]) -> bytes:
    """The ``FileDescriptorSet`` of ``services``' files and all they import."""
    fds = descriptor_pb2.FileDescriptorSet()
    for file in _files(services):
        file.CopyToProto(fds.file.add())
    return fds.SerializeToString()


def api_index(services: Sequence[ServiceDescriptor]) -> dict[str, Any]:
    """What ``GET /api`` answers: each method's URL and message types."""
    return {
        "protocol": "connect",
        "description": (
            "POST a JSON body (proto JSON mapping) with content-type application/json "
            "and authorization: Bearer <token> to a method's url; errors are JSON "
            '{"code", "message", "details"} with the google.rpc details gRPC sends.'
        ),
        "descriptor_set": DESCRIPTOR_SET_PATH,
        "openapi": "/openapi.json",
        "services": [
            {
                "name": service.full_name,
                "methods": [
                    {
                        "name": method.name,
                        "url": f"/{service.full_name}/{method.name}",
                        "input": method.input_type.full_name,
                        "output": method.output_type.full_name,
                    }
                    for method in service.methods
                ],
            }
            for service in services
        ],
    }


def web_app(
    apps: Sequence[ConnectASGIApplication[Any]],
    services: Sequence[ServiceDescriptor],
    *,
    cors_origins: Sequence[str] = (),
    jwks: Callable[[], Awaitable[dict[str, Any]]] | None = None,
) -> ASGIApp:
    """The HTTP port's application: the Connect ``apps``, the API description of
    ``services``, the console, the identity-token keys (``jwks``, at
    ``/.well-known/jwks.json``); CORS only for ``cors_origins``."""
    index = api_index(services)
    descriptors = descriptor_set(services)
    openapi = OPENAPI_PATH.read_bytes()

    async def describe(_request: Request) -> Response:
        return JSONResponse(index)

    async def descriptor(_request: Request) -> Response:
        return Response(descriptors, media_type="application/x-protobuf")

    async def openapi_document(_request: Request) -> Response:
        return Response(openapi, media_type="application/json")

    async def home(_request: Request) -> Response:
        return RedirectResponse("/console/")

    async def keys(_request: Request) -> Response:
        # Public keys, read per request (a rotation shows at once); verifiers cache them.
        document = await jwks() if jwks is not None else {"keys": []}
        return JSONResponse(
            document,
            media_type="application/jwk-set+json",
            headers={"Cache-Control": "public, max-age=300"},
        )

    middleware = [Middleware(_SecurityHeaders)]
    if cors_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(cors_origins),
                allow_methods=["GET", "POST"],
                allow_headers=list(_CORS_HEADERS),
                expose_headers=list(_CORS_EXPOSED),
                allow_credentials=False,
            )
        )
    return Starlette(
        routes=[
            Route("/", home),
            Route("/api", describe),
            Route(DESCRIPTOR_SET_PATH, descriptor),
            Route(JWKS_PATH, keys),
            Route("/openapi.json", openapi_document),
            Mount("/console", StaticFiles(directory=CONSOLE_DIR, html=True)),
            *(Mount(app.path, app=app) for app in apps),
        ],
        middleware=middleware,
    )


class _Uvicorn(uvicorn.Server):
    """uvicorn without its signal handlers (the service's lifecycle owns SIGTERM and
    SIGINT), reporting when it accepts connections."""

    on_started: Callable[[], None] = staticmethod(lambda: None)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            self.on_started()


class HttpServer:
    """The HTTP port as a lifecycle component; bound at construction (port 0 picks one)."""

    name = "http-server"

    def __init__(self, config: ApiConfig, app: ASGIApp) -> None:
        host, _, port = config.http_listen.rpartition(":")
        host = host.strip("[]")
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._socket = socket.socket(family, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Inherited by every accepted connection (Linux): a response's headers and body go
        # out as separate writes, and with Nagle's algorithm the second waits for the
        # client's delayed ACK, 40 ms per call on a kept-alive connection.
        self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            self._socket.bind((host, int(port)))
        except OSError as exc:
            self._socket.close()
            raise OSError(f"cannot bind the HTTP server to {config.http_listen}: {exc}") from exc
        self._socket.listen(2048)
        self.port: int = self._socket.getsockname()[1]
        """The bound port."""
        self._host = host
        self.tls = config.tls_cert_file is not None
        self._grace_s = config.grace_period_s
        self._server = _Uvicorn(
            uvicorn.Config(
                app,
                http="h11",
                ws="none",
                lifespan="off",
                log_config=None,
                log_level="warning",
                # No request log: requests carry bearer tokens, and a log line per call
                # is what the metrics are for.
                access_log=False,
                proxy_headers=False,
                server_header=False,
                timeout_graceful_shutdown=max(1, int(config.grace_period_s)),
                ssl_certfile=config.tls_cert_file,
                ssl_keyfile=config.tls_key_file,
                ssl_ca_certs=config.tls_client_ca_file,
                ssl_cert_reqs=(
                    ssl.CERT_REQUIRED if config.tls_client_ca_file is not None else ssl.CERT_NONE
                ),
            )
        )
        self._stopped = False
        self._done = asyncio.Event()

    @property
    def url(self) -> str:
        """The base URL, e.g. ``http://127.0.0.1:8080``."""
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"

    def _log_started(self) -> None:
        log.info(
            "http server listening on %s",
            self.url,
            extra={"action": "http_server", "address": self.url, "transition": "started"},
        )

    async def run(self, started: Callable[[], None]) -> None:
        """Serve until :meth:`stop`."""
        try:
            if self._stopped:
                return

            def on_started() -> None:
                self._log_started()
                started()

            self._server.on_started = on_started
            await self._server.serve(sockets=[self._socket])
        finally:
            self._socket.close()
            self._done.set()

    async def stop(self) -> None:
        """Stop accepting connections and let in-flight requests finish; idempotent."""
        if self._stopped:
            return
        self._stopped = True
        self._server.should_exit = True
        if self._server.started:
            await self._done.wait()
        else:
            self._socket.close()
