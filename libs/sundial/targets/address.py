"""Which network addresses a target may be called at (SSRF rules, checked at call time).

The API checks a target's host when a job is written; DNS can change afterwards (or be
made to: DNS rebinding), and the tenant's egress policy can change too, so the executor
resolves the host again at every new connection and refuses it when ANY resolved
address is forbidden: on the operator's deny list (this executor's own
``allow_loopback_targets``, which no policy lifts) or outside the tenant's egress policy
as the lease grant carried it (the operator's default, from ``allow_private_targets``
and ``allow_loopback_targets``, when the grant carries none). The HTTP client then
connects to the address that was checked (see :mod:`sundial.targets.http`), so
there is no window between check and connect.

Parsing, resolution and the rules are :mod:`sundial.core.netpolicy`'s and
:mod:`sundial.core.egress`'s, the same the API applies when a job is written; this
module only maps their verdicts onto the executor's outcomes: a forbidden address is a
final failure (:class:`TargetForbidden`, ``target_forbidden``), a malformed one too
(:class:`TargetRefused`, ``refused``), a failed lookup is an :class:`OSError` like any
connection error (retryable).
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from dataclasses import dataclass

from sundial.core import netpolicy
from sundial.core.egress import EgressPolicy, Protocol, default_policy, judge
from sundial.core.netpolicy import IPAddress
from sundial.run import ErrorClass

__all__ = [
    "RESOLVE_TIMEOUT_S",
    "AddressPolicy",
    "CallRules",
    "TargetForbidden",
    "TargetRefused",
    "split_host_port",
]

RESOLVE_TIMEOUT_S = 10.0
"""Bound on one name lookup: the connect timeout of HTTP calls, so a hung resolver fails
the attempt as a connection error instead of holding it until the run timeout."""


class TargetRefused(Exception):
    """The executor refuses to call this target: a final failure of class
    :attr:`error_class` (a malformed address: ``refused``)."""

    error_class = ErrorClass.REFUSED


class TargetForbidden(TargetRefused):
    """The address is denied or outside the tenant's egress policy (``target_forbidden``)."""

    error_class = ErrorClass.TARGET_FORBIDDEN


_MAX_MEMO = 4096
"""Verdicts and call rules kept at most (the oldest go first)."""

_VerdictKey = tuple[netpolicy.AddressPolicy, int, Protocol, str, IPAddress]
_verdicts: OrderedDict[_VerdictKey, str | None] = OrderedDict()


def _judged(
    operator: netpolicy.AddressPolicy,
    policy: EgressPolicy,
    protocol: Protocol,
    host: str,
    address: IPAddress,
) -> str | None:
    """:func:`~sundial.core.egress.judge`, remembered: a verdict is a pure function of
    the operator's settings (the key holds the settings object itself: equal only to
    one of the same class and switches), the policy's rules (named by their
    fingerprint, a SHA-256 of the canonical rules), the protocol, the host and the
    address, so it is the same at every call. Judging one address walked the deny list
    and the policy's networks in Python (about 7 us) at every call to an IP-literal
    target and at every new connection to a named one."""
    key = (operator, policy.fingerprint, protocol, host, address)
    try:
        return _verdicts[key]
    except KeyError:
        pass
    reason = _verdicts[key] = judge(operator, policy, protocol, host, address)
    if len(_verdicts) > _MAX_MEMO:
        _verdicts.popitem(last=False)
    return reason


def split_host_port(address: str) -> tuple[str, int]:
    """Split ``host:port`` (IPv6 in brackets) into host and port.

    Raises:
        TargetRefused: ``address`` is not host:port (see
            :func:`sundial.core.netpolicy.parse_address`).
    """
    try:
        endpoint = netpolicy.parse_address(address)
    except netpolicy.AddressError as exc:
        raise TargetRefused(f"bad target address {address!r}: {exc.problem}") from None
    return endpoint.host, endpoint.port


@dataclass(frozen=True, slots=True)
class CallRules:
    """What the connections of one call may reach: the operator's deny list, and the
    tenant's egress policy for the target's protocol."""

    operator: netpolicy.AddressPolicy
    policy: EgressPolicy
    protocol: Protocol
    tenant_id: str | None = None
    """Whose call it is: its lookups count against that tenant's bound alone."""

    def check(self, host: str, address: IPAddress) -> None:
        """Raise :class:`TargetForbidden` if a target named ``host`` may not connect to
        ``address``."""
        reason = _judged(self.operator, self.policy, self.protocol, host, address)
        if reason is not None:
            shown = str(address) if str(address) == host.strip("[]") else f"{host} ({address})"
            raise TargetForbidden(f"{shown} is {reason}")

    async def resolve(self, host: str, port: int) -> list[str]:
        """Resolve ``host`` and check every address it resolves to.

        Returns:
            The allowed addresses as strings, in resolver order (at least one).

        Raises:
            TargetForbidden: Any resolved address is forbidden.
            OSError: The name does not resolve now (a connection error: retryable).
        """
        addresses = await netpolicy.resolve(
            host,
            port,
            timeout_s=RESOLVE_TIMEOUT_S,
            resolver=self.operator.resolver,
            tenant=self.tenant_id,
        )
        for address in addresses:
            self.check(host, address)
        return [str(address) for address in addresses]


class AddressPolicy(netpolicy.AddressPolicy):
    """The operator's SSRF settings of one executor, and the rules of each call."""

    @functools.cached_property
    def _rules(self) -> OrderedDict[tuple[int, Protocol, str | None], CallRules]:
        return OrderedDict()

    @functools.cached_property
    def _defaults(self) -> dict[Protocol, CallRules]:
        policy = default_policy(self)
        return {protocol: CallRules(self, policy, protocol) for protocol in Protocol}

    def rules(
        self, egress: EgressPolicy | None, protocol: Protocol, tenant: str | None = None
    ) -> CallRules:
        """The rules of a call by ``tenant`` to a ``protocol`` target under the grant's
        ``egress`` policy (None: the operator's default)."""
        if egress is None and tenant is None:
            return self._defaults[protocol]
        # One rules object per (policy, protocol, tenant): a call made one per run.
        key = (egress.fingerprint if egress is not None else 0, protocol, tenant)
        found = self._rules.get(key)
        if found is None:
            policy = egress if egress is not None else self._defaults[protocol].policy
            found = self._rules[key] = CallRules(self, policy, protocol, tenant)
            if len(self._rules) > _MAX_MEMO:
                self._rules.popitem(last=False)
        return found

    def check(self, address: IPAddress) -> None:
        """Raise :class:`TargetForbidden` if ``address`` may not be called under the
        operator's default policy."""
        self.rules(None, Protocol.HTTP).check(str(address), address)

    async def resolve(self, host: str, port: int) -> list[str]:
        """:meth:`CallRules.resolve` under the operator's default policy."""
        return await self.rules(None, Protocol.HTTP).resolve(host, port)
