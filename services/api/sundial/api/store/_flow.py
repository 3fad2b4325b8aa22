"""Store methods for flow limits (migration 0019, docs/design.md section 7 "Flow control")."""

from __future__ import annotations

from datetime import datetime

import asyncpg

from sundial.api.model import FlowLimitSpec, StoredFlowLimit
from sundial.api.store._base import Row, one, queries, translate
from sundial.core.errors import Aborted, ResourceExhausted


def flow_limit_from_row(row: Row, now: datetime) -> StoredFlowLimit:
    """A limit with its state at ``now``: the bucket refilled since the schedulers last
    took from it (at most its size), a Retry-After only while it lasts."""
    rate, burst = row["rate_per_s"], row["burst"]
    available = 0.0
    if rate:
        elapsed = max((now - row["refilled_at"]).total_seconds(), 0.0)
        available = max(0.0, min(float(burst), row["tokens"] + rate * elapsed))
    blocked = row["blocked_until"]
    return StoredFlowLimit(
        spec=FlowLimitSpec(
            key=row["key"], rate_per_second=rate, burst=burst, max_running=row["max_running"]
        ),
        waiting_runs=row["waiting_runs"],
        running_runs=row["running_runs"],
        available_tokens=available,
        blocked_until=blocked if blocked is not None and blocked > now else None,
        create_time=row["created_at"],
        update_time=row["updated_at"],
    )


class FlowStore:
    """A tenant's flow limits: set (under the tenant's quota), list, delete."""

    _pool: asyncpg.Pool

    @translate
    async def set_flow_limit(
        self, tenant_id: str, spec: FlowLimitSpec, now: datetime, *, limit: int
    ) -> StoredFlowLimit:
        """Create or replace the key's limits, and read them back with their state.

        Raises:
            ResourceExhausted: The key is new and the tenant has ``limit`` keys already.
            Aborted: A DeleteFlowLimit of the key came between the write and the read
                (retrying sets it again).
        """
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(queries.lock_tenant_row, tenant_id)
            counted = one(await conn.fetchrow(queries.count_flow_limits, tenant_id, spec.key))
            if not counted["known"] and counted["limits"] >= limit:
                raise ResourceExhausted(
                    f"the tenant's limit of {limit} flow limits is reached: delete one first",
                    metadata={
                        "quota": "max_flow_limits",
                        "limit": str(limit),
                        "usage": str(counted["limits"]),
                    },
                )
            await conn.execute(
                queries.set_flow_limit,
                tenant_id,
                spec.key,
                spec.rate_per_second,
                spec.burst,
                spec.max_running,
                now,
            )
        # Its state read after the commit: the tenant's row (which job creates update)
        # stays locked only for the write.
        row = await self._pool.fetchrow(queries.get_flow_limit, tenant_id, spec.key)
        if row is None:
            raise Aborted(f"the flow limit of {spec.key!r} was deleted meanwhile; retry")
        return flow_limit_from_row(row, now)

    @translate
    async def list_flow_limits(
        self, tenant_id: str, now: datetime, *, after: str, limit: int
    ) -> list[StoredFlowLimit]:
        """Up to ``limit`` of the tenant's limits by key (byte order) after ``after``."""
        rows = await self._pool.fetch(queries.list_flow_limits, tenant_id, after, limit)
        return [flow_limit_from_row(row, now) for row in rows]

    @translate
    async def delete_flow_limit(self, tenant_id: str, key: str) -> bool:
        """Whether the key had a limit (now gone)."""
        return await self._pool.fetchval(queries.delete_flow_limit, tenant_id, key) is not None
