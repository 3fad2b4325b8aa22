"""Which network addresses a target may be called at (SSRF rules, checked at call time).

The API checks a target's host when a job is created; DNS can change afterwards (or be
made to: DNS rebinding), so the executor resolves the host again at every new
connection and refuses it when ANY resolved address is forbidden. The HTTP client then
connects to the address that was checked (see :mod:`sundial.executor.targets.http`), so
there is no window between check and connect.

The rules are :mod:`sundial.core.netpolicy`'s, the same the API applies when a job is
written (``allow_loopback_targets``, ``allow_private_targets``).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket

from sundial.core.netpolicy import AddressPolicy as NetPolicy
from sundial.core.netpolicy import IPAddress

__all__ = ["AddressPolicy", "TargetRefused", "split_host_port"]


class TargetRefused(Exception):
    """The executor refuses to call this address (a final failure, ERROR_CLASS_REFUSED)."""


def split_host_port(address: str) -> tuple[str, int]:
    """Split ``host:port`` (IPv6 in brackets) into host and port.

    Raises:
        TargetRefused: ``address`` is not host:port.
    """
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise TargetRefused(f"bad target address {address!r}: expected host:port")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


class AddressPolicy(NetPolicy):
    """The SSRF rules of one executor, with the call-time resolution that applies them."""

    def check(self, address: IPAddress) -> None:
        """Raise :class:`TargetRefused` if ``address`` may not be called."""
        reason = self.refusal(address)
        if reason is not None:
            raise TargetRefused(f"{address} is {reason}")

    async def resolve(self, host: str, port: int) -> list[str]:
        """Resolve ``host`` and check every address it resolves to.

        Returns:
            The allowed addresses as strings, in resolver order (at least one).

        Raises:
            TargetRefused: Any resolved address is forbidden.
            OSError: The name does not resolve (a connection error: retryable).
        """
        try:
            literal = ipaddress.ip_address(host)
        except ValueError:
            literal = None
        if literal is not None:
            self.check(literal)
            return [str(literal)]
        infos = await asyncio.get_running_loop().getaddrinfo(
            host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
        )
        addresses: list[str] = []
        for _family, _type, _proto, _name, sockaddr in infos:
            text = str(sockaddr[0]).split("%", 1)[0]  # drop an IPv6 zone id
            self.check(ipaddress.ip_address(text))
            if text not in addresses:
                addresses.append(text)
        if not addresses:
            raise OSError(f"{host} did not resolve")
        return addresses
