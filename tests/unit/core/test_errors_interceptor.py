"""ErrorInterceptor through a real grpc.aio server: every error class, every handler shape."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
import pytest
from google.rpc import status_pb2
from grpc_status import rpc_status

from sundial.client import RETRY_SERVICE_CONFIG, error_details
from sundial.core import errors
from sundial.core.config import ServerConfig
from sundial.core.grpc import (
    RETRY_PUSHBACK_METADATA_KEY,
    ErrorInterceptor,
    Server,
    build_server,
)
from sundial.core.logging import request_id_var
from sundial.v1 import job_service_pb2

SERVICE = "sundial.test.Errors"

# What a handler raises for each request payload (the payload names the entry).
ERRORS: dict[str, Callable[[], Exception]] = {
    "InvalidArgument": lambda: errors.InvalidArgument("schedule.cron", "field 2 (hour): 25"),
    "NotFound": lambda: errors.NotFound("job 7 not found"),
    "AlreadyExists": lambda: errors.AlreadyExists("a job named nightly already exists"),
    "FailedPrecondition": lambda: errors.FailedPrecondition("run is not dead"),
    "Aborted": lambda: errors.Aborted("job 7 kept changing; retry"),
    "VersionMismatch": lambda: errors.version_mismatch("job", 7, current=4, expected=3),
    "ResourceExhausted": lambda: errors.ResourceExhausted("tenant at max_jobs"),
    "Unauthenticated": lambda: errors.Unauthenticated("missing bearer token"),
    "PermissionDenied": lambda: errors.PermissionDenied("admin role required"),
    "Unavailable": lambda: errors.Unavailable("database unavailable"),
    "DeadlineExceeded": lambda: errors.DeadlineExceeded("statement timed out"),
}
DELIBERATE = list(ERRORS)
UNEXPECTED = {
    "RuntimeError": lambda: RuntimeError("boom: secret internals"),
    "Internal": lambda: errors.Internal("invariant broken: secret internals"),
}
SHAPES = ["unary", "server_stream", "server_stream_write", "client_stream", "bidi_stream"]


def _error(payload: bytes) -> Exception:
    name = payload.decode()
    return (ERRORS | UNEXPECTED)[name]()


async def _unary(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    raise _error(request)


async def _server_stream(request: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
    yield b"first"
    raise _error(request)


async def _server_stream_write(request: bytes, context: grpc.aio.ServicerContext) -> None:
    await context.write(b"first")
    raise _error(request)


async def _client_stream(
    requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext
) -> bytes:
    async for request in requests:
        raise _error(request)
    return b"unreachable"


async def _bidi_stream(
    requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext
) -> AsyncIterator[bytes]:
    async for request in requests:
        yield b"ack"
        raise _error(request)


async def _request_id(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    return (request_id_var.get() or "").encode()


async def _custom_abort(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    await context.abort(grpc.StatusCode.OUT_OF_RANGE, "handler chose this")
    return b""


async def _ok(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    return request


def _register(servicer: object, server: grpc.aio.Server) -> None:
    handlers = {
        "unary": grpc.unary_unary_rpc_method_handler(_unary),
        "server_stream": grpc.unary_stream_rpc_method_handler(_server_stream),
        "server_stream_write": grpc.unary_stream_rpc_method_handler(_server_stream_write),
        "client_stream": grpc.stream_unary_rpc_method_handler(_client_stream),
        "bidi_stream": grpc.stream_stream_rpc_method_handler(_bidi_stream),
        "request_id": grpc.unary_unary_rpc_method_handler(_request_id),
        "custom_abort": grpc.unary_unary_rpc_method_handler(_custom_abort),
        "ok": grpc.unary_unary_rpc_method_handler(_ok),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))


class _RejectAll(grpc.aio.ServerInterceptor):
    """An auth-like interceptor that raises before any handler exists."""

    async def intercept_service(self, continuation: Any, details: grpc.HandlerCallDetails) -> Any:
        if details.method.endswith("/ok"):
            raise errors.Unauthenticated("missing bearer token")
        return await continuation(details)


async def _serve(*interceptors: grpc.aio.ServerInterceptor) -> Server:
    server = build_server(
        ServerConfig(listen="127.0.0.1:0", grace_period_s=0),
        services=[(_register, None)],
        service_names=[SERVICE],
        interceptors=interceptors,
    )
    await server.start()
    return server


@pytest.fixture
async def channel() -> AsyncIterator[grpc.aio.Channel]:
    server = await _serve()
    async with grpc.aio.insecure_channel(server.address) as chan:
        yield chan
    await server.stop(0)


async def _call(
    chan: grpc.aio.Channel, shape: str, payload: bytes, metadata: tuple[tuple[str, str], ...] = ()
) -> tuple[list[bytes], grpc.aio.AioRpcError]:
    """Make one RPC of ``shape`` expected to fail; return what arrived before, and the error."""
    method = f"/{SERVICE}/{shape}"
    received: list[bytes] = []
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        if shape == "unary":
            await chan.unary_unary(method)(payload, metadata=metadata, timeout=10)
        elif shape in ("server_stream", "server_stream_write"):
            async for item in chan.unary_stream(method)(payload, metadata=metadata, timeout=10):
                received.append(item)
        elif shape == "client_stream":
            await chan.stream_unary(method)(iter([payload]), metadata=metadata, timeout=10)
        else:
            async for item in chan.stream_stream(method)(
                iter([payload]), metadata=metadata, timeout=10
            ):
                received.append(item)
    return received, caught.value


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", DELIBERATE)
async def test_sundial_errors_map_to_their_code_and_message(
    channel: grpc.aio.Channel, shape: str, name: str
) -> None:
    expected = ERRORS[name]()
    assert isinstance(expected, errors.SundialError)
    received, error = await _call(channel, shape, name.encode())
    assert error.code() == expected.code
    assert error.details() == expected.message
    if shape in ("server_stream", "server_stream_write", "bidi_stream"):
        assert received  # messages sent before the error still reach the client


def details_of(error: grpc.aio.AioRpcError) -> dict[str, Any]:
    """The google.rpc.Status details of ``error``, by type name (none of another type)."""
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    assert status is not None, "no grpc-status-details-bin trailer"
    assert isinstance(status, status_pb2.Status)
    assert (status.code, status.message) == (error.code().value[0], error.details())
    found = error_details(error)
    assert len(found) == len(status.details), "a detail of an unexpected type"
    return found


# ErrorInfo.reason by error; which also carry RetryInfo (seconds) or a precondition.
REASONS = {
    "InvalidArgument": "INVALID_ARGUMENT",
    "NotFound": "NOT_FOUND",
    "AlreadyExists": "ALREADY_EXISTS",
    "FailedPrecondition": "FAILED_PRECONDITION",
    "Aborted": "CONCURRENT_CHANGE",
    "VersionMismatch": "VERSION_MISMATCH",
    "ResourceExhausted": "QUOTA_EXCEEDED",
    "Unauthenticated": "UNAUTHENTICATED",
    "PermissionDenied": "PERMISSION_DENIED",
    "Unavailable": "UNAVAILABLE",
    "DeadlineExceeded": "DEADLINE_EXCEEDED",
}
RETRY_S = {"Aborted": 0.1, "Unavailable": 1.0}


@pytest.mark.parametrize("shape", ["unary", "server_stream", "bidi_stream"])
@pytest.mark.parametrize("name", DELIBERATE)
async def test_every_error_carries_google_rpc_status_details(
    channel: grpc.aio.Channel, shape: str, name: str
) -> None:
    _, error = await _call(channel, shape, name.encode(), (("x-request-id", "req-77"),))
    details = details_of(error)
    info = details.pop("ErrorInfo")
    assert (info.reason, info.domain) == (REASONS[name], "sundial")
    assert details.pop("RequestInfo").request_id == "req-77"
    if name == "InvalidArgument":
        [violation] = details.pop("BadRequest").field_violations
        assert (violation.field, violation.description) == ("schedule.cron", "field 2 (hour): 25")
        assert dict(info.metadata) == {"field": "schedule.cron"}
    if name in RETRY_S:
        delay = details.pop("RetryInfo").retry_delay
        assert delay.ToTimedelta().total_seconds() == RETRY_S[name]
    if name == "VersionMismatch":
        [violation] = details.pop("PreconditionFailure").violations
        assert (violation.type, violation.subject) == ("VERSION", "jobs/7")
        assert dict(info.metadata) == {"current_version": "4", "expected_version": "3"}
        assert error.details() == "job 7 is at version 4, not 3; re-read and retry"
    assert details == {}, f"unexpected details for {name}: {list(details)}"


async def test_an_internal_error_carries_only_its_reason_and_request_id(
    channel: grpc.aio.Channel,
) -> None:
    _, error = await _call(channel, "unary", b"RuntimeError", (("x-request-id", "req-9"),))
    details = details_of(error)
    assert details["ErrorInfo"].reason == "INTERNAL"
    assert dict(details["ErrorInfo"].metadata) == {}
    assert details["RequestInfo"].request_id == "req-9"
    assert set(details) == {"ErrorInfo", "RequestInfo"}
    assert b"secret" not in rpc_status.from_call(error).SerializeToString()  # type: ignore[arg-type, union-attr]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", list(UNEXPECTED))
async def test_unexpected_errors_become_internal_with_a_logged_traceback(
    channel: grpc.aio.Channel, shape: str, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="sundial.core.grpc")
    request_id = f"req-{uuid.uuid4().hex[:8]}"
    _, error = await _call(channel, shape, name.encode(), (("x-request-id", request_id),))

    assert error.code() == grpc.StatusCode.INTERNAL
    assert error.details() == f"internal error (request id: {request_id})"
    assert "secret" not in error.details()
    assert ("x-request-id", request_id) in tuple(error.trailing_metadata() or ())
    [record] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert record.exc_info is not None
    assert type(record.exc_info[1]).__name__ == name
    assert record.request_id == request_id  # type: ignore[attr-defined]
    assert record.rpc_method == f"/{SERVICE}/{shape}"  # type: ignore[attr-defined]
    assert "secret internals" in caplog.text  # the traceback is in the log, not the reply


async def test_request_id_comes_from_metadata(channel: grpc.aio.Channel) -> None:
    reply = await channel.unary_unary(f"/{SERVICE}/request_id")(
        b"", metadata=(("x-request-id", "abc-123"),), timeout=10
    )
    assert reply == b"abc-123"


@pytest.mark.parametrize("metadata", [(), (("x-request-id", "has spaces; and junk"),)])
async def test_request_id_is_a_new_uuid_when_absent_or_unsafe(
    channel: grpc.aio.Channel, metadata: tuple[tuple[str, str], ...]
) -> None:
    reply = await channel.unary_unary(f"/{SERVICE}/request_id")(b"", metadata=metadata, timeout=10)
    assert uuid.UUID(reply.decode()).version == 4


async def test_handler_abort_passes_through(channel: grpc.aio.Channel) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await channel.unary_unary(f"/{SERVICE}/custom_abort")(b"", timeout=10)
    assert caught.value.code() == grpc.StatusCode.OUT_OF_RANGE
    assert caught.value.details() == "handler chose this"


async def test_unknown_method_is_still_unimplemented(channel: grpc.aio.Channel) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await channel.unary_unary(f"/{SERVICE}/nope")(b"", timeout=10)
    assert caught.value.code() == grpc.StatusCode.UNIMPLEMENTED


async def test_errors_raised_by_a_later_interceptor_are_mapped() -> None:
    server = await _serve(_RejectAll())
    try:
        async with grpc.aio.insecure_channel(server.address) as chan:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await chan.unary_unary(f"/{SERVICE}/ok")(b"x", timeout=10)
            assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert caught.value.details() == "missing bearer token"
            # Other methods still pass through the chain to their handlers.
            assert (
                await chan.unary_unary(f"/{SERVICE}/request_id")(
                    b"", metadata=(("x-request-id", "r1"),), timeout=10
                )
                == b"r1"
            )
    finally:
        await server.stop(0)


async def test_interceptor_works_on_a_bare_aio_server() -> None:
    server = grpc.aio.server(interceptors=[ErrorInterceptor()])
    _register(None, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as chan:
            _, error = await _call(chan, "unary", b"NotFound")
            assert error.code() == grpc.StatusCode.NOT_FOUND
    finally:
        await server.stop(0)


async def _decoded(request: Any, context: grpc.aio.ServicerContext) -> bytes:
    return request.job_id.encode()


def _register_decoding(servicer: object, server: grpc.aio.Server) -> None:
    handler = grpc.unary_unary_rpc_method_handler(
        _decoded, request_deserializer=job_service_pb2.GetJobRequest.FromString
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(SERVICE, {"decode": handler}),)
    )


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"\x0a\x02\xff\xfe", id="invalid-utf8-in-a-string"),
        pytest.param(b"\x0a\x09abc", id="truncated"),
        pytest.param(b"\xff\xff\xff", id="garbage"),
    ],
)
async def test_an_undecodable_request_is_invalid_argument_not_unknown(body: bytes) -> None:
    server = build_server(
        ServerConfig(listen="127.0.0.1:0", grace_period_s=0),
        services=[(_register_decoding, None)],
        service_names=[SERVICE],
    )
    await server.start()
    try:
        async with grpc.aio.insecure_channel(server.address) as chan:
            call = chan.unary_unary(f"/{SERVICE}/decode")
            assert await call(b"\x0a\x03abc", timeout=10) == b"abc"  # a good body decodes
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await call(body, timeout=10)
    finally:
        await server.stop(0)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "not a valid message" in (caught.value.details() or "")
    assert "DecodeError" not in (caught.value.details() or "")


@pytest.mark.parametrize(
    ("name", "pushback", "retried"),
    [
        ("Aborted", "100", True),  # a write that lost a race: the same call may succeed
        ("VersionMismatch", "-1", False),  # a stale expected_version: re-read first
        ("ResourceExhausted", "-1", False),  # a quota: the same call fails again
    ],
)
async def test_the_client_retry_policy_follows_the_servers_pushback(
    name: str, pushback: str, retried: bool
) -> None:
    calls = 0

    async def fails_twice(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        nonlocal calls
        calls += 1
        if calls <= 2:
            raise _error(request)
        return b"done"

    def register(servicer: object, server: grpc.aio.Server) -> None:
        method = grpc.unary_unary_rpc_method_handler(fails_twice)
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(SERVICE, {"flaky": method}),)
        )

    server = build_server(
        ServerConfig(listen="127.0.0.1:0", grace_period_s=0),
        services=[(register, None)],
        service_names=[SERVICE],
    )
    await server.start()
    # The shipped client's retry policy, for this test's service.
    config = json.loads(RETRY_SERVICE_CONFIG)
    config["methodConfig"][0]["name"] = [{"service": SERVICE}]
    retrying = [("grpc.enable_retries", 1), ("grpc.service_config", json.dumps(config))]
    try:
        # The first failure, seen by a channel that never retries: its pushback.
        async with grpc.aio.insecure_channel(server.address) as chan:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await chan.unary_unary(f"/{SERVICE}/flaky")(name.encode(), timeout=10)
        assert caught.value.code() == ERRORS[name]().code  # type: ignore[attr-defined]
        trailing = tuple(caught.value.trailing_metadata() or ())
        assert (RETRY_PUSHBACK_METADATA_KEY, pushback) in trailing
        # The second fails too, the third answers: the client's channel reaches it
        # only when the pushback let it retry.
        async with grpc.aio.insecure_channel(server.address, options=retrying) as chan:
            call = chan.unary_unary(f"/{SERVICE}/flaky")(name.encode(), timeout=10)
            if retried:
                assert await call == b"done"
                assert calls == 3
                return
            with pytest.raises(grpc.aio.AioRpcError):
                await call
            assert calls == 2
    finally:
        await server.stop(0)
