"""Store methods for a job's SLO: counts read from its runs and misfire records."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta

import asyncpg

from sundial.api.model import MisfireRecord, SloRunCounts, SloUnsure
from sundial.api.store._base import queries, translate


class SloStore:
    """The reads behind DescribeJob's SLO (docs/design.md section 11)."""

    _pool: asyncpg.Pool

    @translate
    async def slo_inputs(
        self,
        tenant_id: str,
        job_id: uuid.UUID,
        starts: Sequence[datetime],
        now: datetime,
        *,
        threshold: timedelta,
        jitter: timedelta,
    ) -> tuple[list[SloRunCounts], list[SloUnsure], list[MisfireRecord]]:
        """Per window start: the counts the SQL decides; the runs whose answer needs their
        own jitter (only with a jitter); the misfire records meeting the longest window.
        One snapshot."""
        earliest = min(starts)
        async with (
            self._pool.acquire() as conn,
            conn.transaction(isolation="repeatable_read", readonly=True),
        ):
            rows = await conn.fetch(
                queries.slo_run_counts,
                job_id,
                tenant_id,
                list(starts),
                now,
                threshold,
                jitter,
                earliest,
            )
            misfires = [
                MisfireRecord(r["first_at"], r["last_at"], r["skipped"])
                for r in await conn.fetch(queries.slo_misfires, job_id, earliest, now)
            ]
        unsure = [
            SloUnsure(at, started, throttled)
            for r in rows
            for at, started, throttled in zip(
                r["unsure_at"], r["unsure_started"], r["unsure_throttled"], strict=True
            )
        ]
        counts = [
            SloRunCounts(
                runs=r["runs"],
                on_time=r["on_time"],
                late=r["late"],
                skipped=r["skipped"],
                failed=r["failed"],
                throttled=r["throttled"],
            )
            for r in rows
        ]
        return counts, unsure, misfires
