"""Which network addresses a tenant's target may reach (the SSRF rules).

One rule set, used twice: the API refuses a target whose host is or resolves to a
forbidden address when the job is written, and the executor checks again at every
connection (DNS can change in between, or be made to: DNS rebinding).

Always refused: cloud metadata endpoints, unspecified, multicast and reserved addresses.
Refused unless the operator allows them: loopback (``allow_loopback``) and private,
shared (CGNAT), link-local, unique-local and other non-public addresses
(``allow_private``). IPv4-mapped and NAT64 IPv6 addresses are judged as the IPv4
address they carry.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

__all__ = ["METADATA_ADDRESSES", "AddressPolicy", "IPAddress"]

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


@dataclass(frozen=True)
class AddressPolicy:
    """The operator's SSRF settings."""

    allow_loopback: bool = False
    allow_private: bool = False

    def refusal(self, address: IPAddress) -> str | None:
        """Why ``address`` may not be called (``"a loopback address"``), or None."""
        if isinstance(address, ipaddress.IPv6Address):
            if address.ipv4_mapped is not None:
                address = address.ipv4_mapped
            elif address in _NAT64:
                address = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if address in METADATA_ADDRESSES:
            return "a cloud metadata address"
        if address.is_unspecified:
            return "an unspecified address"
        if address.is_multicast:
            return "a multicast address"
        if address.is_loopback:
            return None if self.allow_loopback else "a loopback address"
        if address.is_link_local:
            return None if self.allow_private else "a link-local address"
        # After loopback (::1 lies in ::/8), before is_private (240.0.0.0/4 is both).
        if address.is_reserved:
            return "a reserved address"
        if address.is_private or address in _SHARED or not address.is_global:
            return None if self.allow_private else "a private or non-public address"
        return None
