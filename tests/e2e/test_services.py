"""The three services as real processes: health, reflection, graceful SIGTERM."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from collections.abc import Iterator

import grpc
import pytest
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from sundial.devstack import Services, Stack, health_status
from tests.helpers.stack import on_server_thread

GRACE_S = 5.0

EXPECTED = {
    "api": {"sundial.v1.JobService", "sundial.v1.AdminService"},
    "scheduler": {"sundial.internal.v1.RunLedgerService"},
    "executor": set(),
}


@pytest.fixture(scope="module")
def services(
    stack: Stack, module_database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Services]:
    """One start for the module: the health test reads them, then the SIGTERM test (last
    in the file, so last to run) stops them; stopping what already exited is a no-op."""
    running = Services(
        stack,
        log_dir=tmp_path_factory.mktemp("services"),
        extra_env={
            "SUNDIAL_DATABASE_URL": module_database_url,
            "SUNDIAL_GRACE_PERIOD_S": str(GRACE_S),
            "SUNDIAL_ADMIN_TOKEN": "test-admin-token-0123456789",
        },
    )
    on_server_thread(running.start)
    yield running
    on_server_thread(running.stop)


async def _list_services(address: str) -> set[str]:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        request = reflection_pb2.ServerReflectionRequest(list_services="")
        async for answer in stub.ServerReflectionInfo(iter([request]), timeout=5):
            return {s.name for s in answer.list_services_response.service}
    raise AssertionError("reflection returned no answer")


async def test_each_service_serves_health_and_reflection(services: Services) -> None:
    for name, wanted in EXPECTED.items():
        address = services.processes[name].address
        assert await asyncio.to_thread(health_status, address) == "SERVING", name
        for service_name in wanted:
            status = await asyncio.to_thread(health_status, address, service_name)
            assert status == "SERVING", (name, service_name)
        listed = await _list_services(address)
        assert wanted <= listed, (name, listed)
        assert "grpc.health.v1.Health" in listed


async def test_sigterm_stops_each_service_within_its_grace_period(services: Services) -> None:
    for name in ("executor", "scheduler", "api"):  # dependents first, as in production
        managed = services.processes[name].process
        assert managed.proc is not None
        began = time.monotonic()
        managed.proc.send_signal(signal.SIGTERM)
        try:
            code = await asyncio.to_thread(managed.proc.wait, GRACE_S * 2)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{name} still running {GRACE_S * 2:.0f} s after SIGTERM")
        elapsed = time.monotonic() - began
        assert code == 0, f"{name} exited with {code}"
        assert elapsed < GRACE_S, f"{name} took {elapsed:.1f} s to stop"
        assert await asyncio.to_thread(health_status, services.processes[name].address) == (
            "UNREACHABLE"
        )
