"""Name lookups that one tenant cannot slow down for another.

asyncio's ``getaddrinfo`` runs the system resolver in the event loop's small default
thread pool (a few threads): a lookup that hangs holds its thread until the system
resolver gives up, whatever the caller's timeout, so one tenant whose names never answer
could hold every thread and make every tenant's lookups wait. :class:`Resolver` asks
DNS through c-ares instead (``aiodns``, the library aiohttp's ``AsyncResolver`` uses):
asynchronous on the event loop, no thread per lookup, and a lookup that times out is
cancelled. It reads the system's resolver configuration (``/etc/resolv.conf``: servers,
search domains, ``ndots``; ``/etc/hosts``) unless given name servers, and bounds the
lookups in flight per tenant (``per_tenant``): a tenant past its bound waits for one of
its own lookups to end, within the same timeout, and never for another tenant's.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import weakref
from collections.abc import Sequence
from dataclasses import dataclass

import aiodns
import aiodns.error
import pycares

from sundial.core.slots import TenantSlots

__all__ = [
    "DEFAULT_LOOKUPS_PER_TENANT",
    "HostNotFound",
    "ResolveError",
    "ResolveTimeout",
    "Resolver",
]

DEFAULT_LOOKUPS_PER_TENANT = 16
"""Lookups one tenant may have in flight on one process at once."""

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# c-ares status codes (ares.h) that mean "no such name" and "no answer in time".
_ARES_ENODATA = 1
_ARES_ENOTFOUND = 4
_ARES_ETIMEOUT = 12


class ResolveError(OSError):
    """A host name could not be resolved now (may work later: retryable at call time).

    An :class:`OSError`, as a failed connection is, so callers that treat connection
    errors as retryable need no extra case.
    """


class HostNotFound(ResolveError):
    """The name does not exist or has no address (NXDOMAIN, NODATA)."""


class ResolveTimeout(ResolveError, TimeoutError):
    """The resolver did not answer within the bound."""


class Resolver:
    """DNS lookups through c-ares, bounded per tenant.

    Args:
        nameservers: ``host`` or ``host:port`` of the servers to ask; empty: the
            system's (``/etc/resolv.conf``).
        per_tenant: Lookups one tenant may have in flight at once.
    """

    def __init__(
        self, nameservers: Sequence[str] = (), *, per_tenant: int = DEFAULT_LOOKUPS_PER_TENANT
    ) -> None:
        self._nameservers = list(nameservers)
        self._per_tenant = per_tenant
        # A c-ares channel and the tenants' slots per event loop (both are bound to the
        # loop they were made on; tests run many loops in one process).
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState]
        self._loops = weakref.WeakKeyDictionary()

    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        state = self._loops.get(loop)
        if state is None:
            # The caller's timeout bounds a lookup; c-ares asks each server twice, 1 s
            # apart, so a query our timeout gave up on ends soon after on its own.
            channel = aiodns.DNSResolver(self._nameservers or None, loop=loop, timeout=1.0, tries=2)
            state = self._loops[loop] = _LoopState(channel, TenantSlots(self._per_tenant))
        return state

    async def close(self) -> None:
        """Cancel this event loop's lookups in flight and release its channel."""
        state = self._loops.pop(asyncio.get_running_loop(), None)
        if state is not None:
            await state.channel.close()

    async def resolve(
        self, host: str, port: int, *, timeout_s: float | None, tenant: str | None = None
    ) -> tuple[IPAddress, ...]:
        """Every TCP address of ``host`` (a DNS name), in the resolver's order, once each.

        Args:
            host: The name.
            port: The port (passed on; it does not change the addresses).
            timeout_s: Bound on the lookup, waiting for a tenant slot included; None: the
                resolver's own.
            tenant: Whose lookup it is (None: not a tenant's, unbounded).

        Raises:
            HostNotFound: The name does not exist or has no address.
            ResolveTimeout: No answer within ``timeout_s``.
            ResolveError: Any other resolver failure (SERVFAIL, no server...).
        """
        try:
            async with asyncio.timeout(timeout_s):
                if tenant is None:
                    result = await self._lookup(host, port)
                else:
                    async with self._state().slots.slot(tenant):
                        result = await self._lookup(host, port)
        except TimeoutError:
            raise ResolveTimeout(f"resolving {host} took more than {timeout_s:g} s") from None
        except aiodns.error.DNSError as exc:
            code = exc.args[0] if exc.args else None
            if code in (_ARES_ENOTFOUND, _ARES_ENODATA):
                raise HostNotFound(f"host {host} does not resolve") from None
            if code == _ARES_ETIMEOUT:
                raise ResolveTimeout(f"resolving {host}: no DNS server answered") from None
            text = exc.args[1] if len(exc.args) > 1 else str(exc)
            raise ResolveError(f"cannot resolve {host} now ({text})") from None
        addresses: dict[IPAddress, None] = {}  # a dict keeps the resolver's order
        for node in result.nodes:
            raw = node.addr[0]
            text = raw.decode() if isinstance(raw, bytes) else str(raw)
            addresses.setdefault(ipaddress.ip_address(text.split("%", 1)[0]))
        if not addresses:
            raise HostNotFound(f"host {host} does not resolve")
        return tuple(addresses)

    async def _lookup(self, host: str, port: int) -> pycares.AddrInfoResult:
        return await self._state().channel.getaddrinfo(
            host, port=port, family=socket.AF_UNSPEC, type=socket.SOCK_STREAM
        )


@dataclass(slots=True)
class _LoopState:
    channel: aiodns.DNSResolver
    slots: TenantSlots
    """The tenants' lookup slots."""
