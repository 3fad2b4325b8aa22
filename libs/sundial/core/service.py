"""The shape every Sundial service shares: a composition root and a ``main``.

A service's ``app.py`` builds a :class:`Service` (connect dependencies, build the store,
servicers and server) and its ``__main__`` calls :func:`main` with that builder. Tests
build the same graph through the same function and run it with a ``stop_event``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from sundial.core.config import ConfigError, LogConfig
from sundial.core.grpc import Server
from sundial.core.lifecycle import Component, run_app
from sundial.core.logging import configure_logging
from sundial.core.telemetry import TelemetryConfig, configure_telemetry

log = logging.getLogger(__name__)

ConfigT = TypeVar("ConfigT", bound=LogConfig)

TELEMETRY_FLUSH_TIMEOUT_MS = 2000

GC_THRESHOLDS = (50_000, 50, 100)
"""The cyclic collector's thresholds in a service process (Python's default: 700, 10, 10).
With the default a collection ran every few runs on the executor's and the ledger's hot
paths, and its full collections walk every long-lived object: in bench_e2e's herd after a
steady load they were half the executor's CPU (310 -> 158 µs per run with these).
Reference counting frees what a run leaves behind; the collector only finds cycles, so
collecting less often costs little memory (docs/design.md section 8)."""


def tune_gc() -> None:
    """Freeze what exists now (imported modules, configuration: never walked again by the
    collector) and collect cycles less often (:data:`GC_THRESHOLDS`)."""
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


@dataclass
class Service:
    """A built service, ready to run.

    Attributes:
        name: ``api``, ``scheduler`` or ``executor``; used in logs.
        server: The gRPC server. The builder may start it before connecting to the
            dependencies (health NOT_SERVING while it waits); it serves the service's
            RPCs from when the app starts it, last, and health turns SERVING only once
            every other component reported ready.
        components: Long-lived parts started before the server, in dependency order.
        grace_period_s: Each component's share of the shutdown time.
        resources: Closed after every component stopped (pool, NATS, etcd clients), in
            reverse order of registration.
    """

    name: str
    server: Server
    components: Sequence[Component] = ()
    grace_period_s: float = 10.0
    resources: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)

    async def run(
        self, *, install_signal_handlers: bool = True, stop_event: asyncio.Event | None = None
    ) -> int:
        """Serve until SIGTERM/SIGINT or ``stop_event``; returns the exit code."""
        try:
            return await run_app(
                [*self.components, self.server],
                grace_period_s=self.grace_period_s,
                on_ready=self.server.set_serving,
                on_stopping=self.server.set_not_serving,
                install_signal_handlers=install_signal_handlers,
                stop_event=stop_event,
            )
        finally:
            await self.resources.aclose()


async def _build_until_signal(
    name: str, build: Callable[[ConfigT], Awaitable[Service]], config: ConfigT
) -> Service | None:
    """``build(config)``, or None when SIGTERM/SIGINT arrived while it was building.

    Building waits for the dependencies without a deadline (:mod:`sundial.core.dependency`):
    a signal must end that wait as cleanly as it ends a running service, not leave the
    process to the default handlers (an abrupt exit, or a KeyboardInterrupt traceback).
    """
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    received: list[signal.Signals] = []

    def on_signal(sig: signal.Signals) -> None:
        if not received:
            task.cancel()
        received.append(sig)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        return await build(config)
    except asyncio.CancelledError:
        if not received:
            raise
        # The cancellation was ours; clear it so the rest of this task runs normally.
        task.uncancel()
        log.info(
            "received %s while starting; %s stopped",
            received[0].name,
            name,
            extra={"action": "lifecycle", "signal": received[0].name, "transition": "stopped"},
        )
        return None
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop where it is installed (it has wheels for Linux and macOS),
    else None: asyncio's own. grpc.aio, asyncpg, nats-py and aiohttp all run on it."""
    try:
        import uvloop  # noqa: PLC0415 (optional: a platform without it runs asyncio's loop)
    except ImportError:
        return None
    return uvloop.new_event_loop


def main(
    name: str,
    load_config: Callable[[], ConfigT],
    build: Callable[[ConfigT], Awaitable[Service]],
) -> None:
    """Process entry point: load config, configure logging, build, run, exit.

    A configuration error is printed as one line naming the variable (exit code 2);
    nothing is started. A dependency that is not up yet is waited for, not an error
    (``build`` waits); SIGTERM or SIGINT during that wait exits with 0.
    """
    try:
        config = load_config()
    except ConfigError as exc:
        print(f"sundial-{name}: configuration error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    configure_logging(config)
    try:
        telemetry = (
            configure_telemetry(config, name) if isinstance(config, TelemetryConfig) else None
        )
    except OSError as exc:  # the /metrics port is taken or not ours to bind
        print(f"sundial-{name}: cannot serve /metrics: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    tune_gc()

    async def serve() -> int:
        service = await _build_until_signal(name, build, config)
        if service is None:
            return 0
        return await service.run()

    try:
        with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
            code = runner.run(serve())
    except Exception:
        log.exception("%s crashed while starting", name, extra={"action": "lifecycle"})
        code = 1
    finally:
        if telemetry is not None:
            # Flush the last metrics, but never let an unreachable collector hold the exit.
            telemetry.shutdown(timeout_millis=TELEMETRY_FLUSH_TIMEOUT_MS)
    raise SystemExit(code)
