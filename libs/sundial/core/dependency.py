"""Waiting for a dependency (PostgreSQL, NATS, etcd) that is not up yet.

A service that starts before its database (a cold cluster, a rolling restart of
PostgreSQL, a node that boots faster than the managed database's failover) must wait
for it, not exit: an exit only hands the waiting to a restart loop with its own,
growing delay (Kubernetes' CrashLoopBackOff reaches 5 minutes), and a plain process
manager may not restart it at all. So each connect at start goes through
:meth:`Dependency.wait`, which retries the errors the dependency declares transient
(refused, reset, timed out, "the database system is starting up") with jittered
exponential backoff and no overall deadline; anything else (a wrong password, a
database that does not exist, a migration conflict) is raised at once. The wait ends
when the connect succeeds or the start is cancelled (SIGTERM, see
:func:`sundial.core.service.main`); meanwhile the service's gRPC health says
NOT_SERVING.

Each failed attempt logs one WARNING naming the dependency, its address without
credentials, the attempt number, the error and the next delay.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import urlsplit

from sundial.core.backoff import Backoff

__all__ = ["BACKOFF", "Backoff", "Dependency", "safe_address"]

log = logging.getLogger(__name__)

T = TypeVar("T")


BACKOFF = Backoff()
"""The services' backoff at start: 0.25 s doubling to at most 5 s."""


def safe_address(url: str) -> str:
    """``url``'s hosts, ports and path with any user, password and query removed.

    ``postgresql://sundial:secret@db:5432/sundial?sslpassword=x`` -> ``db:5432/sundial``.
    """
    if "://" not in url:
        return url.rpartition("@")[2]
    parts = urlsplit(url)
    return parts.netloc.rpartition("@")[2] + parts.path


def _describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    if len(text) > 300:
        text = text[:300] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@dataclass(frozen=True)
class Dependency:
    """A server a service needs at start, and which of its errors mean "not up yet".

    Attributes:
        name: What it is, for the log (``PostgreSQL``, ``NATS``, ``etcd``).
        address: Where it is, without credentials (see :func:`safe_address`).
        transient: Exception classes that mean "not reachable yet": retried.
    """

    name: str
    address: str
    transient: tuple[type[BaseException], ...]

    async def wait(self, attempt: Callable[[], Awaitable[T]], *, backoff: Backoff = BACKOFF) -> T:
        """Call ``attempt`` until it returns, retrying :attr:`transient` errors.

        ``attempt`` must clean up after itself when it fails (close a half-open
        client): it is simply called again.

        Raises:
            Whatever ``attempt`` raises that is not transient, at once.
        """
        number = 0
        while True:
            number += 1
            try:
                result = await attempt()
            except self.transient as exc:
                delay = backoff.delay_s(number)
                log.warning(
                    "waiting for %s at %s: attempt %d failed (%s); retrying in %.1f s",
                    self.name,
                    self.address,
                    number,
                    _describe(exc),
                    delay,
                    extra={
                        "action": "dependency.wait",
                        "dependency": self.name,
                        "address": self.address,
                        "attempt": number,
                        "retry_in_s": round(delay, 3),
                    },
                )
                await asyncio.sleep(delay)
                continue
            if number > 1:
                log.info(
                    "%s at %s is up (attempt %d)",
                    self.name,
                    self.address,
                    number,
                    extra={
                        "action": "dependency.up",
                        "dependency": self.name,
                        "address": self.address,
                        "attempt": number,
                    },
                )
            return result
