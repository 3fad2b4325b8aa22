"""The scheduler's only door to PostgreSQL.

:meth:`SchedulerStore.transaction` opens a :class:`~sundial.scheduler.store._tx.Transaction`
whose steps lock rows and return typed states, and write what the caller decided;
the one-statement operations outside a caller's transaction are methods here.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, date, datetime, time, timedelta

import asyncpg

from sundial.core.db import drop_run_partitions_before, ensure_run_partitions, translate_db_errors
from sundial.core.errors import SundialError
from sundial.core.sealing import Sealed
from sundial.run import RunRef
from sundial.scheduler.model import DeadLetterRun, PublishBatch
from sundial.scheduler.store._queries import queries
from sundial.scheduler.store._rows import dead_letter_run, ref_of, unzip
from sundial.scheduler.store._tx import EARLIEST, Transaction

TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    SundialError,
    OSError,
    asyncpg.InterfaceError,  # e.g. the connection was closed under us (server restart)
    asyncpg.PostgresError,  # untranslated server errors: logged, the next pass retries
)
"""What a background loop logs and retries on its next pass instead of crashing."""

HeldRun = tuple[RunRef, int]
"""A run with one of its attempts."""

HeldLease = tuple[RunRef, int, str]
"""A run an executor holds: the attempt and the lease id it holds it under."""


class SchedulerStore:
    """Transactions of the dispatcher, the sweeper, the ledger and maintenance.

    Args:
        pool: The service's connection pool.
    """

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    @contextlib.asynccontextmanager
    async def transaction(self, *, durable: bool = False) -> AsyncIterator[Transaction]:
        """One connection in one transaction: committed when the block ends, rolled
        back when it raises.

        Args:
            durable: Commit synchronously (``synchronous_commit`` at least ``on`` for this
                transaction), so an acknowledged commit survives a crash of the server
                even where it runs with ``synchronous_commit=off``. For the writes that
                hand out or end an attempt: a lost grant would hand the same attempt out
                again, a lost outcome would run a finished run again (docs/design.md
                section 10).
        """
        async with translate_db_errors(), self._pool.acquire() as conn, conn.transaction():
            if durable:
                await conn.execute(queries.durable_commit)
            yield Transaction(conn)

    @translate_db_errors()
    async def confirm_published(
        self, batches: Sequence[PublishBatch], recheck_at: datetime
    ) -> None:
        """Record that JetStream acknowledged ``batches``: their runs, while unleased, are
        looked at again at ``recheck_at`` (one row per batch, see 0006_dispatch_acks)."""
        if batches:
            seqs = sorted({batch.dispatch_seq for batch in batches})
            await self._pool.execute(queries.confirm_published, seqs, recheck_at)

    @translate_db_errors()
    async def purge_dispatch_acks(self, now: datetime, limit: int) -> None:
        """Delete up to ``limit`` acks whose recheck passed."""
        await self._pool.execute(queries.purge_dispatch_acks, now, limit)

    @translate_db_errors()
    async def next_due_at(
        self, partitions: Sequence[int], *, after: datetime = EARLIEST
    ) -> datetime | None:
        """When the next job of ``partitions`` due after ``after`` comes due (None: none
        scheduled)."""
        if not partitions:
            return None
        due: datetime | None = await self._pool.fetchval(
            queries.next_due_at, list(partitions), after
        )
        return due

    @translate_db_errors()
    async def waiting_runs(self, tenants: Sequence[str], limit: int) -> int:
        """How many runs of ``tenants`` wait for admission, counted up to ``limit``."""
        if not tenants:
            return 0
        count: int = await self._pool.fetchval(queries.waiting_runs, list(tenants), limit)
        return count

    @translate_db_errors()
    async def republish_queued(self, partitions: Sequence[int], now: datetime) -> int:
        """Make the published, unleased runs of ``partitions`` due for republishing at
        ``now`` (their messages went with a lost stream); returns how many."""
        if not partitions:
            return 0
        count: int = await self._pool.fetchval(queries.republish_queued, list(partitions), now)
        return count

    @translate_db_errors()
    async def extend_leases(
        self, held: Sequence[HeldLease], executor_id: str, lease_until: datetime, now: datetime
    ) -> dict[HeldLease, bool]:
        """Extend the leases of ``held`` still RUNNING under that lease of ``executor_id``.

        Returns:
            ``cancel_requested`` of each extended run, by (run, attempt, lease id).
        """
        if not held:
            return {}
        job_ids, times = unzip(ref for ref, _, _ in held)
        rows = await self._pool.fetch(
            queries.extend_leases,
            job_ids,
            times,
            [attempt for _, attempt, _ in held],
            [lease_id for _, _, lease_id in held],
            executor_id,
            lease_until,
            now,
        )
        return {(ref_of(r), r["attempt"], r["lease_id"]): r["cancel_requested"] for r in rows}

    @translate_db_errors()
    async def sealed_secrets(
        self, wanted: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], Sealed]:
        """The sealed values of the (tenant, name) pairs that exist."""
        if not wanted:
            return {}
        rows = await self._pool.fetch(
            queries.sealed_secrets, [t for t, _ in wanted], [n for _, n in wanted]
        )
        return {
            (r["tenant_id"], r["name"]): Sealed(
                r["kek_id"], r["wrapped_key"], r["nonce"], r["ciphertext"]
            )
            for r in rows
        }

    @translate_db_errors()
    async def signing_identity_key(self, now: datetime) -> tuple[str, Sealed] | None:
        """The id and sealed private half of the identity key that signs at ``now``."""
        row = await self._pool.fetchrow(queries.signing_identity_key, now)
        if row is None:
            return None
        return row["kid"], Sealed(
            row["kek_id"], row["wrapped_key"], row["nonce"], row["ciphertext"]
        )

    @translate_db_errors()
    async def cancel_requested(self, held: Sequence[HeldLease]) -> set[HeldLease]:
        """The held leases still RUNNING whose cancellation was requested."""
        if not held:
            return set()
        job_ids, times = unzip(ref for ref, _, _ in held)
        rows = await self._pool.fetch(
            queries.cancel_requested,
            job_ids,
            times,
            [attempt for _, attempt, _ in held],
            [lease_id for _, _, lease_id in held],
        )
        return {(ref_of(r), r["attempt"], r["lease_id"]) for r in rows}

    @translate_db_errors()
    async def dead_letters_of(self, refs: Sequence[RunRef]) -> list[DeadLetterRun]:
        """Of ``refs``, the dead runs whose DeadLetter is unacknowledged, with its content."""
        if not refs:
            return []
        job_ids, times = unzip(refs)
        rows = await self._pool.fetch(queries.dead_letters_of, job_ids, times)
        return [dead_letter_run(r) for r in rows]

    @translate_db_errors()
    async def clear_dead_letters(self, acked: Sequence[HeldRun]) -> None:
        """JetStream acknowledged the DeadLetter of these runs at these attempts."""
        if acked:
            job_ids, times = unzip(ref for ref, _ in acked)
            await self._pool.execute(
                queries.clear_dead_letters, job_ids, times, [attempt for _, attempt in acked]
            )

    @translate_db_errors()
    async def maintain_partitions(
        self, today: date, ahead_days: int, retention_days: int
    ) -> tuple[list[str], list[str]]:
        """Create daily partitions through ``today + ahead_days``; drop those older
        than ``retention_days``. Returns (created, dropped) names."""
        created = await ensure_run_partitions(self._pool, today, today + timedelta(days=ahead_days))
        horizon = today - timedelta(days=retention_days)
        dropped = await drop_run_partitions_before(self._pool, horizon)
        # The skipped misfires' times (migration 0016) go with the runs of their age.
        cutoff = datetime.combine(horizon, time(), UTC)
        while await self._pool.fetchval(queries.purge_misfires, cutoff, 5000) == 5000:
            pass
        return created, dropped


__all__ = ["TRANSIENT_ERRORS", "HeldRun", "SchedulerStore"]
