"""A tiny service for test_lifecycle: run_app with real signal handling, in its own process.

Usage: python lifecycle_app.py GRACE_S [stubborn]

Prints READY on stdout once every component started; exits with run_app's code. With
``stubborn``, one component ignores stop() so only the grace period (or a second
signal) ends it.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable

from sundial.core.config import LogConfig
from sundial.core.lifecycle import run_app
from sundial.core.logging import configure_logging


class Waiter:
    def __init__(self, name: str, *, stubborn: bool = False) -> None:
        self.name = name
        self._stubborn = stubborn
        self._stop = asyncio.Event()

    async def run(self, started: Callable[[], None]) -> None:
        started()
        if self._stubborn:
            await asyncio.Event().wait()  # ignores stop(): only cancellation ends it
        await self._stop.wait()

    async def stop(self) -> None:
        self._stop.set()


def ready() -> None:
    print("READY", flush=True)


async def main() -> int:
    grace_s = float(sys.argv[1])
    stubborn = "stubborn" in sys.argv[2:]
    components = [Waiter("first"), Waiter("second", stubborn=stubborn)]
    return await run_app(components, grace_period_s=grace_s, on_ready=ready)


if __name__ == "__main__":
    configure_logging(LogConfig(log_format="text"))
    sys.exit(asyncio.run(main()))
