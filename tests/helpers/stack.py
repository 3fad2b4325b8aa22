"""Reaching the local stack's NATS from tests with the credentials it issued."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from sundial.devstack import Stack

T = TypeVar("T")


def nats_options(stack: Stack, role: str = "admin") -> dict[str, Any]:
    """``nats.connect`` keyword arguments for the stack's NATS as ``role`` (admin: any
    subject; scheduler, executor: what those services may do)."""
    config = stack.nats_config(role)
    options: dict[str, Any] = {
        "servers": [url.strip() for url in config.nats_url.split(",") if url.strip()],
        "inbox_prefix": config.nats_inbox_prefix,
    }
    if config.nats_user:
        options.update(user=config.nats_user, password=config.nats_password)
    return options


_SERVER_THREAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix="stack-servers")


async def in_server_thread(start: Callable[[], object]) -> None:
    """Run ``start`` (a server's start or restart) in a thread that lives as long as the
    test session.

    A child process dies with the thread that started it (``ManagedProcess``): started
    from ``asyncio.to_thread``, a restarted server would be killed when the test's event
    loop closes its executor.
    """
    await asyncio.get_running_loop().run_in_executor(_SERVER_THREAD, start)


def on_server_thread(start: Callable[[], T]) -> T:
    """:func:`in_server_thread` for synchronous callers (fixtures wider than a test)."""
    return _SERVER_THREAD.submit(start).result()
