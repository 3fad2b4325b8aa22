"""The one address policy: how a target's host:port is read and resolved, shared by the
API's write-time check and the executor's call-time check. (The SSRF rule table itself
is pinned by tests/integration/api/test_pure.py and tests/integration/executor/test_rules.py.)
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from typing import Any

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


def _infos(*addresses: str) -> list[tuple[Any, ...]]:
    return [
        (
            socket.AF_INET6 if ":" in a else socket.AF_INET,
            socket.SOCK_STREAM,
            6,
            "",
            (a, 80, 0, 0) if ":" in a else (a, 80),
        )
        for a in addresses
    ]


HANG = object()


def _fake_resolver(monkeypatch: pytest.MonkeyPatch, answer: Any) -> list[str]:
    """Replace the running loop's getaddrinfo; returns the hosts it was asked for."""
    asked: list[str] = []

    async def getaddrinfo(host: str, port: int, **kwargs: Any) -> list[tuple[Any, ...]]:
        asked.append(host)
        if isinstance(answer, BaseException):
            raise answer
        if answer is HANG:
            await asyncio.Event().wait()  # a resolver that never answers
        return answer  # type: ignore[no-any-return]

    monkeypatch.setattr(asyncio.get_running_loop(), "getaddrinfo", getaddrinfo)
    return asked


async def test_resolve_keeps_resolver_order_without_duplicates_or_zones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked = _fake_resolver(
        monkeypatch, _infos("2001:db8::1", "192.0.2.1", "2001:db8::1", "fe80::1%eth0")
    )
    addresses = await resolve("example.com", 443, timeout_s=5)
    assert [str(a) for a in addresses] == ["2001:db8::1", "192.0.2.1", "fe80::1"]
    assert asked == ["example.com"]


async def test_resolve_returns_a_literal_without_a_lookup(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _fake_resolver(monkeypatch, _infos("192.0.2.1"))
    assert await resolve("10.1.2.3", 80, timeout_s=5) == (ipaddress.ip_address("10.1.2.3"),)
    assert await resolve("[::1]", 80, timeout_s=5) == (ipaddress.ip_address("::1"),)
    assert asked == []


@pytest.mark.parametrize(
    ("answer", "error", "text"),
    [
        (socket.gaierror(socket.EAI_NONAME, "Name or service not known"), HostNotFound, ""),
        ([], HostNotFound, ""),
        (socket.gaierror(socket.EAI_AGAIN, "Temporary failure"), ResolveError, "Temporary"),
    ],
)
async def test_resolve_failures_are_typed(
    monkeypatch: pytest.MonkeyPatch, answer: Any, error: type[Exception], text: str
) -> None:
    _fake_resolver(monkeypatch, answer)
    with pytest.raises(error) as caught:
        await resolve("gone.example", 80, timeout_s=5)
    assert "gone.example" in str(caught.value) and text in str(caught.value)
    # OSError like any connection failure: the executor's retryable case needs nothing new.
    assert isinstance(caught.value, OSError)
    if error is ResolveError:
        assert not isinstance(caught.value, HostNotFound)
    else:
        assert str(caught.value) == "host gone.example does not resolve"


async def test_resolve_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_resolver(monkeypatch, HANG)
    with pytest.raises(ResolveTimeout, match=r"resolving slow\.example took more than 0 s"):
        await resolve("slow.example", 80, timeout_s=0)
    with pytest.raises(TimeoutError):  # also a TimeoutError, and so an OSError
        await resolve("slow.example", 80, timeout_s=0)


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
