"""Waiting on the injected clock: sleeps that end early (the backoff between attempts is
:class:`sundial.core.backoff.Backoff`).

Every wait of the executor's loops goes through :class:`~sundial.core.clock.Clock`, so a
test can drive them with a ``ManualClock`` instead of sleeping.
"""

from __future__ import annotations

import asyncio
from typing import Any

from sundial.core.clock import Clock

__all__ = ["sleep_unless"]


async def sleep_unless(
    clock: Clock, seconds: float, *wake: asyncio.Event | asyncio.Future[Any]
) -> bool:
    """Sleep ``seconds`` of ``clock``'s time, or less if an event of ``wake`` is set (or
    a task of it ends) first. The tasks are only watched, never cancelled.

    Returns:
        True when woken early by ``wake``, False when the time ran out.
    """
    if any(w.is_set() if isinstance(w, asyncio.Event) else w.done() for w in wake):
        return True
    timer = asyncio.ensure_future(clock.sleep(seconds))
    ours = [asyncio.ensure_future(w.wait()) for w in wake if isinstance(w, asyncio.Event)]
    watched = [w for w in wake if not isinstance(w, asyncio.Event)]
    try:
        await asyncio.wait([timer, *ours, *watched], return_when=asyncio.FIRST_COMPLETED)
        return not timer.done()
    finally:
        for waiter in (timer, *ours):
            waiter.cancel()
