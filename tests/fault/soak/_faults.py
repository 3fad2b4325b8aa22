"""Fault injectors: each breaks one real thing of a running deployment for a while.

Processes are signalled by pid (kill -9, SIGSTOP/SIGCONT); a killed service is started
again on the same address through its :class:`~sundial.devstack.ServiceProcess`, a
killed server (PostgreSQL, a NATS node, an etcd member) on the same port and data.
Connections are broken in the :class:`~tests.helpers.tcp_proxy.TcpProxy` every service
reaches its dependencies through. Every injector returns the fault's actual window.

Sleeps here are the faults' lengths (how long a process stays frozen or dead), never a
wait for an outcome: readiness after a restart is polled under a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

import asyncpg

from sundial.devstack import EtcdServer, NatsServer, ServiceProcess, Stack
from sundial.devstack._postgres import PostgresServer
from sundial.devstack._process import ManagedProcess
from tests.fault.soak._plan import FaultKind, PlannedFault
from tests.helpers.eventually import assert_eventually
from tests.helpers.tcp_proxy import TcpProxy

T = TypeVar("T")

RESTART_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class FaultWindow:
    """A fault as it happened: from the moment it hit until it was over (a frozen
    process resumed, a killed one serving again, a proxy passing again)."""

    kind: FaultKind
    victim: str
    start: float
    """Unix seconds."""
    end: float
    """Unix seconds."""
    planned_s: float
    note: str = ""

    def holds(self, at: float) -> bool:
        return self.start <= at <= self.end


@dataclass
class StackServers:
    """The servers a :class:`Stack` started (``Stack.postgres``, ``nats_nodes``,
    ``etcd_members``)."""

    postgres: PostgresServer
    nats_nodes: list[NatsServer]
    etcd_members: list[EtcdServer]

    @classmethod
    def of(cls, stack: Stack) -> StackServers:
        if stack.postgres is None or not stack.nats_nodes or not stack.etcd_members:
            raise RuntimeError("the soak needs a stack that started all three servers itself")
        return cls(stack.postgres, list(stack.nats_nodes), list(stack.etcd_members))


def server_process(server: PostgresServer | NatsServer | EtcdServer) -> ManagedProcess:
    """The :class:`ManagedProcess` of a stack server (``server._process``: the servers
    expose their pid, and the injectors also wait for the process to end)."""
    process = server._process
    if not isinstance(process, ManagedProcess) or process.proc is None:
        raise RuntimeError(f"{server!r} has no running process")
    return process


@dataclass
class Deployment:
    """What the injectors act on."""

    servers: StackServers
    postgres_url: str
    """PostgreSQL reached directly (not through its proxy): readiness after a restart."""
    schedulers: list[ServiceProcess]
    executors: list[ServiceProcess]
    proxies: dict[str, list[TcpProxy]]
    """``postgres``, ``nats``, ``etcd``: one proxy per upstream server."""
    process_thread: ThreadPoolExecutor
    """One long-lived thread starting every child process (the parent-death signal of a
    child is tied to the thread that forked it)."""
    frozen: set[int] = field(default_factory=set)
    """Pids stopped by SIGSTOP now (resumed by :meth:`resume_all` whatever happens)."""

    async def in_process_thread(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.process_thread, fn)

    def resume_all(self) -> None:
        for pid in list(self.frozen):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
            self.frozen.discard(pid)


class Injector:
    """Injects :class:`PlannedFault` s into a :class:`Deployment`."""

    def __init__(self, deployment: Deployment) -> None:
        self.d = deployment
        d = deployment
        self._handlers: dict[FaultKind, Callable[[PlannedFault], Awaitable[FaultWindow]]] = {
            FaultKind.KILL_SCHEDULER: lambda f: self._kill_service(f, d.schedulers),
            FaultKind.KILL_EXECUTOR: lambda f: self._kill_service(f, d.executors),
            FaultKind.STOP_SCHEDULER: lambda f: self._freeze_service(f, d.schedulers),
            FaultKind.STOP_EXECUTOR: lambda f: self._freeze_service(f, d.executors),
            FaultKind.RESTART_POSTGRES: self._restart_postgres,
            FaultKind.RESTART_NATS: self._restart_nats,
            FaultKind.CUT_POSTGRES: lambda f: self._cut(f, "postgres"),
            FaultKind.CUT_NATS: lambda f: self._cut(f, "nats"),
            FaultKind.CUT_ETCD: lambda f: self._cut(f, "etcd"),
            FaultKind.BLACKHOLE_POSTGRES: lambda f: self._blackhole(f, "postgres"),
            FaultKind.BLACKHOLE_NATS: lambda f: self._blackhole(f, "nats"),
            FaultKind.BLACKHOLE_ETCD: lambda f: self._blackhole(f, "etcd"),
            FaultKind.LOSE_NATS_NODE: lambda f: self._lose_node(f, d.servers.nats_nodes),
            FaultKind.LOSE_ETCD_MEMBER: lambda f: self._lose_node(f, d.servers.etcd_members),
        }

    async def inject(self, fault: PlannedFault) -> FaultWindow:
        """Break what ``fault`` says for its length; returns when it is over."""
        return await self._handlers[fault.kind](fault)

    # --- processes ------------------------------------------------------------------

    async def _kill_service(
        self, fault: PlannedFault, processes: Sequence[ServiceProcess]
    ) -> FaultWindow:
        service = processes[fault.victim]
        proc = service.process.proc
        assert proc is not None
        start = time.time()
        proc.send_signal(signal.SIGKILL)
        await asyncio.to_thread(proc.wait, 10)
        await asyncio.sleep(fault.duration_s)  # dead for this long
        began = time.monotonic()
        # The same address (and so the same ledger address and node id) as before.
        await self.d.in_process_thread(lambda: service.start(RESTART_TIMEOUT_S))
        return FaultWindow(
            fault.kind,
            _label(service),
            start,
            time.time(),
            fault.duration_s,
            f"serving again {time.monotonic() - began:.1f} s after its start",
        )

    async def _freeze_service(
        self, fault: PlannedFault, processes: Sequence[ServiceProcess]
    ) -> FaultWindow:
        service = processes[fault.victim]
        pid = service.process.pid
        assert pid is not None
        return await self._freeze(fault, pid, _label(service))

    async def _freeze(self, fault: PlannedFault, pid: int, label: str) -> FaultWindow:
        start = time.time()
        os.kill(pid, signal.SIGSTOP)
        self.d.frozen.add(pid)
        try:
            await asyncio.sleep(fault.duration_s)  # frozen for this long
        finally:
            os.kill(pid, signal.SIGCONT)
            self.d.frozen.discard(pid)
        return FaultWindow(fault.kind, label, start, time.time(), fault.duration_s)

    # --- servers --------------------------------------------------------------------

    async def _restart_postgres(self, fault: PlannedFault) -> FaultWindow:
        """``pg_ctl restart -m immediate``, done as pg_ctl does it: SIGQUIT to the
        postmaster (immediate shutdown: no checkpoint, crash recovery at the next start),
        then the same command line again, so the same port, data and settings."""
        process = server_process(self.d.servers.postgres)
        proc = process.proc
        assert proc is not None
        start = time.time()
        proc.send_signal(signal.SIGQUIT)
        await asyncio.to_thread(proc.wait, 30)
        await asyncio.sleep(fault.duration_s)  # down for this long
        await self.d.in_process_thread(process.start)
        began = time.monotonic()
        # (assert_eventually's `T | Awaitable[T]` makes mypy infer Never for a coroutine.)
        await assert_eventually(
            self._postgres_answers,  # type: ignore[arg-type]
            timeout_s=RESTART_TIMEOUT_S,
            interval_s=0.1,
            what="postgres",
        )
        return FaultWindow(
            fault.kind,
            "postgres",
            start,
            time.time(),
            fault.duration_s,
            f"recovered in {time.monotonic() - began:.1f} s",
        )

    async def _postgres_answers(self) -> bool:
        try:
            conn = await asyncpg.connect(self.d.postgres_url, timeout=2)
        except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
            raise AssertionError(f"postgres not up: {exc!r}") from exc
        await conn.close()
        return True

    async def _restart_nats(self, fault: PlannedFault) -> FaultWindow:
        """kill -9 of every NATS node, then each started again on its port and store."""
        nodes = self.d.servers.nats_nodes
        start = time.time()
        for node in nodes:
            await _kill_server(node)
        await asyncio.sleep(fault.duration_s)  # down for this long
        for node in nodes:
            await self.d.in_process_thread(lambda n=node: _start_again(n))  # type: ignore[misc]
        return FaultWindow(
            fault.kind, f"{len(nodes)} node(s)", start, time.time(), fault.duration_s
        )

    async def _lose_node(
        self, fault: PlannedFault, nodes: Sequence[NatsServer | EtcdServer]
    ) -> FaultWindow:
        """kill -9 of one node of a three-node cluster; back on the same ports and data
        after the fault's length (``stop()`` then ``start()``)."""
        node = nodes[fault.victim]
        start = time.time()
        await _kill_server(node)
        await asyncio.sleep(fault.duration_s)  # lost for this long
        await self.d.in_process_thread(lambda: _start_again(node))
        name = getattr(node, "name", "") or f"#{fault.victim}"
        return FaultWindow(fault.kind, str(name), start, time.time(), fault.duration_s)

    # --- network --------------------------------------------------------------------

    async def _cut(self, fault: PlannedFault, dependency: str) -> FaultWindow:
        start = time.time()
        reset = sum(proxy.cut() for proxy in self.d.proxies[dependency])
        await asyncio.sleep(fault.duration_s)  # the window covers the reconnections
        return FaultWindow(
            fault.kind, dependency, start, time.time(), fault.duration_s, f"{reset} reset"
        )

    async def _blackhole(self, fault: PlannedFault, dependency: str) -> FaultWindow:
        proxies = self.d.proxies[dependency]
        start = time.time()
        await asyncio.gather(*(proxy.blackhole_for(fault.duration_s) for proxy in proxies))
        held = sum(proxy.connections for proxy in proxies)
        return FaultWindow(
            fault.kind, dependency, start, time.time(), fault.duration_s, f"{held} held"
        )


def _label(service: ServiceProcess) -> str:
    return f"{service.name}-{service.address.rsplit(':', 1)[1]}"


async def _kill_server(server: NatsServer | EtcdServer) -> None:
    proc = server_process(server).proc
    assert proc is not None
    proc.send_signal(signal.SIGKILL)
    await asyncio.to_thread(proc.wait, 10)


def _start_again(server: NatsServer | EtcdServer) -> None:
    """Start a killed server again on its port(s) and data."""
    server.stop()  # reaps the killed process; nothing else to stop
    server.start()
