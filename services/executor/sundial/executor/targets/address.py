"""Which network addresses a target may be called at (SSRF rules, checked at call time).

The API checks a target's host when a job is created; DNS can change afterwards (or be
made to: DNS rebinding), so the executor resolves the host again at every new
connection and refuses it when ANY resolved address is forbidden. The HTTP client then
connects to the address that was checked (see :mod:`sundial.executor.targets.http`), so
there is no window between check and connect.

Parsing, resolution and the rules are :mod:`sundial.core.netpolicy`'s, the same the API
applies when a job is written (``allow_loopback_targets``, ``allow_private_targets``);
this module only maps their verdicts onto the executor's outcomes: a refused or
malformed address is final (:class:`TargetRefused`), a failed lookup is an
:class:`OSError` like any connection error (retryable).
"""

from __future__ import annotations

from sundial.core import netpolicy
from sundial.core.netpolicy import IPAddress

__all__ = ["RESOLVE_TIMEOUT_S", "AddressPolicy", "TargetRefused", "split_host_port"]

RESOLVE_TIMEOUT_S = 10.0
"""Bound on one name lookup: the connect timeout of HTTP calls, so a hung resolver fails
the attempt as a connection error instead of holding it until the run timeout."""


class TargetRefused(Exception):
    """The executor refuses to call this address (a final failure, ERROR_CLASS_REFUSED)."""


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


class AddressPolicy(netpolicy.AddressPolicy):
    """The SSRF rules of one executor, with the call-time resolution that applies them."""

    def check(self, address: IPAddress) -> None:
        """Raise :class:`TargetRefused` if ``address`` may not be called."""
        reason = self.refusal(address)
        if reason is not None:
            raise TargetRefused(f"{address} is {reason}")

    async def resolve(self, host: str, port: int) -> list[str]:
        """Resolve ``host`` and check every address it resolves to.

        Returns:
            The allowed addresses as strings, in resolver order (at least one).

        Raises:
            TargetRefused: Any resolved address is forbidden.
            OSError: The name does not resolve now (a connection error: retryable).
        """
        addresses = await netpolicy.resolve(host, port, timeout_s=RESOLVE_TIMEOUT_S)
        refusal = self.first_refusal(addresses)
        if refusal is not None:
            raise TargetRefused(f"{refusal.address} is {refusal.reason}")
        return [str(address) for address in addresses]
