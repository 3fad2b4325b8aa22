"""A tenant's flow limits: SetFlowLimit, ListFlowLimits, DeleteFlowLimit (flow.proto;
docs/design.md section 7, "Flow control").

The API writes the limits and shows how each key stands; the schedulers and the ledger
enforce them (admission with the rate limit's token bucket, the concurrency limit at
lease), reading the same ``flow_limits`` rows. A limit changed here applies from their
next admission or lease: no cache to expire.
"""

from __future__ import annotations

from sundial.api import validation
from sundial.api.kit import Pager
from sundial.api.kit.paging import Text
from sundial.api.model import FlowLimitSpec, Page, StoredFlowLimit
from sundial.api.store import Store
from sundial.core.clock import Clock
from sundial.core.errors import NotFound

__all__ = ["FlowLimits"]

_LIMITS = Pager("flow_limits", (Text(validation.MAX_FLOW_KEY),))


class FlowLimits:
    """Sets, lists and deletes a tenant's limits per key.

    Args:
        store: Database access.
        clock: The source of "now" (a new bucket's refill time, the tokens shown).
        max_limits: Keys with a limit per tenant (``SUNDIAL_MAX_FLOW_LIMITS``).
    """

    def __init__(self, store: Store, clock: Clock, *, max_limits: int) -> None:
        self._store = store
        self._clock = clock
        self._max_limits = max_limits

    async def set(self, tenant_id: str, spec: FlowLimitSpec) -> StoredFlowLimit:
        """Create or replace the key's limits (a refused call writes nothing)."""
        checked = validation.check_flow_limit(spec)
        return await self._store.set_flow_limit(
            tenant_id, checked, self._clock.now(), limit=self._max_limits
        )

    async def list(
        self, tenant_id: str, *, page_size: int, page_token: str
    ) -> Page[StoredFlowLimit]:
        """A page of the tenant's limits by key, each with its state now."""
        cursor = _LIMITS.open(page_size, page_token, {"tenant": tenant_id})
        after = "" if cursor.after is None else cursor.after[0]
        found = await self._store.list_flow_limits(
            tenant_id, self._clock.now(), after=after, limit=cursor.limit
        )
        return cursor.page(found, lambda limit: [limit.spec.key], size_of=_limit_bytes)

    async def delete(self, tenant_id: str, key: str) -> None:
        """Remove the key's limits (NOT_FOUND when it has none)."""
        validation.check_flow_key(key, "key")
        if not await self._store.delete_flow_limit(tenant_id, key):
            raise NotFound(f"no flow limit for key {key!r}")


def _limit_bytes(limit: StoredFlowLimit) -> int:
    """An upper estimate of a limit's size in a list: its key (UTF-8) and the numbers."""
    return 128 + 4 * len(limit.spec.key)
