"""Outcome classification, Retry-After, SSRF address rules and the circuit breaker."""

from __future__ import annotations

import ipaddress
from datetime import UTC, datetime, timedelta

import grpc
import pytest

from sundial.core.clock import ManualClock
from sundial.core.egress import EgressPolicy, Protocol, network_rule
from sundial.run import ErrorClass, OutcomeStatus
from sundial.targets import (
    AddressPolicy,
    CircuitBreaker,
    TargetRefused,
    classify_grpc,
    classify_http,
    parse_retry_after,
    split_host_port,
)

OK = (OutcomeStatus.SUCCEEDED, None)
RETRY = (OutcomeStatus.FAILED_RETRYABLE, ErrorClass.RETRYABLE)
FINAL = (OutcomeStatus.FAILED_FINAL, ErrorClass.FINAL)


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (200, OK),
        (201, OK),
        (204, OK),
        (299, OK),
        (301, FINAL),
        (302, FINAL),
        (400, FINAL),
        (401, FINAL),
        (403, FINAL),
        (404, FINAL),
        (409, FINAL),
        (422, FINAL),
        (408, RETRY),
        (425, RETRY),
        (429, RETRY),
        (500, RETRY),
        (502, RETRY),
        (503, RETRY),
        (504, RETRY),
        (599, RETRY),
    ],
)
def test_http_status_classification(
    status: int, expected: tuple[OutcomeStatus, ErrorClass | None]
) -> None:
    assert classify_http(status) == expected


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (grpc.StatusCode.OK, OK),
        (grpc.StatusCode.UNAVAILABLE, RETRY),
        (grpc.StatusCode.DEADLINE_EXCEEDED, RETRY),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, RETRY),
        (grpc.StatusCode.ABORTED, RETRY),
        (grpc.StatusCode.INTERNAL, RETRY),
        (grpc.StatusCode.UNKNOWN, RETRY),
        (grpc.StatusCode.INVALID_ARGUMENT, FINAL),
        (grpc.StatusCode.NOT_FOUND, FINAL),
        (grpc.StatusCode.PERMISSION_DENIED, FINAL),
        (grpc.StatusCode.FAILED_PRECONDITION, FINAL),
        (grpc.StatusCode.UNAUTHENTICATED, FINAL),
        (grpc.StatusCode.UNIMPLEMENTED, FINAL),
        (grpc.StatusCode.ALREADY_EXISTS, FINAL),
        (grpc.StatusCode.CANCELLED, FINAL),
        (grpc.StatusCode.OUT_OF_RANGE, FINAL),
        (grpc.StatusCode.DATA_LOSS, FINAL),
    ],
)
def test_grpc_code_classification(
    code: grpc.StatusCode, expected: tuple[OutcomeStatus, ErrorClass | None]
) -> None:
    assert classify_grpc(code) == expected


NOW = datetime(2026, 3, 8, 14, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (None, None),
        ("", None),
        ("0", 0.0),
        ("120", 120.0),
        (" 7 ", 7.0),
        ("999999999", 86_400.0),
        ("Sun, 08 Mar 2026 14:00:30 GMT", 30.0),
        ("Sun, 08 Mar 2026 13:00:00 GMT", 0.0),
        ("-5", None),
        ("1.5", None),
        ("soon", None),
    ],
)
def test_retry_after(value: str | None, seconds: float | None) -> None:
    expected = None if seconds is None else timedelta(seconds=seconds)
    assert parse_retry_after(value, NOW) == expected


STRICT = AddressPolicy()
LOOPBACK_OK = AddressPolicy(allow_loopback=True)
PRIVATE_OK = AddressPolicy(allow_private=True)


@pytest.mark.parametrize(
    ("address", "strict", "loopback_ok", "private_ok"),
    [
        ("93.184.216.34", True, True, True),
        ("2606:2800:220:1:248:1893:25c8:1946", True, True, True),
        ("127.0.0.1", False, True, False),
        ("::1", False, True, False),
        ("::ffff:127.0.0.1", False, True, False),
        ("10.1.2.3", False, False, True),
        ("172.16.0.1", False, False, True),
        ("192.168.1.1", False, False, True),
        ("100.64.0.1", False, False, True),
        ("169.254.1.1", False, False, True),
        ("fe80::1", False, False, True),
        ("fd12:3456::1", False, False, True),
        ("169.254.169.254", False, False, False),
        ("100.100.100.200", False, False, False),
        ("fd00:ec2::254", False, False, False),
        ("0.0.0.0", False, False, False),
        ("224.0.0.1", False, False, False),
        ("240.0.0.1", False, False, False),
    ],
)
def test_address_rules(address: str, strict: bool, loopback_ok: bool, private_ok: bool) -> None:
    ip = ipaddress.ip_address(address)
    for policy, allowed in ((STRICT, strict), (LOOPBACK_OK, loopback_ok), (PRIVATE_OK, private_ok)):
        if allowed:
            policy.check(ip)
        else:
            with pytest.raises(TargetRefused):
                policy.check(ip)


async def test_resolve_checks_every_address_of_a_name() -> None:
    with pytest.raises(TargetRefused):
        await STRICT.resolve("localhost", 80)
    assert "127.0.0.1" in await LOOPBACK_OK.resolve("localhost", 80) or (
        "::1" in await LOOPBACK_OK.resolve("localhost", 80)
    )


@pytest.mark.parametrize(
    ("address", "expected"),
    [("example.com:443", ("example.com", 443)), ("[::1]:50051", ("::1", 50051))],
)
def test_split_host_port(address: str, expected: tuple[str, int]) -> None:
    assert split_host_port(address) == expected


@pytest.mark.parametrize("address", ["example.com", "example.com:0", "example.com:x", ":80"])
def test_split_host_port_rejects(address: str) -> None:
    with pytest.raises(TargetRefused):
        split_host_port(address)


T = ("tenant-1", "https://t:443")


def test_breaker_opens_after_consecutive_failures_and_probes_after_open_period() -> None:
    clock = ManualClock()
    breaker = CircuitBreaker(failures=3, open_s=30.0, clock=clock)
    for _ in range(2):
        assert breaker.acquire(T) is None
        breaker.record(T, failed=True)
    assert breaker.acquire(T) is None
    breaker.record(T, failed=True)  # third consecutive failure: open
    assert breaker.acquire(T) == pytest.approx(30.0)
    clock.advance(10)
    assert breaker.acquire(T) == pytest.approx(20.0)
    assert breaker.acquire(("tenant-1", "https://other:443")) is None  # per target
    assert breaker.acquire(("tenant-2", "https://t:443")) is None  # and per tenant
    clock.advance(20)
    assert breaker.acquire(T) is None  # half-open: one probe
    # Others wait for the probe: as long as a failed probe would keep it open, not 1 s.
    assert breaker.acquire(T) == pytest.approx(30.0)
    clock.advance(25)
    assert breaker.acquire(T) == pytest.approx(5.0)
    clock.advance(10)
    assert breaker.acquire(T) == pytest.approx(1.0)  # a probe slower than open_s
    breaker.record(T, failed=True)  # the probe failed: open again
    assert breaker.acquire(T) == pytest.approx(30.0)
    clock.advance(30)
    assert breaker.acquire(T) is None
    breaker.record(T, failed=False)  # the probe succeeded: closed
    assert breaker.acquire(T) is None
    assert not breaker.is_open(T)


def test_breaker_success_resets_the_count_and_cancelled_probe_is_released() -> None:
    clock = ManualClock()
    breaker = CircuitBreaker(failures=2, open_s=5.0, clock=clock)
    breaker.record(T, failed=True)
    breaker.record(T, failed=False)
    breaker.record(T, failed=True)
    assert breaker.acquire(T) is None  # 1 consecutive failure only
    breaker.record(T, failed=True)
    clock.advance(5)
    assert breaker.acquire(T) is None  # probe
    breaker.release(T)  # cancelled without an answer
    assert breaker.acquire(T) is None  # the next call may probe


def test_a_verdict_is_remembered_per_policy_and_operator() -> None:
    """Verdicts are remembered (judging walked the rules at every call): a tightened
    policy, another tenant's or another operator's switches still get their own."""
    ip = ipaddress.ip_address("10.1.2.3")
    opened = EgressPolicy((network_rule("10.0.0.0/8", [Protocol.HTTP]),))
    for _ in range(2):  # the second round answers from what the first remembered
        STRICT.rules(opened, Protocol.HTTP, "tenant-a").check("10.1.2.3", ip)
        with pytest.raises(TargetRefused):
            STRICT.rules(EgressPolicy(), Protocol.HTTP, "tenant-a").check("10.1.2.3", ip)
        with pytest.raises(TargetRefused):
            STRICT.rules(opened, Protocol.GRPC, "tenant-a").check("10.1.2.3", ip)
        with pytest.raises(TargetRefused):
            STRICT.rules(None, Protocol.HTTP, "tenant-b").check("10.1.2.3", ip)
        PRIVATE_OK.rules(None, Protocol.HTTP, "tenant-b").check("10.1.2.3", ip)
    assert STRICT.rules(opened, Protocol.HTTP, "tenant-a") is STRICT.rules(
        opened, Protocol.HTTP, "tenant-a"
    )
