"""Several executor processes on one host, supervised (``SUNDIAL_EXECUTOR_PROCESSES``).

One executor process runs on one core (one event loop). To use every core of a host,
the supervisor starts N workers, each a whole executor with its own NATS connection to
the one durable consumer all executors share, its own ledger channel, HTTP pool and
``SUNDIAL_MAX_IN_FLIGHT``: JetStream spreads the messages over them as over executors on
different hosts, so nothing else changes (leases, heartbeats and completions stay
batched per worker). The supervisor:

* restarts a worker that exits while the executor is not stopping, after a pause that
  doubles (0.5 s to 30 s) while workers keep dying within 30 s of their start;
* serves no ``/metrics`` itself: worker ``i`` (from 0) serves its own at
  ``SUNDIAL_METRICS_LISTEN``'s port plus ``i`` (each worker's in-flight runs, slots and
  target calls are its own; a scrape of every port sums them);
* serves gRPC health at ``SUNDIAL_LISTEN``: SERVING while every worker answers SERVING
  on its own loopback port (workers serve plaintext there; only the supervisor probes
  them), NOT_SERVING otherwise;
* on SIGTERM or SIGINT turns NOT_SERVING and sends SIGTERM to every worker, each of
  which drains as a single executor does (stops fetching, finishes and reports its
  in-flight runs within ``SUNDIAL_GRACE_PERIOD_S``); a worker still running a margin
  after that is killed. It exits 0 when every worker exited 0.

A worker gets one SIGTERM when its supervisor dies (Linux's parent-death signal), so even
a supervisor killed with SIGKILL leaves no worker behind, and the worker drains as it
would on an operator's SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import socket
import sys
import time
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sundial.core.grpc import Server, build_server
from sundial.core.telemetry import metrics_listen_for_worker
from sundial.core.tls import message_limits
from sundial.executor.config import ExecutorConfig

__all__ = ["SUPERVISOR_PID_ENV", "Supervisor", "die_with_supervisor", "worker_count"]

log = logging.getLogger(__name__)

SUPERVISOR_PID_ENV = "SUNDIAL_EXECUTOR_SUPERVISOR_PID"
"""Set in each worker's environment: the pid of the supervisor it must not outlive."""

_RESTART_MIN_S = 0.5
_RESTART_MAX_S = 30.0
_STABLE_S = 30.0  # a worker that ran this long resets the restart pause
_PROBE_S = 1.0
_PROBE_TIMEOUT_S = 1.0
_KILL_MARGIN_S = 5.0
# Served by the supervisor; a worker's own server listens on loopback, plaintext.
_SERVER_TLS_ENV = ("SUNDIAL_TLS_CERT_FILE", "SUNDIAL_TLS_KEY_FILE", "SUNDIAL_TLS_CLIENT_CA_FILE")
_PR_SET_PDEATHSIG = 1
# What the kernel sends a worker when its supervisor dies. Not SIGTERM itself: Linux sends
# the parent-death signal each time it reparents the worker, and a dying multithreaded
# supervisor (gRPC's threads) hands its children from thread to thread as they exit, so
# the worker gets it several times. Two SIGTERMs mean "now" to sundial.core.lifecycle:
# every component cancelled, held runs abandoned to their leases' expiry, and closing
# NATS after a cancelled fetch was seen to wait out the 30 s drain timeout. The handler
# below turns the first delivery into the one SIGTERM and ignores the rest.
_SUPERVISOR_DIED = signal.SIGHUP
_supervisor_died = False


def worker_count(config: ExecutorConfig) -> int:
    """How many worker processes ``config`` asks for (0: one per core this process may
    run on)."""
    if config.executor_processes > 0:
        return config.executor_processes
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def die_with_supervisor() -> None:
    """In a worker: get one SIGTERM when the supervisor dies, and stop at once if it
    already has (Linux; elsewhere a worker outlives a supervisor killed without SIGTERM)."""
    supervisor = os.environ.get(SUPERVISOR_PID_ENV, "")
    if not supervisor.isdigit() or not sys.platform.startswith("linux"):
        return
    signal.signal(_SUPERVISOR_DIED, _on_supervisor_death)  # before the kernel may send it
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, _SUPERVISOR_DIED, 0, 0, 0)
    if os.getppid() != int(supervisor):  # it died before the signal was armed
        raise SystemExit(0)


def _on_supervisor_death(_signum: int, _frame: object) -> None:
    """The first parent-death signal: SIGTERM to this process, handled by whatever
    handles it then (the default before the event loop, the service's stop after);
    the repeats of the same death are ignored (:data:`_SUPERVISOR_DIED`)."""
    global _supervisor_died  # noqa: PLW0603 (once per process, and only in a handler)
    # Ignoring the signal from now on is not enough: a repeat that arrives before this
    # line is queued for the handler again.
    signal.signal(_SUPERVISOR_DIED, signal.SIG_IGN)
    if _supervisor_died:
        return
    _supervisor_died = True
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # no loop yet: SIGTERM's default ends the process
        os.kill(os.getpid(), signal.SIGTERM)
        return
    # Raised from the loop, not from inside this handler: uvloop runs Python signal
    # handlers while it dispatches the signals it read, and a SIGTERM raised there is
    # dispatched twice (once from its handler's record, once from its wake-up byte),
    # which is again the "second signal".
    loop.call_soon(os.kill, os.getpid(), signal.SIGTERM)


@dataclass
class _Worker:
    index: int
    port: int = 0
    process: asyncio.subprocess.Process | None = None
    started_at: float = 0.0
    early_deaths: int = 0
    serving: bool = False
    stopped_code: int | None = None
    """The exit code of the process the stop ended."""


class Supervisor:
    """Runs ``count`` executor workers until SIGTERM/SIGINT or ``stop_event``.

    Args:
        config: The executor's configuration (the workers read the same environment,
            with their own node id and listen address).
        count: Worker processes.
    """

    def __init__(self, config: ExecutorConfig, count: int) -> None:
        self._config = config
        self._workers = [_Worker(i) for i in range(count)]
        self._stopping = asyncio.Event()

    async def run(
        self, *, install_signal_handlers: bool = True, stop_event: asyncio.Event | None = None
    ) -> int:
        """Supervise until stopped; returns the exit code."""
        loop = asyncio.get_running_loop()
        if install_signal_handlers:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self._stopping.set)
        server = build_server(self._config, services=[], service_names=())
        await server.start()  # NOT_SERVING until every worker serves
        log.info(
            "executor supervisor started with %d workers",
            len(self._workers),
            extra={"action": "lifecycle", "transition": "started", "workers": len(self._workers)},
        )
        watchers = [asyncio.create_task(self._keep(worker)) for worker in self._workers]
        prober = asyncio.create_task(self._probe(server))
        waiters = [asyncio.create_task(self._stopping.wait())]
        if stop_event is not None:
            waiters.append(asyncio.create_task(stop_event.wait()))
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._stopping.set()
            for waiter in waiters:
                waiter.cancel()
            log.info("executor supervisor stopping", extra={"action": "lifecycle"})
            prober.cancel()
            await asyncio.gather(prober, return_exceptions=True)
            await server.set_not_serving()
            await self._stop_all(watchers)
            await server.stop(0)
            if install_signal_handlers:
                for sig in (signal.SIGTERM, signal.SIGINT):
                    loop.remove_signal_handler(sig)
        codes = [w.stopped_code for w in self._workers if w.stopped_code is not None]
        log.info(
            "executor supervisor stopped",
            extra={"action": "lifecycle", "transition": "stopped", "exit_codes": codes},
        )
        return 0 if all(code == 0 for code in codes) else 1

    async def _keep(self, worker: _Worker) -> None:
        """Run ``worker``, and run it again whenever it exits before the stop."""
        while not self._stopping.is_set():
            process = await self._start(worker)
            if self._stopping.is_set():  # the stop came while it was being started
                _terminate(process)
            code = await process.wait()
            worker.serving = False
            if self._stopping.is_set():
                worker.stopped_code = code
                return
            lived_s = time.monotonic() - worker.started_at
            worker.early_deaths = 0 if lived_s >= _STABLE_S else worker.early_deaths + 1
            pause_s = min(_RESTART_MAX_S, _RESTART_MIN_S * 2 ** max(0, worker.early_deaths - 1))
            log.warning(
                "executor worker %d (pid %d) exited with %s after %.1f s; restarting in %.1f s",
                worker.index,
                process.pid,
                code,
                lived_s,
                pause_s,
                extra={"action": "worker.exit", "worker": worker.index, "exit_code": code},
            )
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(pause_s):
                    await self._stopping.wait()

    async def _start(self, worker: _Worker) -> asyncio.subprocess.Process:
        worker.port = _free_loopback_port()
        env = dict(os.environ)
        for name in _SERVER_TLS_ENV:
            env.pop(name, None)
        env.update(
            {
                "SUNDIAL_EXECUTOR_PROCESSES": "1",
                "SUNDIAL_NODE_ID": f"{self._config.node_id}-{worker.index}",
                "SUNDIAL_LISTEN": f"127.0.0.1:{worker.port}",
                SUPERVISOR_PID_ENV: str(os.getpid()),
            }
        )
        if self._config.metrics_listen:
            # Each worker serves its own /metrics: the supervisor's port plus its index.
            env["SUNDIAL_METRICS_LISTEN"] = metrics_listen_for_worker(
                self._config.metrics_listen, worker.index
            )
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "sundial.executor", env=env, stdin=asyncio.subprocess.DEVNULL
        )
        worker.process = process
        worker.started_at = time.monotonic()
        log.info(
            "executor worker %d started (pid %d)",
            worker.index,
            process.pid,
            extra={"action": "worker.start", "worker": worker.index, "pid": process.pid},
        )
        return process

    async def _probe(self, server: Server) -> None:
        """Keep the supervisor's health at SERVING exactly while every worker serves."""
        serving = False
        while True:
            for worker in self._workers:
                worker.serving = await _serving(worker)
            now = all(w.serving for w in self._workers)
            if now != serving:
                await (server.set_serving() if now else server.set_not_serving())
                serving = now
            await asyncio.sleep(_PROBE_S)

    async def _stop_all(self, watchers: list[asyncio.Task[None]]) -> None:
        """SIGTERM every worker and wait until each watcher saw its worker exit (SIGKILL
        past the grace period and a margin)."""
        for worker in self._workers:
            if worker.process is not None and worker.process.returncode is None:
                _terminate(worker.process)
        deadline_s = self._config.grace_period_s + _KILL_MARGIN_S
        try:
            async with asyncio.timeout(deadline_s):
                await asyncio.gather(*watchers)
        except TimeoutError:
            for worker in self._workers:
                process = worker.process
                if process is not None and process.returncode is None:
                    log.error(
                        "executor worker %d (pid %d) still running %.0f s after SIGTERM; "
                        "killing it",
                        worker.index,
                        process.pid,
                        deadline_s,
                        extra={"action": "worker.kill", "worker": worker.index},
                    )
                    with contextlib.suppress(ProcessLookupError):
                        process.kill()
            await asyncio.gather(*watchers)


def _terminate(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signal.SIGTERM)


async def _serving(worker: _Worker) -> bool:
    if worker.process is None or worker.process.returncode is not None:
        return False
    try:
        async with grpc.aio.insecure_channel(
            f"127.0.0.1:{worker.port}", options=message_limits()
        ) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            answer = await stub.Check(  # type: ignore[attr-defined]
                health_pb2.HealthCheckRequest(service=""), timeout=_PROBE_TIMEOUT_S
            )
    except grpc.RpcError:
        return False
    return bool(answer.status == health_pb2.HealthCheckResponse.SERVING)


def _free_loopback_port() -> int:
    """A port free on 127.0.0.1 now (a worker that loses it to another process exits
    and is restarted on a new one)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
