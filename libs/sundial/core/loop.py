"""The shape every background loop shares: a pass, a wait, a stop, and errors survived.

The dispatcher, the sweeper and maintenance each define one pass; :func:`repeat` runs it
until the stop event is set, waits the time the pass asks for (waking at once on stop),
and logs a transient error and retries after ``error_wait_s`` instead of crashing the
service. Anything not declared transient propagates (the lifecycle reports the component
crashed).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

__all__ = ["repeat", "wait_or_stop"]

log = logging.getLogger(__name__)


async def wait_or_stop(stopping: asyncio.Event, seconds: float) -> None:
    """Wait ``seconds`` or until ``stopping`` is set, whichever comes first."""
    if seconds <= 0 or stopping.is_set():
        return
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await stopping.wait()


async def repeat(
    step: Callable[[], Awaitable[float]],
    *,
    stopping: asyncio.Event,
    transient: tuple[type[BaseException], ...],
    error_wait_s: float,
    action: str,
) -> None:
    """Run ``step`` until ``stopping`` is set.

    Args:
        step: One pass; returns the seconds to wait before the next (0: at once, there
            is more to do).
        stopping: Set by the component's ``stop()``.
        transient: Errors logged and retried after ``error_wait_s``.
        error_wait_s: The wait after a failed pass.
        action: The ``action`` of the warning logged for a failed pass.
    """
    while not stopping.is_set():
        try:
            wait = await step()
        except transient as exc:
            log.warning("%s pass failed: %s", action, exc, extra={"action": action})
            wait = error_wait_s
        await wait_or_stop(stopping, wait)
