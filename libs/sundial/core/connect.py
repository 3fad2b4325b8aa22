"""The gRPC servicers over the Connect protocol: one implementation, two transports.

Connect (connectrpc, ``*_connect.py`` generated beside the gRPC stubs by
``scripts/gen_protos.py``) serves unary RPCs as ``POST /<service>/<Method>`` with a
JSON (proto JSON mapping) or binary protobuf body over HTTP/1.1 or HTTP/2, and speaks
gRPC-Web too. Its generated ASGI application calls one method per RPC on a service
object; :class:`GrpcBridge` is that object for every service, generically: each call
goes to :meth:`sundial.core.grpc.Server.resolve`, which finds the gRPC servicer's
handler and passes it through the gRPC port's own interceptors (request id, the error
mapping to ``google.rpc.Status`` details, the service's bearer-token auth). So a call
over Connect is authenticated, validated, tenant-scoped and refused exactly as over
gRPC, and a method added to a proto is served on both once the stubs are regenerated.

The handler runs with :class:`_BridgeContext`, a minimal stand-in for
``grpc.aio.ServicerContext``: the error interceptor ends a failed call with
``context.abort(code, message, trailing_metadata)``, which here raises; the bridge turns
that into a :class:`~connectrpc.errors.ConnectError` of the same code and message whose
details are the same ``google.rpc.Status`` details (ErrorInfo, RequestInfo, BadRequest,
RetryInfo, PreconditionFailure: the Any messages from ``grpc-status-details-bin``), and
puts the request id in the ``x-request-id`` response header.
"""

from __future__ import annotations

import inspect
import math
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any, NoReturn

import grpc
from connectrpc.code import Code
from connectrpc.codec import Codec
from connectrpc.compat import google_protobuf_binary_codec, google_protobuf_json_codec
from connectrpc.errors import ConnectError, ErrorDetail
from connectrpc.request import RequestContext
from google.protobuf import any_pb2, json_format, message
from google.rpc import status_pb2
from protobuf.wkt import Any as ConnectAny

from sundial.core.errors import InvalidArgument
from sundial.core.grpc import (
    REQUEST_ID_METADATA_KEY,
    RETRY_PUSHBACK_METADATA_KEY,
    Server,
    status_of,
)

__all__ = ["CODECS", "GrpcBridge"]

STATUS_DETAILS_KEY = "grpc-status-details-bin"

# Request headers that describe the HTTP exchange, not the call: never handed to the
# servicers as metadata (gRPC has no such entries either).
_TRANSPORT_HEADERS = frozenset(
    {
        "host",
        "content-type",
        "content-length",
        "accept",
        "accept-encoding",
        "connection",
        "origin",
        "referer",
        "user-agent",
        "cookie",
    }
)


def _code(status: grpc.StatusCode) -> Code:
    # Connect spells CANCELLED with one L; every other name is the same.
    return Code.CANCELED if status is grpc.StatusCode.CANCELLED else Code[status.name]


def _connect_error(code: Code, message: str, details: Iterable[any_pb2.Any]) -> ConnectError:
    """A Connect error carrying ``google.rpc.Status`` details as they are (type and bytes)."""
    return ConnectError(
        code,
        message,
        [ErrorDetail(ConnectAny(type_url=d.type_url, value=d.value)) for d in details],
    )


class _Checked:
    """A codec whose undecodable requests are Sundial's INVALID_ARGUMENT, with the same
    details as any refusal (ErrorInfo, RequestInfo, BadRequest), as over gRPC (where
    ``sundial.core.grpc`` does the same for an undecodable message)."""

    def __init__(self, inner: Codec) -> None:
        self._inner = inner

    def name(self) -> str:
        return self._inner.name()

    def encode(self, message: Any) -> bytes:
        return self._inner.encode(message)

    def decode(self, data: bytes | bytearray, message_class: type[Any]) -> Any:
        try:
            return self._inner.decode(data, message_class)
        except (json_format.ParseError, message.DecodeError, UnicodeDecodeError) as exc:
            kind = "JSON (the proto JSON mapping)" if self.name() == "json" else "protobuf"
            error = InvalidArgument(
                "", f"the body is not a {message_class.DESCRIPTOR.name} in {kind}: {exc}"
            )
            status = status_of(error, str(uuid.uuid4()))
            raise _connect_error(Code.INVALID_ARGUMENT, error.message, status.details) from None


CODECS: tuple[Codec, ...] = (
    _Checked(google_protobuf_binary_codec()),
    _Checked(google_protobuf_json_codec()),
)
"""The codecs to serve Connect with: google.protobuf's binary and JSON, refusing bodies
that do not decode as INVALID_ARGUMENT."""


class _Aborted(Exception):
    """Raised by :meth:`_BridgeContext.abort`: the status the handler ended the call with."""

    def __init__(
        self, code: grpc.StatusCode, message: str, trailing: Sequence[tuple[str, str | bytes]]
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.trailing = tuple(trailing)

    def connect_error(self) -> ConnectError:
        details: list[any_pb2.Any] = []
        for key, value in self.trailing:
            if key == STATUS_DETAILS_KEY and isinstance(value, bytes):
                details.extend(status_pb2.Status.FromString(value).details)
        return _connect_error(_code(self.code), self.message, details)

    def request_id(self) -> str | None:
        for key, value in self.trailing:
            if key == REQUEST_ID_METADATA_KEY and isinstance(value, str):
                return value
        return None

    def retry_after(self) -> str | None:
        """HTTP's Retry-After (whole seconds) for a pushback the status carries."""
        for key, value in self.trailing:
            if key == RETRY_PUSHBACK_METADATA_KEY and isinstance(value, str):
                ms = int(value) if value.lstrip("-").isdigit() else -1
                return None if ms < 0 else str(max(1, math.ceil(ms / 1000)))
        return None


class _BridgeContext:
    """What Sundial's interceptors and servicers use of ``grpc.aio.ServicerContext``."""

    def __init__(self, metadata: tuple[tuple[str, str], ...], peer: str | None) -> None:
        self._metadata = metadata
        self._peer = peer or ""

    async def abort(
        self,
        code: grpc.StatusCode,
        details: str = "",
        trailing_metadata: Sequence[tuple[str, str | bytes]] = (),
    ) -> NoReturn:
        raise _Aborted(code, details, trailing_metadata)

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata

    def peer(self) -> str:
        return f"ipv4:{self._peer}" if self._peer else ""


async def _one(request: Any) -> AsyncIterator[Any]:
    yield request


async def _invoke(handler: grpc.RpcMethodHandler[Any, Any], request: Any, context: Any) -> Any:
    """Run a unary call through ``handler``.

    A handler of another shape is one the interceptors answer with before any servicer
    runs (a refused token, a service still starting): it takes the request as a stream
    and ends by aborting.
    """
    behavior: Callable[..., Any] | None = handler.unary_unary
    if behavior is not None:
        return await behavior(request, context)
    # Typed Any: grpc's stubs declare stream behaviours as taking synchronous iterators.
    streaming: Any = handler.stream_stream or handler.stream_unary
    if streaming is None:
        raise ConnectError(Code.UNIMPLEMENTED, "streaming methods are served over gRPC only")
    result = streaming(_one(request), context)
    if inspect.isawaitable(result):
        return await result
    async for response in result:  # pragma: no cover - no Sundial stream answers here
        return response
    raise ConnectError(Code.INTERNAL, "the call ended without an answer")


class GrpcBridge:
    """Serves the services of a gRPC :class:`Server` to the generated Connect apps.

    Pass it as the ``service`` of every ``<Service>ASGIApplication``: each attribute the
    generated code reads (``list_jobs``...) is :meth:`call`, which reads the method's
    full name from the request context, so no method is written twice.
    """

    def __init__(self, server: Server) -> None:
        self._server = server

    def __getattr__(self, name: str) -> Callable[[Any, RequestContext[Any, Any]], Awaitable[Any]]:
        if name.startswith("_"):
            raise AttributeError(name)
        return self.call

    async def call(self, request: Any, ctx: RequestContext[Any, Any]) -> Any:
        """Serve one unary Connect call with the gRPC servicer of the same method."""
        method = f"/{ctx.method.service_name}/{ctx.method.name}"
        metadata = tuple(
            (key.lower(), value)
            for key, value in ctx.request_headers.allitems()
            if key.lower() not in _TRANSPORT_HEADERS and not key.lower().startswith("connect-")
        )
        handler = await self._server.resolve(method, metadata)
        if handler is None:
            raise ConnectError(Code.UNIMPLEMENTED, f"unknown method {method}")
        try:
            return await _invoke(handler, request, _BridgeContext(metadata, ctx.client_address))
        except _Aborted as aborted:
            request_id = aborted.request_id()
            if request_id is not None:
                ctx.response_headers[REQUEST_ID_METADATA_KEY] = request_id
            retry_after = aborted.retry_after()
            if retry_after is not None:  # a rate limit, a lost race: wait this long
                ctx.response_headers["retry-after"] = retry_after
            raise aborted.connect_error() from None
