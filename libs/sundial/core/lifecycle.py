"""Runs a service's long-lived components together and stops them in order.

A service is a list of components (pool owner, gRPC server, dispatcher, sweeper,
consumer, lease keeper) handed to :func:`run_app`, which:

1. starts them one after another in ONE ``asyncio.TaskGroup``, each only once the
   previous one reported ready (so list them in dependency order: what others need
   first, the gRPC server last);
2. calls ``on_ready`` once all are ready (services set health SERVING there);
3. waits for SIGTERM/SIGINT, ``stop_event``, or a component crashing;
4. calls ``on_stopping`` (health NOT_SERVING), then stops the components in reverse
   order, each within ``grace_period_s``; a component still running after its grace is
   cancelled. A second signal cancels everything at once.

One log line per transition (``started``, ``stopping``, ``stopped``, ``crashed``) with
``extra={"action": "lifecycle", "component": name, "transition": ...}``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import signal
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

__all__ = ["Component", "run_app"]

log = logging.getLogger(__name__)

Hook = Callable[[], Awaitable[None] | None]
"""A sync or async callable without arguments (``on_ready``, ``on_stopping``)."""


@runtime_checkable
class Component(Protocol):
    """A long-lived part of a service.

    Contract:

    - ``run(started)`` does the component's work until :meth:`stop` is called, then
      returns. It calls ``started()`` exactly once, when it is ready to do its job (the
      server is listening, the first lease is held). Returning before ``stop()`` was
      called, or raising, counts as a crash and stops the whole app.
    - ``stop()`` asks ``run`` to finish and waits for it to wind down (in-flight work,
      releasing leases). It is idempotent, safe before ``run`` and safe while ``run`` is
      still starting. Its time is bounded by the app's grace period, after which ``run``
      is cancelled, so it need not enforce a deadline itself.
    """

    name: str
    """A short, unique name used in logs (``dispatcher``, ``grpc-server``)."""

    async def run(self, started: Callable[[], None]) -> None:
        """Do the work until stopped; call ``started()`` once ready."""
        ...

    async def stop(self) -> None:
        """Make ``run`` return; idempotent and safe at any time."""
        ...


@dataclass(eq=False)
class _Slot:
    component: Component
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    stop_called: bool = False


@dataclass
class _App:
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    stopping: bool = False
    failed: bool = False
    slots: list[_Slot] = field(default_factory=list)
    signals: int = 0


def _log(
    component: str,
    transition: str,
    message: str,
    *,
    level: int = logging.INFO,
    exc_info: bool = False,
) -> None:
    log.log(
        level,
        message,
        exc_info=exc_info,
        extra={"action": "lifecycle", "component": component, "transition": transition},
    )


async def _call(hook: Hook | None) -> None:
    if hook is None:
        return
    result = hook()
    if inspect.isawaitable(result):
        await result


async def _supervise(app: _App, slot: _Slot) -> None:
    """Run one component; record a crash instead of raising into the task group.

    Swallowing the exception here keeps the TaskGroup from cancelling every sibling at
    once: the app stops them in reverse order, each with its grace period, instead.
    """
    name = slot.component.name

    def started() -> None:
        if not slot.ready.is_set():
            slot.ready.set()
            _log(name, "started", f"{name} started")

    try:
        await slot.component.run(started)
    except asyncio.CancelledError:
        raise
    except Exception:
        _log(name, "crashed", f"{name} crashed", level=logging.ERROR, exc_info=True)
        app.failed = True
        app.stop.set()
        return
    if not slot.stop_called and not app.stopping:
        _log(name, "crashed", f"{name} returned before it was stopped", level=logging.ERROR)
        app.failed = True
        app.stop.set()


async def _wait_any(*events: asyncio.Event) -> None:
    waiters = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)


def _any_set(events: Sequence[asyncio.Event]) -> bool:
    return any(event.is_set() for event in events)


async def _stop_slot(app: _App, slot: _Slot, grace_period_s: float) -> None:
    task = slot.task
    if task is None:
        return
    name = slot.component.name
    already_done = task.done()  # crashed (or returned) earlier: clean up quietly
    if not already_done:
        _log(name, "stopping", f"{name} stopping")
    slot.stop_called = True
    try:
        async with asyncio.timeout(grace_period_s):
            await slot.component.stop()
            await asyncio.wait([task])
    except TimeoutError:
        _log(
            name,
            "stopping",
            f"{name} did not stop within {grace_period_s:g} s; cancelling it",
            level=logging.WARNING,
        )
        task.cancel()
        await asyncio.wait([task])
    except Exception:
        log.exception("%s failed to stop", name, extra={"action": "lifecycle", "component": name})
        app.failed = True
        task.cancel()
        await asyncio.wait([task])
    if not already_done:
        _log(name, "stopped", f"{name} stopped")


def _install_signals(app: _App) -> list[signal.Signals]:
    loop = asyncio.get_running_loop()

    def on_signal(sig: signal.Signals) -> None:
        app.signals += 1
        if app.signals == 1:
            log.info(
                "received %s; shutting down",
                sig.name,
                extra={"action": "lifecycle", "signal": sig.name},
            )
            app.stop.set()
            return
        # A second signal means "now": an operator pressing Ctrl-C twice.
        log.warning(
            "received %s again; cancelling every component",
            sig.name,
            extra={"action": "lifecycle", "signal": sig.name},
        )
        for slot in app.slots:
            if slot.task is not None:
                slot.task.cancel()

    installed = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig)
        installed.append(sig)
    return installed


async def run_app(
    components: Sequence[Component],
    *,
    grace_period_s: float,
    on_ready: Hook | None = None,
    on_stopping: Hook | None = None,
    install_signal_handlers: bool = True,
    stop_event: asyncio.Event | None = None,
) -> int:
    """Run ``components`` until a signal, ``stop_event`` or a crash; see the module doc.

    Args:
        components: In dependency order; started in this order, stopped in reverse.
        grace_period_s: Time each component's ``stop()`` (and the end of its ``run``)
            may take before the component is cancelled. Worst-case shutdown is therefore
            ``len(components) * grace_period_s``; size the pod's termination grace period
            accordingly.
        on_ready: Called once every component reported ``started()``.
        on_stopping: Called once when shutdown begins, before any component stops.
        install_signal_handlers: Handle SIGTERM and SIGINT (main thread only); tests that
            run an app in-process pass False and use ``stop_event``.
        stop_event: Setting it starts a graceful shutdown.

    Returns:
        The process exit code: 0 after a clean shutdown, 1 if a component crashed,
        ``on_ready`` raised, or a ``stop()`` raised.
    """
    names = [c.name for c in components]
    if len(set(names)) != len(names):
        raise ValueError(f"component names must be unique: {names}")
    app = _App()
    wake = [app.stop] if stop_event is None else [app.stop, stop_event]
    installed = _install_signals(app) if install_signal_handlers else []
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.TaskGroup() as group:
            for component in components:
                slot = _Slot(component)
                app.slots.append(slot)
                slot.task = group.create_task(_supervise(app, slot), name=component.name)
                await _wait_any(slot.ready, *wake)
                if not slot.ready.is_set():
                    break  # shutdown was requested (or something crashed) while starting
            else:
                _log("app", "started", "all components started")
            if all(slot.ready.is_set() for slot in app.slots) and not _any_set(wake):
                try:
                    await _call(on_ready)
                except Exception:
                    log.exception("on_ready failed", extra={"action": "lifecycle"})
                    app.failed = True
                    app.stop.set()
            await _wait_any(*wake)
            app.stopping = True
            _log("app", "stopping", "stopping")
            try:
                await _call(on_stopping)
            except Exception:
                log.exception("on_stopping failed", extra={"action": "lifecycle"})
            for slot in reversed(app.slots):
                await _stop_slot(app, slot, grace_period_s)
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
    code = 1 if app.failed else 0
    _log("app", "stopped", f"stopped (exit code {code})")
    return code
