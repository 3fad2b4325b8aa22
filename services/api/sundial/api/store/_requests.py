"""Store methods for idempotency records (job_requests): read one, claim one with the
work, record an outcome."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

import asyncpg

from sundial.api.store._base import (
    Conn,
    RequestClaim,
    RequestRecord,
    RequestTaken,
    queries,
    translate,
)
from sundial.api.store._params import ClaimRequest


class RequestStore:
    """Idempotency records, shared by the job and run writes that take a request id."""

    _pool: asyncpg.Pool

    @translate
    async def find_request(
        self, tenant_id: str, method: str, request_id: str, since: datetime
    ) -> RequestRecord | None:
        """The live idempotency record of this key (created at or after ``since``)."""
        row = await self._pool.fetchrow(queries.find_request, tenant_id, method, request_id, since)
        if row is None:
            return None
        return RequestRecord(
            request_hash=bytes(row["request_hash"]),
            job_id=row["job_id"],
            job_ids=tuple(row["job_ids"] or ()),
            scheduled_at=row["scheduled_at"],
            outcome=row["outcome"],
        )

    async def _claim(
        self,
        conn: Conn,
        tenant_id: str,
        claim: RequestClaim,
        now: datetime,
        *,
        job_id: uuid.UUID | None = None,
        job_ids: Sequence[uuid.UUID] | None = None,
    ) -> None:
        params = ClaimRequest(
            tenant_id=tenant_id,
            method=claim.method,
            request_id=claim.request_id,
            request_hash=claim.request_hash,
            job_id=job_id,
            job_ids=None if job_ids is None else list(job_ids),
            scheduled_at=None,
            now=now,
            expired_before=claim.expired_before,
            outcome=claim.outcome,
        )
        claimed = await conn.fetchval(*queries.bind("claim_request", params))
        if not claimed:
            raise RequestTaken

    @translate
    async def record_request(
        self, tenant_id: str, claim: RequestClaim, job_id: uuid.UUID, now: datetime
    ) -> None:
        """Record ``claim`` for a call that wrote nothing else (an UNCHANGED apply).

        Raises:
            RequestTaken: The key already has a live record.
        """
        async with self._pool.acquire() as conn:
            await self._claim(conn, tenant_id, claim, now, job_id=job_id)
