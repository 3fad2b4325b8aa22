"""Egress policies (sundial.core.egress): the judgement the API and the executor share."""

from __future__ import annotations

import ipaddress

import pytest

from sundial.core.egress import (
    EgressError,
    EgressPolicy,
    Protocol,
    default_policy,
    judge,
    parse_rule,
    policy_from_document,
    policy_of,
)
from sundial.core.netpolicy import AddressPolicy

HTTP, GRPC = Protocol.HTTP, Protocol.GRPC
STRICT = AddressPolicy()
# Tenant A of the issue: *.internal.test and 10.0.0.0/8, both protocols.
TENANT_A = policy_of([parse_rule("*.internal.test"), parse_rule("10.0.0.0/8")])
# Tenant B: no policy of its own, the operator's default (nothing non-public).
TENANT_B = default_policy(STRICT)
# Everything a policy can say, and the operator allowing everything it can.
WIDEST = policy_of(
    [parse_rule("0.0.0.0/0"), parse_rule("::/0"), parse_rule("*.test"), parse_rule("*.example")]
)
WIDE_OPEN = AddressPolicy(allow_loopback=True, allow_private=True)


def verdict(
    policy: EgressPolicy,
    host: str,
    address: str,
    protocol: Protocol = HTTP,
    operator: AddressPolicy = STRICT,
) -> str | None:
    return judge(operator, policy, protocol, host, ipaddress.ip_address(address))


@pytest.mark.parametrize(
    ("host", "address", "a_allowed", "b_allowed"),
    [
        ("svc.internal.test", "10.1.2.3", True, False),  # by the host rule
        ("svc.internal.test", "192.168.7.7", True, False),  # a host rule: any address
        ("deep.svc.internal.test", "172.16.0.9", True, False),
        ("10.1.2.3", "10.1.2.3", True, False),  # an IP literal: by the network rule
        ("other.test", "10.9.9.9", True, False),  # by the network rule, whatever the name
        ("::ffff:10.1.2.3", "::ffff:10.1.2.3", True, False),  # mapped form of an allowed one
        ("other.test", "192.168.1.1", False, False),  # a private address outside the policy
        ("internal.test", "192.168.1.1", False, False),  # "*.x" does not cover "x" itself
        ("evilinternal.test", "192.168.1.1", False, False),  # a suffix is a whole label
        ("192.168.1.1", "192.168.1.1", False, False),
        ("example.com", "93.184.216.34", True, True),  # public: no rule needed
        ("SVC.Internal.Test.", "10.1.2.3", True, False),  # names are case-insensitive
    ],
)
def test_tenant_a_reaches_its_rules_and_tenant_b_only_public(
    host: str, address: str, a_allowed: bool, b_allowed: bool
) -> None:
    assert (verdict(TENANT_A, host, address) is None) is a_allowed
    assert (verdict(TENANT_B, host, address) is None) is b_allowed


@pytest.mark.parametrize(
    "address",
    [
        "169.254.169.254",
        "::ffff:169.254.169.254",  # IPv4-mapped
        "::ffff:a9fe:a9fe",  # the same, in hex
        "64:ff9b::a9fe:a9fe",  # NAT64
        "2002:a9fe:a9fe::1",  # 6to4
        "fd00:ec2::254",  # AWS over IPv6
        "169.254.170.2",
        "100.100.100.200",
        "0.0.0.0",
        "::",
        "224.0.0.251",
        "ff02::1",
        "240.0.0.1",
    ],
)
def test_the_deny_list_wins_over_any_policy(address: str) -> None:
    for operator in (STRICT, WIDE_OPEN):
        for host in ("metadata.internal.test", "metadata.example", address):
            for protocol in Protocol:
                reason = verdict(WIDEST, host, address, protocol, operator)
                assert reason is not None, (operator, host, protocol)
                assert "egress policy" not in reason, reason


def test_loopback_is_denied_unless_the_operator_allows_it_and_then_needs_a_rule() -> None:
    assert verdict(WIDEST, "127.0.0.1", "127.0.0.1") == "a loopback address"
    assert verdict(WIDEST, "lo.test", "::1") == "a loopback address"
    dev = AddressPolicy(allow_loopback=True)
    assert verdict(default_policy(dev), "localhost", "127.0.0.1", operator=dev) is None
    # A tenant's own policy replaces the default: loopback needs one of its rules.
    assert "egress policy" in (verdict(TENANT_A, "localhost", "127.0.0.1", operator=dev) or "")
    assert verdict(TENANT_A, "svc.internal.test", "127.0.0.1", operator=dev) is None


def test_rules_apply_to_their_protocols_only() -> None:
    policy = policy_of([parse_rule("*.grpc.test=grpc"), parse_rule("10.0.0.0/8=http")])
    assert verdict(policy, "a.grpc.test", "10.200.0.1", GRPC) is None
    assert verdict(policy, "a.grpc.test", "192.168.0.1", HTTP) is not None
    assert verdict(policy, "10.1.1.1", "10.1.1.1", HTTP) is None
    reason = verdict(policy, "10.1.1.1", "10.1.1.1", GRPC)
    assert reason == (
        "a private or non-public address the tenant's egress policy does not allow for grpc targets"
    )


def test_the_operator_default_follows_the_old_switches() -> None:
    private = AddressPolicy(allow_private=True)
    assert verdict(default_policy(private), "db.local", "10.0.0.5", operator=private) is None
    assert verdict(default_policy(private), "x", "fe80::1", operator=private) is None
    assert verdict(default_policy(private), "x", "127.0.0.1", operator=private) is not None
    assert default_policy(STRICT).rules == ()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("*", "needs a suffix"),
        ("a.*.test", "first label"),
        ("*.", "needs a suffix"),
        ("exa mple.com", "not a valid host name"),
        ("10.1.2.3/8", "not a CIDR network"),
        ("10.0.0.0/33", "not a CIDR network"),
        ("*.svc=ftp", "protocols must be"),
        ("", "is empty"),
    ],
)
def test_malformed_rules_are_refused_with_the_problem(text: str, problem: str) -> None:
    with pytest.raises(EgressError, match=problem):
        parse_rule(text)


def test_a_literal_address_becomes_a_network_rule() -> None:
    rule = parse_rule("10.1.2.3")
    assert str(rule.network) == "10.1.2.3/32"
    assert parse_rule("fd00::/8=grpc").text() == "fd00::/8=grpc"


def test_the_stored_document_round_trips_and_equal_policies_share_a_fingerprint() -> None:
    document = TENANT_A.document()
    assert policy_from_document(document) == TENANT_A
    assert policy_from_document(document).fingerprint == TENANT_A.fingerprint
    other = policy_of([parse_rule("10.0.0.0/8")])
    assert other.fingerprint != TENANT_A.fingerprint
    assert policy_of([*TENANT_A.rules, *TENANT_A.rules]) == TENANT_A  # duplicates dropped
    with pytest.raises(EgressError):
        policy_from_document('{"rules": [{"cidr": "nope", "protocols": ["http"]}]}')
