"""A real DNS server on loopback for tests (UDP, built on dnslib's records).

Sundial looks names up through c-ares (:mod:`sundial.core.dns`), which asks DNS servers
over the network: tests give it this one instead of the machine's, and say what it
answers::

    async with DnsServer() as dns:
        dns.answers["api.example"] = ["203.0.113.7"]
        dns.silent.add("slow.example")        # never answered: the lookup times out
        dns.failing.add("broken.example")     # SERVFAIL
        resolver = dns.resolver()             # a Resolver asking only this server

Any other name is answered NXDOMAIN. Answers have a TTL of 0 so that nothing caches
them: a changed answer is seen by the next lookup (DNS rebinding tests rely on it).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator

import pytest
from dnslib import AAAA, QTYPE, RCODE, RR, A, DNSRecord

from sundial.core import netpolicy
from sundial.core.dns import Resolver


class DnsServer:
    """A UDP DNS server on 127.0.0.1:<free port> answering what the test says."""

    def __init__(self) -> None:
        self.answers: dict[str, list[str]] = {}
        """Addresses by name (lower case, no trailing dot), IPv4 and IPv6 alike."""
        self.silent: set[str] = set()
        """Names never answered."""
        self.failing: set[str] = set()
        """Names answered SERVFAIL."""
        self.asked: Counter[str] = Counter()
        """Lookups per name (counted on the A query each lookup makes)."""
        self.order: list[str] = []
        """Names looked up, in order (one entry per lookup)."""
        self._transport: asyncio.DatagramTransport | None = None
        self.address = ""

    async def __aenter__(self) -> DnsServer:
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_datagram_endpoint(
            lambda: _Protocol(self), local_addr=("127.0.0.1", 0)
        )
        self._transport = transport
        host, port = transport.get_extra_info("sockname")[:2]
        self.address = f"{host}:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._transport is not None:
            self._transport.close()

    def resolver(self, *, per_tenant: int = 16) -> Resolver:
        """A resolver that asks this server only."""
        return Resolver([self.address], per_tenant=per_tenant)

    def reply(self, data: bytes) -> bytes | None:
        """The answer to one query (None: stay silent)."""
        try:
            query = DNSRecord.parse(data)
        except Exception:  # not DNS: ignore it, as a server would
            return None
        name = str(query.q.qname).rstrip(".").lower()
        qtype = QTYPE[query.q.qtype]
        if qtype == "A":
            self.asked[name] += 1
            self.order.append(name)
        if name in self.silent:
            return None
        answer = query.reply()
        if name in self.failing:
            answer.header.rcode = RCODE.SERVFAIL
            return answer.pack()
        addresses = self.answers.get(name)
        if addresses is None:
            answer.header.rcode = RCODE.NXDOMAIN
            return answer.pack()
        for address in addresses:
            if qtype == "A" and ":" not in address:
                answer.add_answer(RR(query.q.qname, QTYPE.A, rdata=A(address), ttl=0))
            elif qtype == "AAAA" and ":" in address:
                answer.add_answer(RR(query.q.qname, QTYPE.AAAA, rdata=AAAA(address), ttl=0))
        return answer.pack()


class _Protocol(asyncio.DatagramProtocol):
    def __init__(self, server: DnsServer) -> None:
        self._server = server
        self._transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # a datagram transport

    def datagram_received(self, data: bytes, addr: tuple[str | int, ...]) -> None:
        reply = self._server.reply(data)
        if reply is not None and self._transport is not None:
            self._transport.sendto(reply, addr)


@contextlib.asynccontextmanager
async def system_dns(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[DnsServer]:
    """A :class:`DnsServer` standing in for the machine's DNS: every lookup made through
    the process's default resolver (``netpolicy.SYSTEM_RESOLVER``) asks it."""
    async with DnsServer() as server:
        resolver = server.resolver()
        monkeypatch.setattr(netpolicy, "SYSTEM_RESOLVER", resolver)
        try:
            yield server
        finally:
            await resolver.close()  # no lookup outlives the test's event loop
