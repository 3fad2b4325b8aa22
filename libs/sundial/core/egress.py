"""Egress policies: which non-public addresses a tenant's targets may reach.

Public addresses are reachable by every tenant; the operator's deny list
(:meth:`sundial.core.netpolicy.AddressPolicy.denial`: cloud metadata, unspecified,
multicast, reserved, and loopback unless the operator allows it) is never reachable. In
between, a non-public address (private, shared, link-local, unique-local...) is
reachable only when the tenant's egress policy allows it, by either of its rules:

- a **host rule**: an exact name (``billing.payments.svc.cluster.local``) or a suffix
  pattern (``*.svc.cluster.local``: any name ending in ``.svc.cluster.local``, not the
  suffix itself) whose names may reach any address that is not denied;
- a **network rule**: a CIDR (``10.0.0.0/8``) whose addresses are reachable whatever the
  name (an IP-literal target is judged by network rules only).

Each rule applies to HTTP targets, gRPC targets or both. A tenant without its own
policy gets the operator's default, built from ``SUNDIAL_ALLOW_PRIVATE_TARGETS`` (every
network) and ``SUNDIAL_ALLOW_LOOPBACK_TARGETS`` (the loopback networks). A tenant's own
policy replaces the default, it does not extend it. docs/design.md section 7.

Pure: no I/O. The same judgement runs when a job is written (the API) and at every
connection (the executor), on the policy current at that moment.
"""

from __future__ import annotations

import enum
import functools
import hashlib
import ipaddress
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sundial.core import netpolicy
from sundial.core.netpolicy import AddressPolicy, IPAddress, carried_ipv4, ip_literal

__all__ = [
    "MAX_RULES",
    "EgressError",
    "EgressPolicy",
    "EgressRule",
    "Network",
    "Protocol",
    "default_policy",
    "judge",
    "parse_rule",
    "policy_from_document",
]

MAX_RULES = 256
"""Most rules in one policy (admin.proto)."""

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class Protocol(enum.Enum):
    """What kind of target a rule applies to (egress.proto ``EgressProtocol``)."""

    HTTP = "http"
    GRPC = "grpc"


BOTH = frozenset(Protocol)


class EgressError(ValueError):
    """A malformed rule or policy.

    Attributes:
        field: Path of the offending input relative to the policy (``rules[2].cidr``).
        problem: What is wrong with it.
    """

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


@dataclass(frozen=True, slots=True)
class EgressRule:
    """One allowance: a host pattern or a network, for some protocols."""

    host: str | None = None
    """An exact lower-case name, or ``*.`` and a suffix; None for a network rule."""
    network: Network | None = None
    """None for a host rule."""
    protocols: frozenset[Protocol] = BOTH

    def matches_host(self, host: str) -> bool:
        """Whether the (lower-case, dot-free at the end) name ``host`` is covered."""
        pattern = self.host
        if pattern is None:
            return False
        if pattern.startswith("*."):
            return host.endswith(pattern[1:]) and len(host) > len(pattern) - 1
        return host == pattern

    def text(self) -> str:
        """The rule as the CLI writes it: ``*.svc.cluster.local`` or ``10.0.0.0/8=grpc``."""
        what = self.host if self.host is not None else str(self.network)
        if self.protocols == BOTH:
            return what
        return f"{what}={','.join(sorted(p.value for p in self.protocols))}"


@dataclass(frozen=True, slots=True)
class EgressPolicy:
    """A tenant's allowances for non-public addresses (see the module docstring)."""

    rules: tuple[EgressRule, ...] = ()
    fingerprint: int = field(default=0, compare=False)
    """A digest of the rules (sha256), equal for equal policies: connections opened
    under one policy are pooled apart from those of another."""

    def __post_init__(self) -> None:
        if not self.fingerprint:
            digest = hashlib.sha256(self.document().encode()).digest()
            object.__setattr__(self, "fingerprint", int.from_bytes(digest, "big") | 1)

    def allows(self, protocol: Protocol, host: str | None, address: IPAddress) -> bool:
        """Whether a rule for ``protocol`` lets ``host`` (a name, or None for an IP
        literal) reach the non-public ``address``. Deny-list checks are :func:`judge`'s."""
        carried = carried_ipv4(address)
        name = None if host is None else _canonical_name(host)
        for rule in self.rules:
            if protocol not in rule.protocols:
                continue
            if rule.network is not None:
                if _contains(rule.network, carried) or _contains(rule.network, address):
                    return True
            elif name is not None and rule.matches_host(name):
                return True
        return False

    def host_allowed(self, protocol: Protocol, host: str) -> bool:
        """Whether a host rule for ``protocol`` covers the name ``host``."""
        name = _canonical_name(host)
        return any(
            protocol in rule.protocols and rule.matches_host(name)
            for rule in self.rules
            if rule.host is not None
        )

    def document(self) -> str:
        """The stored form (``tenants.egress_policy``): canonical JSON."""
        return json.dumps({"rules": [_rule_document(r) for r in self.rules]}, sort_keys=True)


def _canonical_name(host: str) -> str:
    return host.lower().rstrip(".")


def _contains(network: Network, address: IPAddress) -> bool:
    return address.version == network.version and address in network


def _rule_document(rule: EgressRule) -> dict[str, Any]:
    entry: dict[str, Any] = {"protocols": sorted(p.value for p in rule.protocols)}
    if rule.host is not None:
        entry["host"] = rule.host
    else:
        entry["cidr"] = str(rule.network)
    return entry


# --- building rules -----------------------------------------------------------------------


def host_rule(
    pattern: str, protocols: Iterable[Protocol] = BOTH, where: str = "host"
) -> EgressRule:
    """A host rule from an exact name or ``*.suffix``.

    Raises:
        EgressError: Not a DNS name (IP literals belong in network rules), a wildcard
            anywhere but as the whole first label, or a bare ``*``.
    """
    text = pattern.strip().lower().rstrip(".")
    if not text:
        raise EgressError(where, "is empty")
    if ip_literal(text) is not None:
        raise EgressError(where, f"{pattern!r} is an IP address: allow it as a cidr")
    if text == "*":
        raise EgressError(where, "'*' needs a suffix ('*.svc.cluster.local')")
    name = text[2:] if text.startswith("*.") else text
    if "*" in name:
        raise EgressError(where, f"{pattern!r}: '*' may only be the whole first label ('*.suffix')")
    try:
        netpolicy.check_host(name)
    except netpolicy.AddressError as exc:
        raise EgressError(where, exc.problem) from None
    return EgressRule(host=text, protocols=_protocols(protocols, where))


def network_rule(
    cidr: str, protocols: Iterable[Protocol] = BOTH, where: str = "cidr"
) -> EgressRule:
    """A network rule from CIDR notation (a bare address is a /32 or /128).

    Raises:
        EgressError: Not a network, or host bits set (``10.1.2.3/8``).
    """
    try:
        network = ipaddress.ip_network(cidr.strip(), strict=True)
    except ValueError as exc:
        raise EgressError(where, f"{cidr!r} is not a CIDR network ({exc})") from None
    return EgressRule(network=network, protocols=_protocols(protocols, where))


def _protocols(protocols: Iterable[Protocol], where: str) -> frozenset[Protocol]:
    chosen = frozenset(protocols)
    if not chosen:
        raise EgressError(where, "names no protocol")
    return chosen


def parse_rule(text: str, where: str = "rule") -> EgressRule:
    """A rule as the CLI writes it: ``PATTERN_OR_CIDR[=http|grpc|http,grpc]``.

    Raises:
        EgressError: A malformed rule.
    """
    what, sep, names = text.partition("=")
    protocols: frozenset[Protocol] = BOTH
    if sep:
        try:
            protocols = frozenset(Protocol(n.strip().lower()) for n in names.split(","))
        except ValueError:
            raise EgressError(
                where, f"protocols must be http, grpc or http,grpc, got {names!r}"
            ) from None
    if "/" in what or ip_literal(what.strip()) is not None:
        return network_rule(what, protocols, where)
    return host_rule(what, protocols, where)


def policy_of(rules: Sequence[EgressRule]) -> EgressPolicy:
    """A policy of ``rules`` with duplicates dropped (order kept).

    Raises:
        EgressError: More than :data:`MAX_RULES` rules.
    """
    if len(rules) > MAX_RULES:
        raise EgressError("rules", f"at most {MAX_RULES} rules, got {len(rules)}")
    return EgressPolicy(tuple(dict.fromkeys(rules)))


@functools.lru_cache(maxsize=1024)
def policy_from_document(document: str) -> EgressPolicy:
    """A stored policy (:meth:`EgressPolicy.document`). Cached: each lease carries one.

    Raises:
        EgressError: A document that is not a policy.
    """
    try:
        data = json.loads(document)
        entries = data["rules"]
        rules = []
        for i, entry in enumerate(entries):
            protocols = [Protocol(p) for p in entry["protocols"]]
            where = f"rules[{i}]"
            if "host" in entry:
                rules.append(host_rule(entry["host"], protocols, where))
            else:
                rules.append(network_rule(entry["cidr"], protocols, where))
    except (ValueError, KeyError, TypeError) as exc:
        if isinstance(exc, EgressError):
            raise
        raise EgressError("egress_policy", f"not a stored egress policy ({exc})") from None
    return policy_of(rules)


_LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"))
_EVERYWHERE = (ipaddress.ip_network("0.0.0.0/0"), ipaddress.ip_network("::/0"))


def default_policy(operator: AddressPolicy) -> EgressPolicy:
    """The policy of tenants without their own: every network with
    ``allow_private``, the loopback networks with ``allow_loopback``, else none."""
    networks = _EVERYWHERE if operator.allow_private else ()
    if operator.allow_loopback and not operator.allow_private:
        networks = _LOOPBACK
    return EgressPolicy(tuple(EgressRule(network=n) for n in networks))


# --- the judgement ------------------------------------------------------------------------


def judge(
    operator: AddressPolicy,
    policy: EgressPolicy,
    protocol: Protocol,
    host: str,
    address: IPAddress,
) -> str | None:
    """Why a ``protocol`` target named ``host`` may not connect to ``address``, or None.

    The deny list wins over every rule; a public address needs no rule; a non-public one
    needs a rule of ``policy`` for ``protocol`` that covers ``address`` or, when ``host``
    is a name, ``host``.
    """
    denied = operator.denial(address)
    if denied is not None:
        return denied
    kind = netpolicy.non_public(address)
    if kind is None:
        return None
    name = None if ip_literal(host) is not None else host
    if policy.allows(protocol, name, address):
        return None
    return f"{kind} the tenant's egress policy does not allow for {protocol.value} targets"
