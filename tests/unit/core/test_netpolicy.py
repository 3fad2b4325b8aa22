"""The one address policy: how a target's host:port is read and resolved, shared by the
API's write-time check and the executor's call-time check. (The SSRF rule table itself
is pinned by tests/integration/api/test_pure.py and tests/integration/executor/test_rules.py.)
"""

from __future__ import annotations

import asyncio
import ipaddress

import pytest

from sundial.core.netpolicy import (
    AddressError,
    AddressPolicy,
    Endpoint,
    HostNotFound,
    ResolveError,
    ResolveTimeout,
    check_host,
    ip_literal,
    parse_address,
    resolve,
)
from tests.helpers.dns_server import DnsServer
from tests.helpers.eventually import assert_eventually


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("example.com:443", Endpoint("example.com", 443)),
        ("10.0.0.1:8080", Endpoint("10.0.0.1", 8080)),
        ("[::1]:50051", Endpoint("::1", 50051)),
        ("[fe80::1%eth0]:80", Endpoint("fe80::1%eth0", 80)),
        ("my_host.internal.:0080", Endpoint("my_host.internal.", 80)),
        ("h:65535", Endpoint("h", 65535)),
    ],
)
def test_parse_address(address: str, expected: Endpoint) -> None:
    assert parse_address(address) == expected


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        ("", "must be host:port"),
        ("example.com", "must be host:port"),
        (":80", "must be host:port"),
        ("[::1]", "must be host:port"),
        ("[::1]50051", "must be host:port"),
        ("[::zz]:50051", "is not an IPv6 address"),
        ("[example.com]:80", "is not an IPv6 address"),
        # Unbracketed IPv6 is ambiguous (::1 port 50051, or the address ::1:50051?).
        ("::1:50051", "must be in brackets"),
        ("bad_host!:80", "is not a valid host name"),
        ("h\u00e9llo.example:80", "is not a valid host name"),
        ("example.com:0", "port must be 1-65535"),
        ("example.com:65536", "port must be 1-65535"),
        ("example.com:x", "port must be 1-65535"),
        ("example.com:-1", "port must be 1-65535"),
        ("example.com:", "port must be 1-65535"),
        # str.isdigit() accepts these; a port is ASCII digits only.
        ("example.com:\u00b2", "port must be 1-65535"),
        ("example.com:\u0668\u0660", "port must be 1-65535"),
        ("example.com:" + "9" * 5000, "port must be 1-65535"),
    ],
)
def test_parse_address_refuses(address: str, problem: str) -> None:
    with pytest.raises(AddressError) as caught:
        parse_address(address)
    assert problem in caught.value.problem
    assert str(caught.value) == caught.value.problem


def test_check_host_and_ip_literal() -> None:
    for host in ("example.com", "a-b.c_d.example.", "127.0.0.1", "::1", "[::1]", "x" * 63):
        check_host(host)
    for host in ("", "-a.example", "a..example", "x" * 64, "a b", "\u00fcber.example"):
        with pytest.raises(AddressError, match="is not a valid host name"):
            check_host(host)
    assert ip_literal("[::1]") == ipaddress.ip_address("::1")
    assert ip_literal("10.0.0.1") == ipaddress.ip_address("10.0.0.1")
    assert ip_literal("example.com") is None


def test_first_refusal_is_the_first_forbidden_address_in_order() -> None:
    addresses = [ipaddress.ip_address(a) for a in ("93.184.216.34", "10.0.0.1", "127.0.0.1")]
    refusal = AddressPolicy().first_refusal(addresses)
    assert refusal is not None
    assert refusal.address == addresses[1]
    assert "private" in refusal.reason
    assert AddressPolicy(allow_private=True).first_refusal(addresses[:2]) is None
    assert AddressPolicy().first_refusal([]) is None


async def test_resolve_keeps_resolver_order_without_duplicates(dns_server: DnsServer) -> None:
    dns_server.answers["example.com"] = ["192.0.2.1", "192.0.2.9", "2001:db8::1"]
    addresses = await resolve("example.com", 443, timeout_s=5)
    assert [str(a) for a in addresses] == ["192.0.2.1", "192.0.2.9", "2001:db8::1"]
    assert dns_server.order == ["example.com"]


async def test_resolve_returns_a_literal_without_a_lookup(dns_server: DnsServer) -> None:
    assert await resolve("10.1.2.3", 80, timeout_s=5) == (ipaddress.ip_address("10.1.2.3"),)
    assert await resolve("[::1]", 80, timeout_s=5) == (ipaddress.ip_address("::1"),)
    assert dns_server.order == []


@pytest.mark.parametrize(
    ("kind", "error", "text"),
    [
        ("nxdomain", HostNotFound, ""),
        ("no addresses", HostNotFound, ""),
        ("servfail", ResolveError, "cannot resolve gone.example now"),
    ],
)
async def test_resolve_failures_are_typed(
    dns_server: DnsServer, kind: str, error: type[Exception], text: str
) -> None:
    if kind == "no addresses":
        dns_server.answers["gone.example"] = []
    elif kind == "servfail":
        dns_server.failing.add("gone.example")
    with pytest.raises(error) as caught:
        await resolve("gone.example", 80, timeout_s=5)
    assert "gone.example" in str(caught.value) and text in str(caught.value)
    # OSError like any connection failure: the executor's retryable case needs nothing new.
    assert isinstance(caught.value, OSError)
    if error is ResolveError:
        assert not isinstance(caught.value, HostNotFound)
    else:
        assert str(caught.value) == "host gone.example does not resolve"


async def test_resolve_is_bounded(dns_server: DnsServer) -> None:
    dns_server.silent.add("slow.example")
    with pytest.raises(ResolveTimeout, match=r"resolving slow\.example took more than 0.2 s"):
        await resolve("slow.example", 80, timeout_s=0.2)
    with pytest.raises(TimeoutError):  # also a TimeoutError, and so an OSError
        await resolve("slow.example", 80, timeout_s=0.2)


async def test_one_tenants_silent_names_leave_another_tenants_lookups_on_time(
    dns_server: DnsServer,
) -> None:
    dns_server.silent.add("never.a.example")
    dns_server.answers["fine.b.example"] = ["192.0.2.7"]
    resolver = dns_server.resolver(per_tenant=4)
    # Tenant A: 200 lookups that never answer, far more than its 4 slots.
    stuck = [
        asyncio.create_task(resolver.resolve("never.a.example", 80, timeout_s=3, tenant="a"))
        for _ in range(200)
    ]
    await assert_eventually(lambda: dns_server.asked["never.a.example"] >= 4)
    # Tenant B's lookups answer meanwhile, each well inside its own short timeout.
    for _ in range(20):
        found = await resolver.resolve("fine.b.example", 80, timeout_s=0.5, tenant="b")
        assert found == (ipaddress.ip_address("192.0.2.7"),)
    assert not any(task.done() for task in stuck)  # A's are still waiting on their own
    # A's lookups in flight never exceeded its bound: the server saw few of them.
    assert dns_server.asked["never.a.example"] < 200
    results = await asyncio.gather(*stuck, return_exceptions=True)
    assert {type(r) for r in results} == {ResolveTimeout}
    await resolver.close()


async def test_resolve_with_the_system_resolver() -> None:
    # localhost resolves from the hosts file, without a network.
    addresses = await resolve("localhost", 80, timeout_s=10)
    assert addresses and all(a.is_loopback for a in addresses)
    refusal = AddressPolicy().first_refusal(addresses)
    assert refusal is not None and "loopback" in refusal.reason
    assert AddressPolicy(allow_loopback=True).first_refusal(addresses) is None


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("2002:7f00:1::", "a loopback address"),  # 6to4 of 127.0.0.1
        ("2002:a9fe:a9fe::", "a cloud metadata address"),  # 6to4 of 169.254.169.254
        ("2002:a00:1::", "a private or non-public address"),  # 6to4 of 10.0.0.1
        ("fec0::1", "a private or non-public address"),  # site-local
        ("2002:808:808::", None),  # 6to4 of a public address
    ],
)
def test_6to4_is_judged_as_its_ipv4_and_site_local_as_private(
    address: str, reason: str | None
) -> None:
    assert AddressPolicy().refusal(ipaddress.ip_address(address)) == reason
    if reason == "a private or non-public address":
        assert AddressPolicy(allow_private=True).refusal(ipaddress.ip_address(address)) is None
