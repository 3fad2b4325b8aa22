"""gRPC server plumbing shared by every service: error mapping, request ids, health.

- :class:`ErrorInterceptor` turns a raised :class:`~sundial.core.errors.SundialError`
  into its status code and message, anything else into ``INTERNAL`` with a generic
  message and a logged traceback, and gives each RPC a request id. Servicers therefore
  never map statuses themselves: they raise. Every error also carries a
  ``google.rpc.Status`` (grpcio-status, the ``grpc-status-details-bin`` trailer) with
  ErrorInfo, RequestInfo, and BadRequest, RetryInfo or PreconditionFailure where the
  error has them (:func:`status_of`).
- :func:`build_server` returns a :class:`Server` that always serves
  ``grpc.health.v1.Health`` (NOT_SERVING until the app says otherwise) and server
  reflection (``grpc.reflection.v1`` and ``v1alpha``), and that is a lifecycle
  component (:mod:`sundial.core.lifecycle`). It serves TLS (mTLS with a client CA)
  when the config names a certificate, picking up replaced certificate files without a
  restart (:mod:`sundial.core.tls`).

This module is ``sundial.core.grpc``; it imports the real ``grpc`` package with an
absolute import, which is the only kind this code base uses, so the names never clash.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import functools
import inspect
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2
from grpc_reflection.v1alpha._async import ReflectionServicer
from grpc_status import rpc_status
from opentelemetry import metrics

from sundial.core.config import ServerConfig
from sundial.core.errors import InvalidArgument, SundialError, Unavailable
from sundial.core.logging import request_id_var
from sundial.core.telemetry import RPC_DURATION_BUCKETS_S, RPC_SERVER_DURATION
from sundial.core.tls import ServerCertificates, message_limits
from sundial.core.tracing import server_interceptors

__all__ = [
    "ERROR_DOMAIN",
    "REQUEST_ID_METADATA_KEY",
    "ErrorInterceptor",
    "Server",
    "build_server",
    "status_of",
]

log = logging.getLogger(__name__)

# Clients (executors on the ledger) ping every 10 s to find dead connections, also with
# no call open. The server's defaults allow one ping per 5 minutes without data and
# answer more with GOAWAY too_many_pings, which would drop the ledger connection of
# every executor every few minutes. Accept a ping every 5 s (half the clients' rate,
# so timer jitter never counts as a strike), with or without open calls.
KEEPALIVE_SERVER_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.http2.min_recv_ping_interval_without_data_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
)

REQUEST_ID_METADATA_KEY = "x-request-id"
"""Metadata key a caller may set to choose the request id (echoed on errors)."""

ERROR_DOMAIN = "sundial"
"""ErrorInfo's domain: the namespace of Sundial's reasons."""

REFLECTION_V1 = "grpc.reflection.v1.ServerReflection"
"""The reflection service's stable name. grpcio-reflection serves only ``v1alpha``,
whose messages are the same on the wire, so its servicer answers both."""

# A caller-chosen id goes into every log line: accept only short, plain tokens.
_REQUEST_ID_RE = re.compile(r"[A-Za-z0-9._:-]{1,128}")

# Codes that signal trouble on our side (worth a warning) rather than a bad request.
_SERVER_SIDE_CODES = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNKNOWN}
)

if TYPE_CHECKING:  # RpcMethodHandler is generic only in the type stubs
    _Continuation = Callable[
        [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]
    ]
    """What a server interceptor's ``intercept_service`` calls to go on down the chain."""

ServiceRegistration = tuple[Callable[[Any, grpc.aio.Server], None], Any]
"""``(add_XServicer_to_server, servicer)`` as generated ``*_pb2_grpc`` modules define."""


def _request_id(metadata: Iterable[tuple[str, str | bytes]] | None) -> str:
    for key, value in metadata or ():
        if key == REQUEST_ID_METADATA_KEY and isinstance(value, str):
            if _REQUEST_ID_RE.fullmatch(value):
                return value
            break
    return str(uuid.uuid4())


def _pack(message: Any) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message)
    return packed


def status_of(error: SundialError, request_id: str) -> status_pb2.Status:
    """The ``google.rpc.Status`` an error is sent with: its code and message, ErrorInfo
    (reason, domain, metadata) and RequestInfo always, then BadRequest (the field of an
    INVALID_ARGUMENT), RetryInfo (where retrying helps) and PreconditionFailure where
    the error has them."""
    details = [
        error_details_pb2.ErrorInfo(
            reason=error.reason, domain=ERROR_DOMAIN, metadata=error.metadata
        ),
        error_details_pb2.RequestInfo(request_id=request_id),
    ]
    if isinstance(error, InvalidArgument):
        details.append(
            error_details_pb2.BadRequest(
                field_violations=[
                    error_details_pb2.BadRequest.FieldViolation(
                        field=error.field, description=error.problem, reason=error.reason
                    )
                ]
            )
        )
    if error.retry_delay_s is not None:
        delay = duration_pb2.Duration()
        delay.FromTimedelta(datetime.timedelta(seconds=error.retry_delay_s))
        details.append(error_details_pb2.RetryInfo(retry_delay=delay))
    if error.preconditions:
        details.append(
            error_details_pb2.PreconditionFailure(
                violations=[
                    error_details_pb2.PreconditionFailure.Violation(
                        type=p.type, subject=p.subject, description=p.description
                    )
                    for p in error.preconditions
                ]
            )
        )
    return status_pb2.Status(
        code=error.code.value[0], message=error.message, details=[_pack(d) for d in details]
    )


_RPC_DURATION = metrics.get_meter("sundial.rpc").create_histogram(
    RPC_SERVER_DURATION,
    unit="s",
    description="Unary RPCs served, by service, method and status code",
    explicit_bucket_boundaries_advisory=RPC_DURATION_BUCKETS_S,
)


def _status_code(exc: Exception) -> grpc.StatusCode:
    """The code :meth:`_Mapper.abort` answers ``exc`` with."""
    if isinstance(exc, SundialError) and exc.code is not grpc.StatusCode.INTERNAL:
        return exc.code
    return grpc.StatusCode.INTERNAL


class _Mapper:
    """Turns one RPC's exception into a status; shared by all four handler shapes."""

    def __init__(self, method: str, request_id: str) -> None:
        self.method = method
        self.request_id = request_id
        service, _, name = method.lstrip("/").rpartition("/")
        self.rpc_attributes = {"rpc.system": "grpc", "rpc.service": service, "rpc.method": name}

    def record(self, started: float, code: grpc.StatusCode) -> None:
        """Time one unary RPC (``rpc.server.duration``)."""
        _RPC_DURATION.record(
            time.monotonic() - started,
            {**self.rpc_attributes, "rpc.grpc.status_code": code.value[0]},
        )

    async def abort(self, context: grpc.aio.ServicerContext[Any, Any], exc: Exception) -> None:
        """Log ``exc`` and abort the RPC with its status (always raises ``AbortError``)."""
        extra = {"action": "rpc", "rpc_method": self.method, "request_id": self.request_id}
        trailing: tuple[tuple[str, str], ...] = ((REQUEST_ID_METADATA_KEY, self.request_id),)
        if isinstance(exc, SundialError) and exc.code is not grpc.StatusCode.INTERNAL:
            extra["grpc_code"] = exc.code.name
            level = logging.WARNING if exc.code in _SERVER_SIDE_CODES else logging.INFO
            log.log(level, "rpc failed: %s", exc.message, extra=extra)
            error = exc
        else:
            # Unexpected errors (and deliberate Internal ones) may carry internals in their
            # text: the caller gets only the id to quote, the log gets the traceback.
            extra["grpc_code"] = grpc.StatusCode.INTERNAL.name
            log.error("unhandled error in %s", self.method, exc_info=exc, extra=extra)
            error = SundialError(f"internal error (request id: {self.request_id})")
        if error.code in _PUSHED_BACK:
            trailing = (*trailing, (RETRY_PUSHBACK_METADATA_KEY, pushback_ms(error)))
        status = rpc_status.to_status(status_of(error, self.request_id))
        await context.abort(status.code, status.details, (*status.trailing_metadata, *trailing))


RETRY_PUSHBACK_METADATA_KEY = "grpc-retry-pushback-ms"
"""gRPC's server pushback (the retry design, A6): a client whose service config retries
RESOURCE_EXHAUSTED or ABORTED waits this many milliseconds before its next attempt, and
does not retry at all when the value is negative."""

_PUSHED_BACK = frozenset({grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.ABORTED})
"""The codes whose answers say, by a pushback, whether the same call may succeed later."""


def pushback_ms(error: SundialError) -> str:
    """The pushback of a RESOURCE_EXHAUSTED or ABORTED answer: its RetryInfo delay (a rate
    limit, a write that lost a race: retrying later succeeds), or -1 (a quota, a stale
    expected version: the same call would fail again)."""
    if error.retry_delay_s is None:
        return "-1"
    return str(max(1, round(error.retry_delay_s * 1000)))


class _Undecodable:
    """A request body that did not parse (invalid UTF-8 in a string field, truncated or
    malformed bytes): the handler answers INVALID_ARGUMENT instead of grpc answering
    UNKNOWN with protobuf's own error text."""

    __slots__ = ()


_UNDECODABLE = _Undecodable()


def _tolerant(deserializer: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    if deserializer is None:
        return None

    def deserialize(data: bytes) -> Any:
        try:
            return deserializer(data)
        except Exception:  # protobuf's DecodeError, or any failure to read the bytes
            return _UNDECODABLE

    return deserialize


def _check_decoded(request: Any) -> None:
    if request is _UNDECODABLE:
        raise InvalidArgument(
            "",
            "the request is not a valid message: a string field holds invalid UTF-8, "
            "or the bytes are truncated or malformed",
        )


def _checking_stream(behavior: Callable[..., Any]) -> Callable[..., Any]:
    """``behavior`` reading a request stream whose undecodable messages raise
    InvalidArgument where the handler reads them (mapped like any handler error)."""

    async def checked(requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
        async for request in requests:
            _check_decoded(request)
            yield request

    if inspect.isasyncgenfunction(behavior):

        async def streaming(requests: Any, context: Any) -> AsyncIterator[Any]:
            async for response in behavior(checked(requests), context):
                yield response

        return streaming

    async def unary(requests: Any, context: Any) -> Any:
        return await behavior(checked(requests), context)

    return unary


def _wrap_unary_response(behavior: Callable[..., Any], mapper: _Mapper) -> Callable[..., Any]:
    # Serves unary-unary, stream-unary, and streaming responses written with
    # `await context.write()` (a coroutine that returns None).
    async def wrapper(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        token = request_id_var.set(mapper.request_id)
        started, code = time.monotonic(), grpc.StatusCode.OK
        try:
            _check_decoded(request)
            return await behavior(request, context)
        except grpc.aio.AbortError:
            # The handler's own abort: the code it set.
            code = context.code() or grpc.StatusCode.UNKNOWN
            raise
        except asyncio.CancelledError:
            code = grpc.StatusCode.CANCELLED
            raise
        except Exception as exc:
            code = _status_code(exc)
            await mapper.abort(context, exc)
        finally:
            request_id_var.reset(token)
            mapper.record(started, code)

    return wrapper


def _wrap_stream_response(behavior: Callable[..., Any], mapper: _Mapper) -> Callable[..., Any]:
    async def wrapper(
        request: Any, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[Any]:
        token = request_id_var.set(mapper.request_id)
        try:
            _check_decoded(request)
            async for response in behavior(request, context):
                yield response
        except grpc.aio.AbortError:
            raise
        except Exception as exc:
            await mapper.abort(context, exc)
        finally:
            # An async generator abandoned mid-stream (the client went away) is finalised
            # by the event loop in another context, where the token is not valid; the
            # context it was set in is gone anyway.
            with contextlib.suppress(ValueError):
                request_id_var.reset(token)

    return wrapper


def _wrap(behavior: Callable[..., Any], mapper: _Mapper) -> Callable[..., Any]:
    # grpc.aio picks how to drive a handler by inspecting it, so the wrapper must be the
    # same kind of callable as what it wraps: an async generator function stays one.
    if inspect.isasyncgenfunction(behavior):
        return _wrap_stream_response(behavior, mapper)
    if inspect.iscoroutinefunction(behavior):
        return _wrap_unary_response(behavior, mapper)
    # Synchronous handlers run on a thread pool where an async abort cannot be awaited;
    # Sundial's servicers are all async, so such a handler is served unchanged.
    return behavior


def _rebuild(
    handler: grpc.RpcMethodHandler[Any, Any], mapper: _Mapper
) -> grpc.RpcMethodHandler[Any, Any]:
    if handler.request_streaming and handler.response_streaming:
        make, behavior = grpc.stream_stream_rpc_method_handler, handler.stream_stream
    elif handler.request_streaming:
        make, behavior = grpc.stream_unary_rpc_method_handler, handler.stream_unary
    elif handler.response_streaming:
        make, behavior = grpc.unary_stream_rpc_method_handler, handler.unary_stream
    else:
        make, behavior = grpc.unary_unary_rpc_method_handler, handler.unary_unary
    if behavior is None:  # no behaviour of the shape its flags name: nothing to wrap
        return handler
    deserializer = handler.request_deserializer
    wrapped = inspect.iscoroutinefunction(behavior) or inspect.isasyncgenfunction(behavior)
    if wrapped:  # one message checked by the wrapper, or each of a stream as it is read
        deserializer = _tolerant(deserializer)
        if handler.request_streaming:
            behavior = _checking_stream(behavior)
    return make(
        _wrap(behavior, mapper),
        request_deserializer=deserializer,
        response_serializer=handler.response_serializer,
    )


class ErrorInterceptor(grpc.aio.ServerInterceptor):
    """Maps exceptions to statuses and gives every RPC a request id.

    - A :class:`SundialError` becomes its ``code`` with its ``message`` (logged at INFO,
      or WARNING for UNAVAILABLE/DEADLINE_EXCEEDED).
    - Any other exception, and :class:`~sundial.core.errors.Internal`, becomes
      ``INTERNAL`` with ``internal error (request id: <id>)``; the traceback is logged.
    - ``await context.abort(...)`` inside a handler passes through untouched.
    - The request id comes from ``x-request-id`` metadata when it is a plain token of up
      to 128 characters, else a new uuid4; it is set in
      :data:`~sundial.core.logging.request_id_var` for the RPC and returned in the
      trailing metadata of every error.

    It must come before every other Sundial interceptor so it also maps errors raised by
    the ones after it, from their handlers or from ``intercept_service`` itself (an auth
    interceptor may simply raise ``Unauthenticated``); :func:`build_server` puts it there,
    after only the trace interceptor (which raises nothing).
    """

    async def intercept_service(
        self,
        continuation: _Continuation,
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        request_id = _request_id(handler_call_details.invocation_metadata)
        # The interceptor chain and the handler share one context per RPC, so later
        # interceptors already see the id; the wrappers set it again for robustness.
        request_id_var.set(request_id)
        mapper = _Mapper(handler_call_details.method, request_id)
        try:
            handler = await continuation(handler_call_details)
        except Exception as exc:  # raised by a later interceptor before any handler ran
            return _aborting_handler(mapper, exc)
        if handler is None:  # unknown method: grpc answers UNIMPLEMENTED
            return None
        return _rebuild(handler, mapper)


def _aborting_handler(mapper: _Mapper, exc: Exception) -> grpc.RpcMethodHandler[Any, Any]:
    # The method's real shape is unknown here. A stream-stream handler that aborts
    # without reading or writing is valid on the wire for a call of any shape.
    async def abort(_requests: Any, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        await mapper.abort(context, exc)

    return grpc.stream_stream_rpc_method_handler(abort)


class _CallDetails(grpc.HandlerCallDetails):
    """What :meth:`Server.resolve` hands the interceptors (grpc.aio builds the same)."""

    def __init__(self, method: str, invocation_metadata: tuple[tuple[str, str], ...]) -> None:
        self.method = method
        self.invocation_metadata = invocation_metadata


class _LateServices(grpc.GenericRpcHandler):
    """Services and interceptors registered after the server started listening.

    A service starts its server before it connects to PostgreSQL, NATS and etcd (health
    answers NOT_SERVING while it waits), but its servicers exist only once those are
    connected. This handler stands in for them: until :meth:`activate`, every call to one
    of the service's methods fails UNAVAILABLE; afterwards calls go through the late
    interceptors to the late servicers.
    """

    def __init__(self, service_names: Sequence[str]) -> None:
        self._prefixes = tuple(f"/{name}/" for name in service_names)
        self._pending: list[grpc.GenericRpcHandler] = []
        self._pending_interceptors: list[grpc.aio.ServerInterceptor] = []
        self._handlers: tuple[grpc.GenericRpcHandler, ...] = ()
        self.interceptors: tuple[grpc.aio.ServerInterceptor, ...] = ()
        self.active = False

    # The two methods generated ``add_XServicer_to_server`` functions call on a server.
    def add_generic_rpc_handlers(self, handlers: Iterable[grpc.GenericRpcHandler]) -> None:
        self._pending.extend(handlers)

    def add_registered_method_handlers(self, service: str, handlers: object) -> None:
        """Ignored: the generic handler added alongside serves the same methods."""

    def register(
        self,
        services: Sequence[ServiceRegistration],
        interceptors: Sequence[grpc.aio.ServerInterceptor],
    ) -> None:
        for add, servicer in services:
            # It has the two methods those functions call on a grpc.aio.Server.
            add(servicer, self)  # type: ignore[arg-type]
        self._pending_interceptors.extend(interceptors)

    def activate(self) -> None:
        self._handlers = tuple(self._pending)
        self.interceptors = tuple(self._pending_interceptors)
        self.active = True

    def service(
        self, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        if not self.active:
            if handler_call_details.method.startswith(self._prefixes):
                return _STARTING
            return None
        for handler in self._handlers:
            found = handler.service(handler_call_details)
            if found is not None:
                return found
        return None


async def _starting(_requests: Any, _context: grpc.aio.ServicerContext[Any, Any]) -> None:
    # Stream-stream so that it answers a call of any shape (see _aborting_handler).
    raise Unavailable("the service is starting: it is waiting for its dependencies")


_STARTING: grpc.RpcMethodHandler[Any, Any] = grpc.stream_stream_rpc_method_handler(_starting)


class _LateInterceptors(grpc.aio.ServerInterceptor):
    """Runs :attr:`_LateServices.interceptors` (empty until activated), in order."""

    def __init__(self, late: _LateServices) -> None:
        self._late = late

    async def intercept_service(
        self,
        continuation: _Continuation,
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        chain = continuation
        for interceptor in reversed(self._late.interceptors):
            chain = functools.partial(interceptor.intercept_service, chain)
        return await chain(handler_call_details)


class Server:
    """A ``grpc.aio`` server with health and reflection, bound at construction.

    Health starts NOT_SERVING for ``""`` and every service; the app calls
    :meth:`set_serving` once every component is ready. Also a lifecycle component:
    :meth:`run` starts it and serves until :meth:`stop`. A service may :meth:`start` it
    before it connects to its dependencies (health NOT_SERVING while it waits) and hand
    it the servicers afterwards with :meth:`add_services`.

    With ``config.tls_cert_file`` set the port serves TLS only, and with
    ``config.tls_client_ca_file`` too, only to clients presenting a certificate from that
    CA; the files are re-read when replaced (:class:`~sundial.core.tls.ServerCertificates`).

    Build it with :func:`build_server`.
    """

    name = "grpc-server"

    def __init__(
        self,
        config: ServerConfig,
        *,
        services: Sequence[ServiceRegistration],
        service_names: Sequence[str],
        interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    ) -> None:
        self._config = config
        self._service_names = tuple(service_names)
        # Built without its services, the server is waiting for add_services: until
        # then calls to those services answer UNAVAILABLE, not UNIMPLEMENTED.
        self._late = _LateServices(() if services else self._service_names)
        self._interceptors: tuple[grpc.aio.ServerInterceptor, ...] = (
            ErrorInterceptor(),
            *interceptors,
            _LateInterceptors(self._late),
        )
        self._server = grpc.aio.server(
            # The trace interceptor (none while tracing is off) sits outside the error
            # mapping, so its span records the status the mapping aborts with. Not in
            # self._interceptors: the Connect bridge runs those alone (its calls are not
            # gRPC calls for the instrumentation).
            interceptors=[*server_interceptors(), *self._interceptors],
            # gRPC sets SO_REUSEPORT by default, which lets a second process bind the
            # same fixed port silently and steal half the traffic; fail loudly instead.
            options=[
                ("grpc.so_reuseport", 0),
                *message_limits(config.max_message_bytes),
                *KEEPALIVE_SERVER_OPTIONS,
            ],
        )
        for add, servicer in services:
            add(servicer, self._server)
        self._server.add_generic_rpc_handlers((self._late,))
        self.health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self._server)
        reflected = (*self._service_names, health.SERVICE_NAME, REFLECTION_V1)
        reflection.enable_server_reflection([*reflected, reflection.SERVICE_NAME], self._server)
        self._server.add_generic_rpc_handlers(
            (_reflection_v1([*reflected, reflection.SERVICE_NAME]),)
        )
        host, _, _ = config.listen.rpartition(":")
        self.certificates: ServerCertificates | None = None
        """The TLS files in use (re-read when replaced), or None for plaintext."""
        if config.tls_cert_file is not None and config.tls_key_file is not None:
            self.certificates = ServerCertificates(
                config.tls_cert_file, config.tls_key_file, config.tls_client_ca_file
            )
        try:
            if self.certificates is None:
                port = self._server.add_insecure_port(config.listen)
            else:
                port = self._server.add_secure_port(config.listen, self.certificates.credentials())
        except RuntimeError as exc:
            raise OSError(f"cannot bind gRPC server to {config.listen}: {exc}") from exc
        if port == 0:  # older grpcio reports a failed bind this way
            raise OSError(f"cannot bind gRPC server to {config.listen}")
        self.port: int = port
        """The bound port (the one picked when the config asked for port 0)."""
        self._host = host
        self._started = False
        self._stopped = False

    @property
    def address(self) -> str:
        """``host:port`` with the real bound port, e.g. ``127.0.0.1:53187``."""
        return f"{self._host}:{self.port}"

    @property
    def transport(self) -> str:
        """``plaintext``, ``tls`` or ``mtls`` (clients must present a certificate)."""
        if self.certificates is None:
            return "plaintext"
        return "mtls" if self.certificates.mutual else "tls"

    @property
    def health_names(self) -> tuple[str, ...]:
        """Names whose health this server reports: ``""`` (the whole server) and each service."""
        return ("", *self._service_names)

    async def _set_all(self, status: int) -> None:
        # `status` is a HealthCheckResponse.ServingStatus value (an int on the wire).
        for name in self.health_names:
            await self.health.set(name, status)

    async def set_serving(self) -> None:
        """Report SERVING for the server and every service."""
        await self._set_all(health_pb2.HealthCheckResponse.SERVING)

    async def set_not_serving(self) -> None:
        """Report NOT_SERVING (e.g. a dependency is down); :meth:`set_serving` undoes it."""
        await self._set_all(health_pb2.HealthCheckResponse.NOT_SERVING)

    async def start(self) -> None:
        """Start accepting RPCs, health NOT_SERVING. Idempotent; a no-op after :meth:`stop`."""
        if self._started or self._stopped:
            return
        self._started = True
        # The health servicer starts with "" SERVING; flip it before the first RPC.
        await self.set_not_serving()
        await self._server.start()
        log.info(
            "grpc server listening on %s (%s)",
            self.address,
            self.transport,
            extra={"action": "grpc_server", "address": self.address, "transport": self.transport},
        )

    async def stop(self, grace_s: float | None = None) -> None:
        """Report NOT_SERVING for good, refuse new RPCs and let in-flight ones finish.

        Idempotent and safe before :meth:`start`.

        Args:
            grace_s: Seconds in-flight RPCs get before they are cancelled; defaults to
                the config's ``grace_period_s``.
        """
        if self._stopped:
            return
        self._stopped = True
        await self.health.enter_graceful_shutdown()
        grace = self._config.grace_period_s if grace_s is None else grace_s
        await self._server.stop(grace)

    def add_services(
        self,
        services: Sequence[ServiceRegistration],
        *,
        interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    ) -> None:
        """Register services (and interceptors for them) built after the server was.

        A service builds and starts its server first (:meth:`start`), so health answers
        NOT_SERVING while it waits for its dependencies, and adds the servicers that
        need those dependencies here. They are served from :meth:`run` on (when the app
        starts the server as its last component, as before); until then their methods
        answer UNAVAILABLE. Their names must be among ``service_names``; ``interceptors``
        run after the ones given at construction, for every call.
        """
        self._late.register(services, interceptors)

    async def resolve(
        self, method: str, metadata: Sequence[tuple[str, str]]
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        """The handler this server would serve a call of ``method`` with: found among
        the services added with :meth:`add_services` and passed through the same
        interceptors as on the gRPC port (the error mapping and request id, then every
        interceptor given here or to :meth:`add_services`), or None for an unknown method.

        This is how a second transport serves the same servicers with the same auth,
        validation and errors (:mod:`sundial.core.connect`): it calls the handler with a
        context whose ``abort`` raises.
        """
        details = _CallDetails(method, tuple(metadata))

        async def servicers(
            call: grpc.HandlerCallDetails,
        ) -> grpc.RpcMethodHandler[Any, Any] | None:
            return self._late.service(call)

        chain: _Continuation = servicers
        for interceptor in reversed(self._interceptors):
            chain = functools.partial(interceptor.intercept_service, chain)
        return await chain(details)

    async def run(self, started: Callable[[], None]) -> None:
        """Lifecycle entry point: start (unless started early), serve the services added
        with :meth:`add_services`, report started, serve until stopped."""
        await self.start()
        if self._stopped:  # stop() came first: there is nothing to serve
            return
        self._late.activate()
        started()
        await self._server.wait_for_termination()

    async def wait_for_termination(self, timeout_s: float | None = None) -> bool:
        """Wait until the server has stopped.

        Returns:
            True once it stopped, False if ``timeout_s`` ran out first.
        """
        if self._stopped and not self._started:  # grpc would wait forever here
            return True
        timed_out = await self._server.wait_for_termination(timeout_s)
        return not timed_out


def _reflection_v1(service_names: Sequence[str]) -> grpc.GenericRpcHandler:
    """``grpc.reflection.v1.ServerReflection`` served by grpcio-reflection's own servicer
    (the v1alpha messages are v1's, field for field)."""
    servicer = ReflectionServicer(service_names)
    return grpc.method_handlers_generic_handler(
        REFLECTION_V1,
        {
            "ServerReflectionInfo": grpc.stream_stream_rpc_method_handler(
                servicer.ServerReflectionInfo,
                request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
                response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
            )
        },
    )


def build_server(
    config: ServerConfig,
    *,
    services: Sequence[ServiceRegistration],
    service_names: Sequence[str],
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
) -> Server:
    """Build a service's gRPC server; it is bound but not started.

    Args:
        config: Listen address, shutdown grace, message size and TLS files.
        services: ``(add_XServicer_to_server, servicer)`` pairs to register.
        service_names: Full names of those services (``sundial.v1.JobService``), reported
            by health and listed by reflection; health and reflection are added to both.
        interceptors: Extra interceptors, run after :class:`ErrorInterceptor` in order.

    Returns:
        The server; ``server.address`` already holds the bound port.

    Raises:
        OSError: The address cannot be bound.
        TlsError: The configured TLS files do not load.
    """
    return Server(config, services=services, service_names=service_names, interceptors=interceptors)
