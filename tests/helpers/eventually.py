"""Wait for an outcome by polling under a deadline: tests never sleep for a result."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def assert_eventually(
    check: Callable[[], T | Awaitable[T]],
    *,
    timeout_s: float = 10.0,
    interval_s: float = 0.05,
    what: str = "condition",
) -> T:
    """Call ``check`` until it returns without raising ``AssertionError`` (a check that
    returns ``False`` has not passed yet either: ``lambda: x == y`` works as meant).

    Returns ``check``'s result. After ``timeout_s`` the last ``AssertionError`` is raised
    again with the elapsed time, so the failure says what was still wrong.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            result = check()
            if inspect.isawaitable(result):
                result = await result
            if result is False:
                raise AssertionError(f"{what}: the check returned False")
            return result  # type: ignore[return-value]
        except AssertionError as exc:
            if time.monotonic() >= deadline:
                raise AssertionError(
                    f"{what} still failing after {timeout_s:.1f} s: {exc}"
                ) from exc
        await asyncio.sleep(interval_s)


def wait_until_sync(
    check: Callable[[], bool], *, timeout_s: float = 10.0, what: str = "condition"
) -> None:
    """Synchronous variant for tests that drive processes: poll until ``check()`` is true."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what} not reached within {timeout_s:.1f} s")
        time.sleep(0.05)
