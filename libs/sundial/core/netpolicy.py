"""Which network addresses a tenant's target may never reach (the SSRF deny list), the
operator's switches, and how a target's host is read and resolved before the rules apply.

One rule set, used twice: the API refuses a target whose host is or resolves to a
forbidden address when the job is written, and the executor checks again at every
connection (DNS can change in between, or be made to: DNS rebinding). Both read
``host:port`` with :func:`parse_address` and resolve with :func:`resolve`, so a target
the API accepted is read the same way when it is called. What a tenant may reach beyond
public addresses is its egress policy's (:mod:`sundial.core.egress`).

Always refused (:meth:`AddressPolicy.denial`): cloud metadata endpoints, unspecified,
multicast and reserved addresses, and loopback unless the operator allows it
(``allow_loopback``). Private, shared (CGNAT), link-local, unique-local and other
non-public addresses (:func:`non_public`) need an allowance: a rule of the tenant's
egress policy, or the operator's default (``allow_private``). IPv4-mapped, NAT64 and
6to4 (2002::/16) IPv6 addresses are judged as the IPv4 address they carry
(:func:`carried_ipv4`); site-local fec0::/10 counts as private. A name is refused when
ANY address it resolves to is: the caller could connect to either.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from sundial.core.dns import HostNotFound, ResolveError, Resolver, ResolveTimeout

__all__ = [
    "METADATA_ADDRESSES",
    "AddressError",
    "AddressPolicy",
    "Endpoint",
    "HostNotFound",
    "IPAddress",
    "Refusal",
    "ResolveError",
    "ResolveTimeout",
    "carried_ipv4",
    "check_host",
    "ip_literal",
    "non_public",
    "parse_address",
    "resolve",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Instance-metadata services hand out the cloud credentials of the machine Sundial runs
# on: refused whatever the operator allows.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean...
        "169.254.170.2",  # AWS ECS task metadata
        "169.254.169.253",  # AWS DNS / time
        "168.63.129.16",  # Azure wire server (a public address)
        "100.100.100.200",  # Alibaba Cloud
        "192.0.0.192",  # Oracle Cloud
        "fd00:ec2::254",  # AWS over IPv6
    )
)
_SHARED = ipaddress.ip_network("100.64.0.0/10")  # carrier-grade NAT; not is_private
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


# --- the rules ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Refusal:
    """One forbidden address and why (``"a loopback address"``)."""

    address: IPAddress
    reason: str


def carried_ipv4(address: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 address carries (IPv4-mapped, NAT64 64:ff9b::/96, 6to4
    2002::/16), or ``address`` itself: such an address reaches the IPv4 host, so every
    rule judges it as that host."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address in _NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if address.sixtofour is not None:
            return address.sixtofour
    return address


@dataclass(frozen=True)
class AddressPolicy:
    """The operator's SSRF settings: the permanent deny list, and the default egress
    policy of tenants without their own (:mod:`sundial.core.egress`).

    Args:
        allow_loopback: Take loopback off the deny list, and let the default policy
            reach it (development stacks).
        allow_private: Let the default policy reach every non-public address that is
            not denied (one switch for every tenant: prefer per-tenant policies).
        resolver: Where target names are looked up (None: :data:`SYSTEM_RESOLVER`).
    """

    allow_loopback: bool = False
    allow_private: bool = False
    resolver: Resolver | None = field(default=None, compare=False, repr=False)

    def denial(self, address: IPAddress) -> str | None:
        """Why ``address`` is never called, whatever a tenant's policy allows, or None.

        ``address`` is judged as the IPv4 address it carries (:func:`carried_ipv4`)."""
        address = carried_ipv4(address)
        if address in METADATA_ADDRESSES:
            return "a cloud metadata address"
        if address.is_unspecified:
            return "an unspecified address"
        if address.is_multicast:
            return "a multicast address"
        if address.is_loopback:
            return None if self.allow_loopback else "a loopback address"
        # After loopback (::1 lies in ::/8), before the private ranges (240.0.0.0/4 is
        # both reserved and private).
        if address.is_reserved and not address.is_link_local:
            return "a reserved address"
        return None

    def refusal(self, address: IPAddress) -> str | None:
        """Why ``address`` may not be called under the operator's default policy
        (``"a loopback address"``), or None."""
        return self.denial(address) or (
            None if self.default_allows(address) else non_public(address)
        )

    def default_allows(self, address: IPAddress) -> bool:
        """Whether the default policy lets a non-public, non-denied address through."""
        address = carried_ipv4(address)
        if address.is_loopback:
            return self.allow_loopback
        return self.allow_private

    def first_refusal(self, addresses: Iterable[IPAddress]) -> Refusal | None:
        """The first of ``addresses`` that may not be called, or None when all may."""
        for address in addresses:
            reason = self.refusal(address)
            if reason is not None:
                return Refusal(address, reason)
        return None


def non_public(address: IPAddress) -> str | None:
    """What kind of non-public address ``address`` is (``"a link-local address"``), or
    None for a public one. Only non-public addresses need a policy's allowance."""
    original = address
    address = carried_ipv4(address)
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if isinstance(original, ipaddress.IPv6Address) and original.is_site_local:
        return "a private or non-public address"  # fec0::/10, deprecated but routed inside
    if address.is_private or address in _SHARED or not address.is_global:
        return "a private or non-public address"
    return None


# --- reading host:port --------------------------------------------------------------------


class AddressError(ValueError):
    """A host or ``host:port`` that is malformed (no resolution can make it work).

    Attributes:
        problem: What is wrong, phrased to follow a field path
            (``"port must be 1-65535, got '0'"``).
    """

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A target's host (an IP literal without brackets, or a DNS name) and port."""

    host: str
    port: int


_DNS_NAME = re.compile(
    r"(?=.{1,253}\.?$)(?:[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9])?\.)*"
    r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9])?\.?"
)
_HOST_PORT = "must be host:port ([v6-address]:port for IPv6)"


@functools.lru_cache(maxsize=4096)
def ip_literal(host: str) -> IPAddress | None:
    """``host`` as an IP address (brackets and an IPv6 zone allowed), or None for a name.

    Cached: a batch of a thousand jobs names a few hosts, and the answer never changes."""
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def check_host(host: str) -> None:
    """An IP literal or a syntactically valid (ASCII) DNS name.

    Raises:
        AddressError: Neither.
    """
    if ip_literal(host) is not None:
        return
    if not host.isascii() or not _DNS_NAME.fullmatch(host):
        raise AddressError(f"{host!r} is not a valid host name")


def parse_address(address: str) -> Endpoint:
    """Read ``host:port``; an IPv6 host must be in brackets (``[::1]:50051``).

    Unbracketed IPv6 is refused rather than guessed at: ``::1:50051`` is both "::1 port
    50051" and the address ``::1:50051`` without a port.

    Raises:
        AddressError: Not host:port, a malformed host, or a port outside 1-65535.
    """
    if address.startswith("["):
        host, sep, rest = address[1:].partition("]")
        if not sep or not rest.startswith(":"):
            raise AddressError(_HOST_PORT)
        port_text = rest[1:]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise AddressError(f"{host!r} is not an IPv6 address") from None
    else:
        host, sep, port_text = address.rpartition(":")
        if not sep or not host:
            raise AddressError(_HOST_PORT)
        if ":" in host:
            raise AddressError("an IPv6 address must be in brackets: [v6-address]:port")
        check_host(host)
    # ASCII digits only: str.isdigit() also accepts "²", which int() refuses, and other
    # scripts' digits. The length bound keeps int() away from huge digit strings.
    digits = port_text.lstrip("0")
    if (
        not port_text.isascii()
        or not port_text.isdigit()
        or len(digits) > 5
        or not 1 <= int(digits or "0") <= 65535
    ):
        raise AddressError(f"port must be 1-65535, got {port_text!r}")
    return Endpoint(host, int(digits))


# --- resolution ---------------------------------------------------------------------------


SYSTEM_RESOLVER = Resolver()
"""The resolver of a process whose operator named no DNS servers: the system's
configuration, read through c-ares (:mod:`sundial.core.dns`)."""


async def resolve(
    host: str,
    port: int,
    *,
    timeout_s: float | None,
    resolver: Resolver | None = None,
    tenant: str | None = None,
) -> tuple[IPAddress, ...]:
    """Every TCP address of ``host``, in the resolver's order, without duplicates.

    An IP literal is returned as it is (no lookup). A name is looked up by ``resolver``
    (:data:`SYSTEM_RESOLVER` when None) within ``tenant``'s bound on lookups in flight.

    Args:
        host: An IP literal or a DNS name, as :func:`parse_address` returns it.
        port: The port (passed to the resolver; it does not change the addresses).
        timeout_s: Bound on the lookup; None for the resolver's own.
        resolver: Where names are looked up.
        tenant: Whose lookup it is (None: not a tenant's).

    Raises:
        HostNotFound: The name does not exist or has no address.
        ResolveTimeout: The lookup took longer than ``timeout_s``.
        ResolveError: Any other resolver failure (SERVFAIL, no network...).
    """
    literal = ip_literal(host)
    if literal is not None:
        return (literal,)
    return await (resolver or SYSTEM_RESOLVER).resolve(
        host, port, timeout_s=timeout_s, tenant=tenant
    )
