"""The shape every background loop shares: a pass, a wait, a stop, and errors survived.

The dispatcher, the sweeper and maintenance each define one pass; :func:`repeat` runs it
until the stop event is set, waits the time the pass asks for (waking at once on stop),
and logs a transient error and retries after ``error_wait_s`` instead of crashing the
service. Anything not declared transient propagates (the lifecycle reports the component
crashed).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import ClassVar

__all__ = ["PassLoop", "repeat", "wait_or_stop"]

log = logging.getLogger(__name__)


async def wait_or_stop(
    stopping: asyncio.Event, seconds: float, wake: asyncio.Event | None = None
) -> None:
    """Wait ``seconds`` or until ``stopping`` (or ``wake``) is set, whichever comes first."""
    events = [stopping] if wake is None else [stopping, wake]
    if seconds <= 0 or any(event.is_set() for event in events):
        return
    waits = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()


async def repeat(
    step: Callable[[], Awaitable[float]],
    *,
    stopping: asyncio.Event,
    transient: tuple[type[BaseException], ...],
    error_wait_s: float,
    action: str,
    wake: asyncio.Event | None = None,
) -> None:
    """Run ``step`` until ``stopping`` is set.

    Args:
        step: One pass; returns the seconds to wait before the next (0: at once, there
            is more to do).
        stopping: Set by the component's ``stop()``.
        transient: Errors logged and retried after ``error_wait_s``.
        error_wait_s: The wait after a failed pass.
        action: The ``action`` of the warning logged for a failed pass.
        wake: Set to end a wait early (the next pass starts at once); cleared as each
            pass starts.
    """
    while not stopping.is_set():
        if wake is not None:
            wake.clear()
        try:
            wait = await step()
        except transient as exc:
            log.warning("%s pass failed: %s", action, exc, extra={"action": action})
            wait = error_wait_s
        await wait_or_stop(stopping, wait, wake)


class PassLoop:
    """Base of a lifecycle component that repeats one pass (``async run``/``stop``).

    Subclasses set :attr:`name`, :attr:`transient` and :attr:`error_wait_s`, and define
    :meth:`pass_once`; ``run`` repeats it until ``stop``.
    """

    name: str = "loop"
    transient: ClassVar[tuple[type[BaseException], ...]] = ()
    """Errors of a pass that are logged and retried."""

    def __init__(self) -> None:
        self._stopping = asyncio.Event()
        self._wake = asyncio.Event()

    @property
    def error_wait_s(self) -> float:
        """Seconds to wait after a failed pass."""
        return 1.0

    async def pass_once(self) -> float:
        """One pass; returns the seconds to wait before the next (0: at once)."""
        raise NotImplementedError

    async def run(self, started: Callable[[], None]) -> None:
        """Repeat :meth:`pass_once` until :meth:`stop`."""
        started()
        await self.repeat()

    async def repeat(self) -> None:
        """The loop itself (a component with several workers runs it once each)."""
        await repeat(
            self.pass_once,
            stopping=self._stopping,
            transient=self.transient,
            error_wait_s=self.error_wait_s,
            action=self.name,
            wake=self._wake,
        )

    def wake(self) -> None:
        """End the current wait between passes: the next pass starts at once."""
        self._wake.set()

    async def stop(self) -> None:
        """Make ``run`` return after the current pass (idempotent, safe before start)."""
        self._stopping.set()
