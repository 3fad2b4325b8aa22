"""Per-tenant slots: at most so many holders per tenant at once, the rest waiting for
their own tenant's, never for another's (name lookups, API calls)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

__all__ = ["TenantSlots"]


@dataclass(slots=True)
class _Tenant:
    semaphore: asyncio.Semaphore
    users: int = 0
    """Holders and waiters."""


class TenantSlots:
    """At most ``per_tenant`` holders of one tenant's slots at once; a tenant is
    remembered only while it holds or waits for one (memory follows the tenants busy
    now, not every tenant seen). For one event loop.

    Args:
        per_tenant: Slots per tenant (at least 1).
    """

    def __init__(self, per_tenant: int) -> None:
        self.per_tenant = per_tenant
        self._tenants: dict[str, _Tenant] = {}

    def users(self, tenant: str) -> int:
        """The tenant's holders and waiters now."""
        entry = self._tenants.get(tenant)
        return 0 if entry is None else entry.users

    @contextlib.asynccontextmanager
    async def slot(self, tenant: str) -> AsyncIterator[None]:
        """Hold one of ``tenant``'s slots while the block runs (waiting for one first)."""
        entry = self._tenants.get(tenant)
        if entry is None:
            entry = self._tenants[tenant] = _Tenant(asyncio.Semaphore(self.per_tenant))
        entry.users += 1
        try:
            async with entry.semaphore:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0:  # idle: forget it (a busy tenant keeps its own)
                del self._tenants[tenant]
