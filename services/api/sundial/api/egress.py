"""Tenants' egress policies: stored per tenant, the operator's default otherwise.

AdminService sets and reads them, JobService shows the caller's read-only, and every job
write checks its target against the policy in force at that moment
(:class:`sundial.api.validation.TargetGuard`). The executor gets the same policy with
each lease grant, so a change applies to the next attempt of every existing job
(docs/design.md section 7).
"""

from __future__ import annotations

from sundial.api import validation
from sundial.api.model import StoredEgress, TenantEgress
from sundial.api.store import Store
from sundial.core.clock import Clock
from sundial.core.egress import EgressPolicy, default_policy
from sundial.core.errors import NotFound
from sundial.core.netpolicy import AddressPolicy


class EgressPolicies:
    """Reads and writes tenants' egress policies.

    Args:
        store: Database access.
        operator: The operator's deny list and default policy.
        clock: The source of "now".
    """

    def __init__(self, store: Store, operator: AddressPolicy, clock: Clock) -> None:
        self._store = store
        self._operator = operator
        self._default = default_policy(operator)
        self._clock = clock

    async def policy(self, tenant_id: str) -> EgressPolicy:
        """The policy in force for ``tenant_id`` (the default for an unknown tenant)."""
        stored = await self._store.egress_policy(tenant_id)
        if stored is None or stored.policy is None:
            return self._default
        return stored.policy

    async def effective(self, tenant_id: str) -> TenantEgress:
        """The policy in force for ``tenant_id``, and where it comes from.

        Raises:
            InvalidArgument: Not a tenant id.
            NotFound: No such tenant.
        """
        validation.check_tenant_ref(tenant_id, "tenant_id")
        return self._view(tenant_id, await self._store.egress_policy(tenant_id))

    async def set(self, tenant_id: str, policy: EgressPolicy | None) -> TenantEgress:
        """Give ``tenant_id`` its own ``policy`` (None: back to the default).

        Raises:
            InvalidArgument: Not a tenant id.
            NotFound: No such tenant.
        """
        validation.check_tenant_ref(tenant_id, "tenant_id")
        stored = await self._store.set_egress_policy(tenant_id, policy, self._clock.now())
        return self._view(tenant_id, stored)

    def _view(self, tenant_id: str, stored: StoredEgress | None) -> TenantEgress:
        if stored is None:
            raise NotFound(f"tenant {tenant_id!r} not found")
        own = stored.policy
        return TenantEgress(
            policy=own if own is not None else self._default,
            tenant_specific=own is not None,
            loopback_allowed=self._operator.allow_loopback,
            update_time=stored.update_time,
        )
