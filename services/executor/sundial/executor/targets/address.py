"""Which network addresses a target may be called at (SSRF rules, checked at call time).

The API checks a target's host when a job is created; DNS can change afterwards (or be
made to: DNS rebinding), so the executor resolves the host again at every new
connection and refuses it when ANY resolved address is forbidden. The HTTP client then
connects to the address that was checked (see :mod:`sundial.executor.targets.http`), so
there is no window between check and connect.

Always refused: cloud metadata endpoints, unspecified, multicast and reserved
addresses. Refused unless the operator allows them: loopback
(``allow_loopback_targets``) and private, shared (CGNAT), link-local and unique-local
addresses (``allow_private_targets``).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass

__all__ = ["AddressPolicy", "TargetRefused", "split_host_port"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Metadata services answer on link-local or private addresses; a target must never reach
# them, whatever the operator allows (they hand out cloud credentials).
_METADATA = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean
        "169.254.170.2",  # AWS ECS task metadata
        "100.100.100.200",  # Alibaba Cloud
        "fd00:ec2::254",  # AWS IMDS over IPv6
    )
)
_SHARED = ipaddress.ip_network("100.64.0.0/10")  # carrier-grade NAT; not is_private


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


@dataclass(frozen=True)
class AddressPolicy:
    """The SSRF rules of one executor."""

    allow_loopback: bool = False
    allow_private: bool = False

    def check(self, address: IPAddress) -> None:
        """Raise :class:`TargetRefused` if ``address`` may not be called."""
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if address in _METADATA:
            raise TargetRefused(f"{address} is a cloud metadata address")
        if address.is_unspecified or address.is_multicast:
            raise TargetRefused(f"{address} is not a unicast address")
        if address.is_loopback:
            if self.allow_loopback:
                return
            raise TargetRefused(f"{address} is a loopback address")
        if (
            address.is_reserved
        ):  # after loopback (::1 is in ::/8), before is_private: 240.0.0.0/4 counts as both
            raise TargetRefused(f"{address} is a reserved address")
        if (
            address.is_private
            or address.is_link_local
            or (isinstance(address, ipaddress.IPv4Address) and address in _SHARED)
        ):
            if self.allow_private:
                return
            raise TargetRefused(f"{address} is a private or link-local address")
        if not address.is_global:
            raise TargetRefused(f"{address} is a reserved address")

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
