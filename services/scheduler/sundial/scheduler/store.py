"""The scheduler's only door to PostgreSQL: every SQL statement it runs is here.

Each public method is one transaction. Decisions that are not about data access (which
occurrences run, what a lease grant or an outcome means) are made by the caller, passed
in as a function that runs inside the transaction while the rows are locked.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

import asyncpg

from sundial.core.db import (
    Queries,
    drop_run_partitions_before,
    ensure_run_partitions,
    translate_db_errors,
)
from sundial.core.errors import SundialError
from sundial.scheduler.model import (
    BatchPlan,
    ClaimedJob,
    DispatchOutcome,
    PublishBatch,
    RunRef,
)

queries = Queries.from_package("sundial.scheduler")

TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    SundialError,
    OSError,
    asyncpg.InterfaceError,  # e.g. the connection was closed under us (server restart)
    asyncpg.PostgresError,  # untranslated server errors: logged, the next pass retries
)
"""What a background loop logs and retries on its next pass instead of crashing."""

MAX_RUNS_PER_MESSAGE = 500
"""RunDispatch carries 1-500 runs (events.proto)."""

Record = asyncpg.Record
Key = tuple[uuid.UUID, datetime]


@dataclass(frozen=True, slots=True)
class OutcomeWrite:
    """An accepted outcome, as the ledger decided it."""

    job_id: uuid.UUID
    scheduled_at: datetime
    status: str
    check_at: datetime | None
    next_attempt_at: datetime | None
    finished_at: datetime | None
    last_error: str | None
    error_class: str | None
    http_status: int | None = None
    grpc_code: int | None = None


@dataclass(frozen=True, slots=True)
class SweepOutcome:
    """What one sweep pass did."""

    batches: list[PublishBatch]
    cancelled: int
    released: int
    dead_letters: list[Record] = field(default_factory=list)
    """Dead runs whose DeadLetter is due (the outbox, ``claim_dead_letters`` rows): the
    caller publishes each, then :meth:`SchedulerStore.clear_dead_letters`."""


def _chunks(refs: list[RunRef], size: int) -> list[list[RunRef]]:
    return [refs[i : i + size] for i in range(0, len(refs), size)]


def _unzip_refs(refs: Sequence[RunRef]) -> tuple[list[uuid.UUID], list[datetime]]:
    return [r.job_id for r in refs], [r.scheduled_at for r in refs]


class SchedulerStore:
    """Transactions of the dispatcher, the sweeper, the ledger and maintenance.

    Args:
        pool: The service's connection pool.
    """

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    # --- dispatch -------------------------------------------------------------------

    @translate_db_errors()
    async def dispatch(
        self,
        owned: Sequence[int],
        limit: int,
        now: datetime,
        plan: Callable[[list[ClaimedJob], datetime], BatchPlan],
        *,
        confirm_until: datetime,
        needs_live_counts: Callable[[str], bool] = lambda _policies: True,
        quarantine_until: datetime | None = None,
    ) -> DispatchOutcome:
        """Claim up to ``limit`` due jobs of ``owned``, insert their runs, advance them.

        One transaction: the run rows are the outbox. Runs that ``plan`` marks queued and
        already due get a dispatch sequence per partition (and per 500 runs) and
        ``check_at = confirm_until``; the returned batches must be published after this
        returns, then confirmed with :meth:`confirm_published`.

        Args:
            needs_live_counts: Whether a job with this policies document (JSON text)
                needs its unfinished runs counted (its overlap policy looks at them).
            quarantine_until: When jobs ``plan`` could not plan may be claimed again
                (default: ``now`` plus five minutes).
        """
        outcome = DispatchOutcome()
        if not owned:
            return outcome
        async with self._pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(queries.claim_due_jobs, list(owned), limit, now, limit)
            if not rows:
                return outcome
            ids = [r["job_id"] for r in rows]
            # After the lock (see job_definitions_of): never an old definition with a
            # new jobs row.
            definitions = {
                d["job_id"]: d for d in await conn.fetch(queries.job_definitions_of, ids)
            }
            counted = [
                job_id
                for job_id in ids
                if job_id in definitions and needs_live_counts(definitions[job_id]["policies"])
            ]
            live = (
                {r["job_id"]: r for r in await conn.fetch(queries.live_run_counts, counted)}
                if counted
                else {}
            )
            claimed = []
            for r in rows:
                definition = definitions.get(r["job_id"])
                counts = live.get(r["job_id"])
                claimed.append(
                    ClaimedJob(
                        job_id=r["job_id"],
                        tenant_id=r["tenant_id"],
                        partition_id=r["partition_id"],
                        next_run_at=r["next_run_at"],
                        fired_count=r["fired_count"],
                        version=r["version"],
                        # A job without a definition row fails planning: quarantined.
                        schedule=definition["schedule"] if definition else "null",
                        policies=definition["policies"] if definition else "null",
                        unfinished=counts["unfinished"] if counts else 0,
                        pending=counts["pending"] if counts else 0,
                    )
                )
            outcome.claimed = len(claimed)
            batch = plan(claimed, now)
            if batch.quarantined:
                await conn.execute(
                    queries.quarantine_jobs,
                    sorted(batch.quarantined),
                    quarantine_until or now + timedelta(minutes=5),
                )
            if batch.cancel_other:
                await conn.fetch(queries.cancel_other_runs, batch.cancel_other, now)

            # One dispatch sequence per (partition, chunk of 500) of runs to publish now.
            publish_now: dict[int, list[RunRef]] = defaultdict(list)
            for run in batch.runs:
                if run.status == "queued" and run.due_at <= now:
                    publish_now[run.partition_id].append(RunRef(run.job_id, run.scheduled_at))
                    if run.lateness_ms is not None:
                        outcome.lateness_ms.append(run.lateness_ms)
            chunks = [
                (partition, chunk)
                for partition, refs in sorted(publish_now.items())
                for chunk in _chunks(refs, MAX_RUNS_PER_MESSAGE)
            ]
            seq_of: dict[Key, int] = {}
            seqs: list[int] = []
            if chunks:
                seqs = [r["seq"] for r in await conn.fetch(queries.next_dispatch_seqs, len(chunks))]
                for (_, chunk), seq in zip(chunks, seqs, strict=True):
                    for ref in chunk:
                        seq_of[(ref.job_id, ref.scheduled_at)] = seq

            if batch.runs:
                cols: list[list[Any]] = [[] for _ in range(9)]
                for run in batch.runs:
                    seq = seq_of.get((run.job_id, run.scheduled_at), 0)
                    if seq:
                        check_at: datetime | None = confirm_until
                    elif run.status == "queued":
                        check_at = run.due_at  # jittered: the sweeper publishes it when due
                    else:
                        check_at = None
                    for col, value in zip(
                        cols,
                        (
                            run.job_id,
                            run.scheduled_at,
                            run.tenant_id,
                            run.partition_id,
                            run.status,
                            seq,
                            check_at,
                            run.lateness_ms,
                            run.skip_reason,
                        ),
                        strict=True,
                    ):
                        col.append(value)
                inserted = await conn.fetch(queries.insert_runs, *cols, now)
                outcome.inserted = len(inserted)
                published: dict[int, list[RunRef]] = defaultdict(list)
                for row in inserted:
                    if row["dispatch_seq"]:
                        published[row["dispatch_seq"]].append(
                            RunRef(row["job_id"], row["scheduled_at"])
                        )
                for (partition, chunk), seq in zip(chunks, seqs, strict=True):
                    wanted = {(r.job_id, r.scheduled_at) for r in chunk}
                    runs = tuple(
                        r for r in published.get(seq, []) if (r.job_id, r.scheduled_at) in wanted
                    )
                    if runs:
                        outcome.batches.append(PublishBatch(partition, seq, runs))

            if batch.advances:
                # Key order, as the ledger's stats upsert: concurrent upserts never deadlock.
                batch.advances.sort(key=lambda a: a.job_id)
                advances = batch.advances
                await conn.execute(
                    queries.advance_jobs,
                    [a.job_id for a in advances],
                    [a.next_run_at for a in advances],
                    [a.fired for a in advances],
                    [a.last_fire_at for a in advances],
                    [a.lateness_ms for a in advances],
                    [a.missed for a in advances],
                    [a.skipped for a in advances],
                    now,
                )
        return outcome

    @translate_db_errors()
    async def confirm_published(
        self, batches: Sequence[PublishBatch], recheck_at: datetime
    ) -> None:
        """Record that JetStream acknowledged ``batches``: look again at ``recheck_at``."""
        job_ids: list[uuid.UUID] = []
        times: list[datetime] = []
        seqs: list[int] = []
        for batch in batches:
            for ref in batch.runs:
                job_ids.append(ref.job_id)
                times.append(ref.scheduled_at)
                seqs.append(batch.dispatch_seq)
        if job_ids:
            await self._pool.execute(queries.confirm_published, job_ids, times, seqs, recheck_at)

    # --- sweeps ---------------------------------------------------------------------

    @translate_db_errors()
    async def sweep(
        self,
        owned: Sequence[int],
        limit: int,
        now: datetime,
        *,
        confirm_until: datetime,
        default_max_attempts: int = 5,
    ) -> SweepOutcome:
        """Act on runs of ``owned`` whose ``check_at`` passed, and release buffered runs.

        Transitions (all in one transaction, rows locked with SKIP LOCKED):

        - ``queued`` (publish unconfirmed, message never leased, jitter or release due)
          and ``retrying`` (retry due): published again under a new dispatch sequence.
        - ``running`` with an expired lease: ``queued`` and republished (the next grant
          increments the attempt), or ``cancelled`` when a cancel was requested, or
          ``dead`` when that attempt was the last of the job's retry policy (an expired
          lease counts as a failed attempt, ERROR_CLASS_LEASE_EXPIRED).

        Buffered (``pending``) runs whose blocker ended are released first, so they are
        published by the next pass. Last, the due dead letters are claimed (the outbox: a
        dead run keeps ``check_at`` until its DeadLetter is acknowledged), including the
        runs that died in this pass.
        """
        if not owned:
            return SweepOutcome([], 0, 0)
        async with self._pool.acquire() as conn, conn.transaction():
            released = await conn.fetch(queries.release_pending, list(owned), limit, now)
            rows = await conn.fetch(queries.lock_due_checks, list(owned), limit, now)
            outcome = await self._sweep_checks(conn, rows, now, confirm_until, default_max_attempts)
            # Last, so runs that died in this pass are in it.
            letters = await conn.fetch(
                queries.claim_dead_letters, list(owned), limit, now, confirm_until
            )
            return SweepOutcome(outcome.batches, outcome.cancelled, len(released), list(letters))

    async def _sweep_checks(
        self,
        conn: asyncpg.Connection,
        rows: list[Record],
        now: datetime,
        confirm_until: datetime,
        default_max_attempts: int,
    ) -> SweepOutcome:
        """The transitions of :meth:`sweep` for the locked due rows."""
        if not rows:
            return SweepOutcome([], 0, 0)
        to_publish: dict[int, list[RunRef]] = defaultdict(list)
        cancelled: list[Record] = []
        dead: list[Record] = []
        for row in rows:
            if row["status"] == "running" and row["cancel_requested"]:
                cancelled.append(row)
            elif row["status"] == "running" and row["failures"] >= (
                row["max_attempts"] or default_max_attempts
            ):
                dead.append(row)
            else:
                to_publish[row["partition_id"]].append(RunRef(row["job_id"], row["scheduled_at"]))
        chunks = [
            (partition, chunk)
            for partition, refs in sorted(to_publish.items())
            for chunk in _chunks(refs, MAX_RUNS_PER_MESSAGE)
        ]
        seqs = (
            [r["seq"] for r in await conn.fetch(queries.next_dispatch_seqs, len(chunks))]
            if chunks
            else []
        )
        status_of = {(r["job_id"], r["scheduled_at"]): r["status"] for r in rows}
        cols: list[list[Any]] = [[] for _ in range(8)]

        def add(*values: Any) -> None:
            for col, value in zip(cols, values, strict=True):
                col.append(value)

        for (_, chunk), seq in zip(chunks, seqs, strict=True):
            for ref in chunk:
                expired = status_of[(ref.job_id, ref.scheduled_at)] == "running"
                add(
                    ref.job_id,
                    ref.scheduled_at,
                    "queued",
                    seq,
                    confirm_until,
                    None,
                    "lease_expired" if expired else None,
                    "lease expired: the executor stopped heartbeating" if expired else None,
                )
        for row in cancelled:
            add(
                row["job_id"],
                row["scheduled_at"],
                "cancelled",
                0,
                None,
                now,
                "cancelled",
                "cancelled; the lease expired before the executor confirmed",
            )
        for row in dead:
            add(
                row["job_id"],
                row["scheduled_at"],
                "dead",
                0,
                now,  # the dead-letter outbox entry, claimed below in this pass
                now,
                "lease_expired",
                "lease expired on the last attempt: the executor stopped heartbeating",
            )
        await conn.fetch(queries.apply_checks, *cols, now)
        ended = [(r, True) for r in dead] + [(r, False) for r in cancelled]
        if ended:
            ended.sort(key=lambda item: item[0]["job_id"])
            await conn.execute(
                queries.record_completion_stats,
                [r["job_id"] for r, _ in ended],
                [0] * len(ended),
                [int(is_dead) for _, is_dead in ended],
                [int(not is_dead) for _, is_dead in ended],
                [None] * len(ended),
                [now if is_dead else None for _, is_dead in ended],
                now,
            )
        batches = [
            PublishBatch(partition, seq, tuple(chunk))
            for (partition, chunk), seq in zip(chunks, seqs, strict=True)
        ]
        return SweepOutcome(batches, len(cancelled), 0)

    @translate_db_errors()
    async def dead_letters_of(self, refs: Sequence[RunRef]) -> list[Record]:
        """Of ``refs``, the dead runs whose DeadLetter is unacknowledged, with its content
        (the rows ``claim_dead_letters`` returns)."""
        if not refs:
            return []
        job_ids, times = _unzip_refs(refs)
        return list(await self._pool.fetch(queries.dead_letters_of, job_ids, times))

    @translate_db_errors()
    async def clear_dead_letters(self, acked: Sequence[tuple[uuid.UUID, datetime, int]]) -> None:
        """JetStream acknowledged the DeadLetter of these (job_id, scheduled_at, attempt)."""
        if acked:
            await self._pool.execute(
                queries.clear_dead_letters,
                [a[0] for a in acked],
                [a[1] for a in acked],
                [a[2] for a in acked],
            )

    # --- ledger ---------------------------------------------------------------------

    @translate_db_errors()
    async def lease_runs(
        self,
        refs: Sequence[RunRef],
        executor_id: str,
        lease_until: datetime,
        now: datetime,
        decide: Callable[[dict[Key, Record], dict[str, int]], tuple[list[Key], list[Key]]],
    ) -> tuple[dict[Key, Record], dict[Key, int]]:
        """Grant leases on ``refs`` to ``executor_id`` in one transaction.

        The tenants involved are locked first (an advisory lock each, in sorted order),
        then the runs; ``decide(rows, running_per_tenant)`` returns the keys to grant (a
        new attempt each) and the keys to grant again (runs ``executor_id`` already
        holds: the same attempt, the lease extended to ``lease_until``).

        Returns:
            The locked rows by key (missing runs are absent) and the attempt of each
            granted or re-granted run.
        """
        job_ids, times = _unzip_refs(refs)
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.fetch(queries.lock_tenants, job_ids, times)
            rows = await conn.fetch(queries.lock_runs, job_ids, times)
            by_key = {(r["job_id"], r["scheduled_at"]): r for r in rows}
            tenants = sorted({r["tenant_id"] for r in rows})
            running = {
                r["tenant_id"]: r["running"]
                for r in await conn.fetch(queries.count_running, tenants)
            }
            grants, regrants = decide(by_key, running)
            attempts: dict[Key, int] = {}
            if regrants:
                renewed = await conn.fetch(
                    queries.extend_leases,
                    [k[0] for k in regrants],
                    [k[1] for k in regrants],
                    [by_key[k]["attempt"] for k in regrants],
                    executor_id,
                    lease_until,
                    now,
                )
                attempts = {(r["job_id"], r["scheduled_at"]): r["attempt"] for r in renewed}
            if grants:
                granted = await conn.fetch(
                    queries.grant_runs,
                    [k[0] for k in grants],
                    [k[1] for k in grants],
                    executor_id,
                    lease_until,
                    now,
                )
                attempts.update({(r["job_id"], r["scheduled_at"]): r["attempt"] for r in granted})
            return by_key, attempts

    @translate_db_errors()
    async def extend_leases(
        self,
        held: Sequence[tuple[RunRef, int]],
        executor_id: str,
        lease_until: datetime,
        now: datetime,
    ) -> dict[tuple[uuid.UUID, datetime, int], bool]:
        """Extend the leases of ``held`` (run, attempt) still RUNNING at that attempt.

        Returns:
            ``(job_id, scheduled_at, attempt) -> cancel_requested`` for each extended run.
        """
        if not held:
            return {}
        rows = await self._pool.fetch(
            queries.extend_leases,
            [ref.job_id for ref, _ in held],
            [ref.scheduled_at for ref, _ in held],
            [attempt for _, attempt in held],
            executor_id,
            lease_until,
            now,
        )
        return {(r["job_id"], r["scheduled_at"], r["attempt"]): r["cancel_requested"] for r in rows}

    @translate_db_errors()
    async def cancel_requested(
        self, held: Sequence[tuple[RunRef, int]]
    ) -> set[tuple[uuid.UUID, datetime, int]]:
        """The held (run, attempt) pairs still RUNNING whose cancellation was requested."""
        if not held:
            return set()
        rows = await self._pool.fetch(
            queries.cancel_requested,
            [ref.job_id for ref, _ in held],
            [ref.scheduled_at for ref, _ in held],
            [attempt for _, attempt in held],
        )
        return {(r["job_id"], r["scheduled_at"], r["attempt"]) for r in rows}

    @translate_db_errors()
    async def complete_runs(
        self,
        refs: Sequence[RunRef],
        now: datetime,
        decide: Callable[[dict[Key, Record]], list[OutcomeWrite]],
    ) -> dict[Key, Record]:
        """Record outcomes in one transaction, fenced under the rows' locks.

        ``decide(rows)`` returns the accepted writes; the job stats and the release of
        buffered runs of jobs whose run ended are written in the same transaction.

        Returns:
            The rows as locked (before the writes), by key.
        """
        job_ids, times = _unzip_refs(refs)
        async with self._pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(queries.lock_runs_for_completion, job_ids, times)
            by_key = {(r["job_id"], r["scheduled_at"]): r for r in rows}
            writes = decide(by_key)
            if not writes:
                return by_key
            await conn.execute(
                queries.record_outcomes,
                [w.job_id for w in writes],
                [w.scheduled_at for w in writes],
                [w.status for w in writes],
                [w.check_at for w in writes],
                [w.next_attempt_at for w in writes],
                [w.finished_at for w in writes],
                [w.last_error for w in writes],
                [w.error_class for w in writes],
                [w.http_status for w in writes],
                [w.grpc_code for w in writes],
                now,
            )
            ended = [w for w in writes if w.status in ("succeeded", "dead", "cancelled")]
            if ended:
                await conn.execute(
                    queries.release_pending_of_jobs, sorted({w.job_id for w in ended}), now
                )
                await conn.execute(
                    queries.record_completion_stats,
                    [w.job_id for w in ended],
                    [int(w.status == "succeeded") for w in ended],
                    [int(w.status == "dead") for w in ended],
                    [int(w.status == "cancelled") for w in ended],
                    [w.finished_at if w.status == "succeeded" else None for w in ended],
                    [w.finished_at if w.status == "dead" else None for w in ended],
                    now,
                )
            return by_key

    # --- maintenance ----------------------------------------------------------------

    @translate_db_errors()
    async def maintain_partitions(
        self, today: date, ahead_days: int, retention_days: int
    ) -> tuple[list[str], list[str]]:
        """Create daily partitions through ``today + ahead_days``; drop those older
        than ``retention_days``. Returns (created, dropped) names."""
        created = await ensure_run_partitions(self._pool, today, today + timedelta(days=ahead_days))
        dropped = await drop_run_partitions_before(
            self._pool, today - timedelta(days=retention_days)
        )
        return created, dropped
