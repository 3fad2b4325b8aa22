"""build_server: bound address, health NOT_SERVING until set_serving, reflection lists services."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2

from sundial.core.config import ServerConfig
from sundial.core.grpc import Server, build_server

NAMES = ["sundial.test.Alpha", "sundial.test.Beta"]
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def _no_services(servicer: object, server: grpc.aio.Server) -> None:
    """Registration stand-in: health and reflection need no real servicer to be tested."""


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    built = build_server(
        ServerConfig(listen="127.0.0.1:0", grace_period_s=0),
        services=[(_no_services, None)],
        service_names=NAMES,
    )
    yield built
    await built.stop(0)


async def _statuses(address: str) -> dict[str, int]:
    async with grpc.aio.insecure_channel(address) as chan:
        stub = health_pb2_grpc.HealthStub(chan)
        return {
            name: (await stub.Check(health_pb2.HealthCheckRequest(service=name), timeout=5)).status
            for name in ["", *NAMES]
        }


async def test_address_has_the_bound_port(server: Server) -> None:
    host, _, port = server.address.rpartition(":")
    assert host == "127.0.0.1"
    assert int(port) == server.port > 0


async def test_health_is_not_serving_until_set_serving(server: Server) -> None:
    await server.start()
    assert await _statuses(server.address) == dict.fromkeys(["", *NAMES], NOT_SERVING)

    await server.set_serving()
    assert await _statuses(server.address) == dict.fromkeys(["", *NAMES], SERVING)

    await server.set_not_serving()
    assert await _statuses(server.address) == dict.fromkeys(["", *NAMES], NOT_SERVING)


async def test_unknown_service_health_is_not_found(server: Server) -> None:
    await server.start()
    async with grpc.aio.insecure_channel(server.address) as chan:
        stub = health_pb2_grpc.HealthStub(chan)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.Check(health_pb2.HealthCheckRequest(service="nope.Service"), timeout=5)
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND


async def test_watch_sees_serving_then_not_serving_on_stop(server: Server) -> None:
    await server.start()
    async with grpc.aio.insecure_channel(server.address) as chan:
        watch = health_pb2_grpc.HealthStub(chan).Watch(
            health_pb2.HealthCheckRequest(service=""), timeout=10
        )
        assert (await watch.read()).status == NOT_SERVING
        await server.set_serving()
        assert (await watch.read()).status == SERVING
        # Graceful shutdown flips health first, while in-flight calls (this watch) drain.
        stopping = asyncio.create_task(server.stop(grace_s=10))
        assert (await watch.read()).status == NOT_SERVING
        watch.cancel()
        await asyncio.wait_for(stopping, timeout=10)


@pytest.mark.parametrize("version", ["v1", "v1alpha"])
async def test_reflection_lists_services_health_and_itself(server: Server, version: str) -> None:
    await server.start()
    # v1 is v1alpha's messages under another service name (grpcurl and buf curl ask v1
    # first): one raw call with the v1alpha messages works for both.
    method = f"/grpc.reflection.{version}.ServerReflection/ServerReflectionInfo"
    async with grpc.aio.insecure_channel(server.address) as chan:
        call = chan.stream_stream(
            method,
            request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
            response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
        )
        requests = [
            reflection_pb2.ServerReflectionRequest(list_services=""),
            reflection_pb2.ServerReflectionRequest(file_containing_symbol="grpc.health.v1.Health"),
        ]
        responses = [r async for r in call(iter(requests), timeout=5)]
    listed = {s.name for s in responses[0].list_services_response.service}
    assert listed == {
        *NAMES,
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
        "grpc.reflection.v1alpha.ServerReflection",
    }
    assert responses[1].file_descriptor_response.file_descriptor_proto


async def test_stop_is_idempotent_and_safe_before_start() -> None:
    built = build_server(ServerConfig(), services=[], service_names=[])
    await built.stop()
    await built.stop()
    await built.start()  # a stopped server never starts
    assert await built.wait_for_termination(timeout_s=10)


async def test_binding_a_taken_port_fails_loudly() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError, match=str(port)):
            build_server(ServerConfig(listen=f"127.0.0.1:{port}"), services=[], service_names=[])


async def test_run_reports_started_and_returns_after_stop(server: Server) -> None:
    started = asyncio.Event()
    task = asyncio.create_task(server.run(started.set))
    await asyncio.wait_for(started.wait(), timeout=10)
    assert await _statuses(server.address) == dict.fromkeys(["", *NAMES], NOT_SERVING)
    await server.stop(0)
    await asyncio.wait_for(task, timeout=10)
    assert await server.wait_for_termination(timeout_s=10)


async def test_wait_for_termination_times_out_while_serving(server: Server) -> None:
    await server.start()
    assert not await server.wait_for_termination(timeout_s=0.01)
