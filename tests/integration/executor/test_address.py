"""The executor's call-time address check reads and resolves a target's address exactly as
the API's write-time check does (both are sundial.core.netpolicy), and maps the verdicts
onto outcomes: malformed or forbidden is final (TargetRefused), a failed lookup is a
connection error (OSError, retryable)."""

from __future__ import annotations

import pytest

from sundial.api import validation
from sundial.core.errors import InvalidArgument
from sundial.targets import address
from sundial.targets.address import AddressPolicy, TargetRefused, split_host_port
from tests.helpers.dns_server import DnsServer


@pytest.mark.parametrize(
    "text",
    [
        "",
        "example.com",
        "example.com:0",
        "::1:50051",  # unbracketed IPv6
        "[example.com]:443",
        "[::zz]:50051",
        "bad_host!:80",
        "example.com:\u00b2",
    ],
)
def test_an_address_the_api_refuses_is_refused_at_call_time(text: str) -> None:
    with pytest.raises(InvalidArgument) as at_write:
        validation.split_address(text, "target.grpc.address")
    with pytest.raises(TargetRefused) as at_call:
        split_host_port(text)
    if text:  # the API says "is required" before it parses
        assert str(at_call.value) == f"bad target address {text!r}: {at_write.value.problem}"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("example.com:443", ("example.com", 443)),
        ("[::1]:50051", ("::1", 50051)),
        ("10.0.0.1:0080", ("10.0.0.1", 80)),
    ],
)
def test_an_address_the_api_accepts_is_read_the_same_at_call_time(
    text: str, expected: tuple[str, int]
) -> None:
    endpoint = validation.split_address(text, "target.grpc.address")
    assert (endpoint.host, endpoint.port) == expected == split_host_port(text)


async def test_a_hung_resolver_is_a_connection_error(
    monkeypatch: pytest.MonkeyPatch, dns_server: DnsServer
) -> None:
    dns_server.silent.add("slow.example")  # never answers
    monkeypatch.setattr(address, "RESOLVE_TIMEOUT_S", 0.1)
    with pytest.raises(OSError, match="took more than"):
        await AddressPolicy(allow_private=True).resolve("slow.example", 443)


async def test_the_first_forbidden_address_in_resolver_order_is_named(
    dns_server: DnsServer,
) -> None:
    dns_server.answers["mixed.example"] = ["93.184.216.34", "10.0.0.7"]
    with pytest.raises(
        TargetRefused, match=r"^mixed\.example \(10\.0\.0\.7\) is a private or non-public"
    ):
        await AddressPolicy().resolve("mixed.example", 443)
    assert await AddressPolicy(allow_private=True).resolve("mixed.example", 443) == [
        "93.184.216.34",
        "10.0.0.7",
    ]
