"""The local stack starts real servers, runs side by side with another, leaves nothing."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import shutil
import socket
import sys
import urllib.request
from pathlib import Path

import asyncpg
import pytest

from sundial.core.bus import connect_bus
from sundial.core.coord import connect_etcd
from sundial.devstack import Stack
from tests.helpers.eventually import assert_eventually


async def _check_servers(stack: Stack) -> str:
    conn = await asyncpg.connect(stack.database_url)
    try:
        version = await conn.fetchval("SHOW server_version")
        assert await conn.fetchval("SHOW listen_addresses") == "127.0.0.1"
    finally:
        await conn.close()
    bus = await connect_bus(stack.nats_config(), name="devstack-test")
    try:
        info = await bus.jetstream.account_info()
        assert info.limits is not None  # JetStream is enabled
    finally:
        await bus.close()
    assert await asyncio.to_thread(_etcd_health, stack.etcd_endpoints[0]) == "true"
    etcd = await connect_etcd(stack.etcd_config())
    try:
        await etcd.put(b"/sundial/devstack-test", b"1")
    finally:
        await etcd.close()
    return str(version)


def _etcd_health(endpoint: str) -> str:
    with urllib.request.urlopen(f"http://{endpoint}/health", timeout=5) as answer:
        return str(json.loads(answer.read())["health"])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is gone as a server.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:  # reaped between the two checks
        return False


async def test_two_stacks_run_side_by_side_and_stop_cleanly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for var in ("SUNDIAL_DATABASE_URL", "SUNDIAL_NATS_URL", "SUNDIAL_ETCD_ENDPOINTS"):
        monkeypatch.delenv(var, raising=False)
    first, second = Stack(), Stack()
    await asyncio.to_thread(first.start)
    try:
        await asyncio.to_thread(second.start)
        try:
            assert first.database_url != second.database_url
            assert first.nats_url != second.nats_url
            assert first.etcd_endpoints != second.etcd_endpoints
            await _check_servers(first)
            await _check_servers(second)
            pids = [s._process.pid for s in first._started + second._started]  # type: ignore[union-attr]
            assert len(pids) == 6 and all(pids)
        finally:
            await asyncio.to_thread(second.stop)
    finally:
        await asyncio.to_thread(first.stop)
    assert not [pid for pid in pids if _alive(pid)]
    assert first.data_dir is not None and not first.data_dir.exists()


async def test_environment_points_at_existing_servers(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUNDIAL_DATABASE_URL", stack.database_url)
    monkeypatch.setenv("SUNDIAL_NATS_URL", stack.nats_url)
    monkeypatch.setenv("SUNDIAL_ETCD_ENDPOINTS", ",".join(stack.etcd_endpoints))
    # Servers it did not start: their credentials come from the environment too.
    user, password = stack.nats_users["admin"]
    monkeypatch.setenv("SUNDIAL_NATS_USER", user)
    monkeypatch.setenv("SUNDIAL_NATS_PASSWORD", password)
    assert stack.etcd_user is not None
    monkeypatch.setenv("SUNDIAL_ETCD_USER", stack.etcd_user[0])
    monkeypatch.setenv("SUNDIAL_ETCD_PASSWORD", stack.etcd_user[1])
    reused = Stack()
    await asyncio.to_thread(reused.start)
    try:
        assert reused.env() == stack.env()
        assert reused._started == []
        await _check_servers(reused)
    finally:
        reused.stop()
    # The servers it reused are still there.
    await _check_servers(stack)


_HOLDER = """
import json, os, signal, sys
from sundial.devstack import Stack
stack = Stack().start()
pids = [server._process.pid for server in stack._started]
print(json.dumps({"pids": pids, "data_dir": str(stack.data_dir)}), flush=True)
signal.pause()  # hold the stack until killed
"""


async def test_servers_die_with_a_killed_parent(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("SUNDIAL_DATABASE_URL", "SUNDIAL_NATS_URL", "SUNDIAL_ETCD_ENDPOINTS"):
        monkeypatch.delenv(var, raising=False)
    holder = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _HOLDER, stdout=asyncio.subprocess.PIPE
    )
    assert holder.stdout is not None
    try:
        async with asyncio.timeout(60):
            started = json.loads(await holder.stdout.readline())
        pids = started["pids"]
        assert len(pids) == 3 and all(_alive(pid) for pid in pids)
    finally:
        holder.kill()  # SIGKILL: no cleanup code of the parent runs
        await holder.wait()
    await assert_eventually(
        lambda: _assert_all_gone(pids), timeout_s=15, what="servers of the killed parent"
    )
    # The killed parent could not remove its data folder; the test does.
    shutil.rmtree(started["data_dir"])


def _assert_all_gone(pids: list[int]) -> None:
    left = [pid for pid in pids if _alive(pid)]
    assert not left, f"still running: {left}"


@pytest.mark.parametrize(
    ("module", "start"),
    [("_nats", "nats_cluster"), ("_etcd", "etcd_cluster")],
    ids=["nats", "etcd"],
)
def test_a_cluster_whose_picked_port_is_taken_starts_again_on_other_ports(
    module: str, start: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ports are picked free (bind to port 0, release) and bound later by the servers: one
    taken meanwhile by another process costs a new try on other ports, not the start."""
    servers = importlib.import_module(f"sundial.devstack.{module}")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        picks = iter([port])
        real = servers.free_port
        monkeypatch.setattr(servers, "free_port", lambda: next(picks, None) or real())
        nodes = getattr(servers, start)(tmp_path, 3)
        try:
            assert len(nodes) == 3
            assert port not in {node.port for node in nodes}
            assert all(node.pid is not None for node in nodes)
        finally:
            for node in nodes:
                node.stop()
