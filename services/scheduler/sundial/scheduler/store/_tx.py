"""The steps of the scheduler's transactions: each method is one or two statements.

A :class:`Transaction` wraps one connection inside one database transaction
(:meth:`SchedulerStore.transaction`). Callers lock, decide with the pure rules
(:mod:`sundial.scheduler.planning`, :mod:`sundial.run`) and write the result through the
same transaction; nothing here decides what a run becomes.

Lock order everywhere: jobs, then job_runs (in primary-key order), then job_stats
(queries.sql).
"""

from __future__ import annotations

import uuid
from collections import OrderedDict, defaultdict
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from sundial.core.db import translate_db_errors
from sundial.notify import JobEvent, dead_run, misfire_skipped, recovered
from sundial.run import Completion, Grant, RunRef, RunState, RunStatus, Transition, succeeded
from sundial.scheduler.model import (
    ClaimedJob,
    DeadLetterRun,
    JobAdvance,
    LeaseLock,
    PlannedRun,
    PublishBatch,
    TenantTerms,
    WrittenLease,
)
from sundial.scheduler.store._admission import AdmissionSteps, RetryTerms
from sundial.scheduler.store._queries import queries
from sundial.scheduler.store._rows import (
    chunks as _chunks,
)
from sundial.scheduler.store._rows import (
    dead_letter_run,
    fixed_delays,
    lease_candidate,
    policies_of,
    publish_batch,
    ref_of,
    run_state,
    tenant_terms,
    unzip,
    with_key_cap,
)

_ENDED = (RunStatus.SUCCEEDED, RunStatus.DEAD, RunStatus.CANCELLED)

EARLIEST = datetime.min.replace(tzinfo=UTC)
"""A lower bound no due time is before (claim_due_jobs' ``due_after``)."""


def _text(value: Any) -> str | None:
    """An enum's stored text (None stays NULL)."""
    return None if value is None else value.value


class DocumentCache:
    """Definition documents (schedule and policies as JSON text) by their digest
    (migration 0008), least recently used dropped first. Shared by a scheduler's
    dispatch workers: a digest names one document forever, so an entry never goes stale."""

    def __init__(self, max_entries: int = 10_000) -> None:
        self._entries: OrderedDict[uuid.UUID, tuple[str, str]] = OrderedDict()
        self._max = max_entries

    def get(self, digest: uuid.UUID) -> tuple[str, str] | None:
        found = self._entries.get(digest)
        if found is not None:
            self._entries.move_to_end(digest)
        return found

    def put(self, digest: uuid.UUID, document: tuple[str, str]) -> None:
        self._entries[digest] = document
        self._entries.move_to_end(digest)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)


def _document(
    row: asyncpg.Record, read: dict[uuid.UUID, tuple[str, str]], cache: DocumentCache
) -> tuple[str, str] | None:
    """A claimed job's document: its own definition when it was read, else the cached
    document of its digest (None: no definition row)."""
    own = read.get(row["job_id"])
    if own is not None or row["definition_digest"] is None:
        return own
    return cache.get(row["definition_digest"])


class Transaction(AdmissionSteps):
    """One open transaction of the scheduler (see the module doc)."""

    def __init__(self, conn: asyncpg.Connection | PoolConnectionProxy) -> None:
        self._conn = conn
        # The runs this transaction locked whose jobs are fixed-delay jobs, with the
        # delay: when one ends here, its job is re-armed (_rearm_fixed_delays).
        self._fixed_delays: dict[RunRef, timedelta] = {}
        # The due retries lock_due_checks locked, with what admitting them needs
        # (hold_retries).
        self._retry_terms: dict[RunRef, RetryTerms] = {}

    async def _seqs(self, count: int) -> list[int]:
        if not count:
            return []
        return [r["seq"] for r in await self._conn.fetch(queries.next_dispatch_seqs, count)]

    # --- dispatch -----------------------------------------------------------------

    @translate_db_errors()
    async def claim_due_jobs(
        self,
        owned: Sequence[int],
        limit: int,
        now: datetime,
        documents: DocumentCache | None = None,
        *,
        due_after: datetime = EARLIEST,
        due_until: datetime | None = None,
        except_tenants: Sequence[str] = (),
    ) -> list[ClaimedJob]:
        """Lock up to ``limit`` due jobs of ``owned`` (SKIP LOCKED), with their
        definitions read after the lock (never an old definition with a new jobs row).
        Their live-run counts are zero until :meth:`count_live_runs` fills them.

        Args:
            documents: Documents already read, by digest (migration 0008): only one job
                per digest not in it has its definition read (and it is added).
            due_after, due_until: Only jobs due in (``due_after``, ``due_until``]
                (``due_until`` at most and by default ``now``), oldest first.
            except_tenants: Tenants whose jobs are left out.
        """
        until = now if due_until is None else min(due_until, now)
        rows = await self._conn.fetch(
            queries.claim_due_jobs,
            list(owned),
            limit,
            now,
            limit,
            due_after,
            until,
            list(except_tenants),
        )
        if not rows:
            return []
        cache = documents if documents is not None else DocumentCache()
        by_job: dict[uuid.UUID, tuple[str, str]] = {}
        unknown: dict[uuid.UUID, uuid.UUID] = {}  # digest -> one job to read it from
        read = []
        for r in rows:
            digest = r["definition_digest"]
            if digest is None:
                read.append(r["job_id"])  # written before 0008 and not backfilled
            elif cache.get(digest) is None:
                unknown.setdefault(digest, r["job_id"])
        read.extend(unknown.values())
        if read:
            for d in await self._conn.fetch(queries.job_definitions_of, read):
                pair = (d["schedule"], d["policies"])
                cache.put(d["digest"], pair)
                for job_id in d["job_ids"]:
                    by_job[job_id] = pair
        # A job without a definition row fails planning: quarantined.
        missing = ("null", "null")
        return [
            ClaimedJob(
                job_id=r["job_id"],
                tenant_id=r["tenant_id"],
                partition_id=r["partition_id"],
                next_run_at=r["next_run_at"],
                fired_count=r["fired_count"],
                version=r["version"],
                schedule=(pair := _document(r, by_job, cache) or missing)[0],
                policies=pair[1],
                unfinished=0,
                pending=0,
                create_traceparent=r["create_traceparent"] or "",
                last_fire_at=r["last_fire_at"],
            )
            for r in rows
        ]

    @translate_db_errors()
    async def last_scheduled_runs(
        self, jobs: Sequence[ClaimedJob]
    ) -> dict[uuid.UUID, tuple[RunStatus, datetime | None]]:
        """Fixed delay: ``job_id -> (status, finished_at)`` of the run at each claimed
        job's ``last_fire_at``; absent when there is no such row."""
        job_ids, times = unzip(
            RunRef(j.job_id, j.last_fire_at) for j in jobs if j.last_fire_at is not None
        )
        if not job_ids:
            return {}
        rows = await self._conn.fetch(queries.last_scheduled_runs, job_ids, times)
        return {r["job_id"]: (RunStatus(r["status"]), r["finished_at"]) for r in rows}

    @translate_db_errors()
    async def count_live_runs(
        self, job_ids: Sequence[uuid.UUID]
    ) -> dict[uuid.UUID, tuple[int, int]]:
        """``job_id -> (unfinished, pending)`` runs of ``job_ids`` (absent: none)."""
        if not job_ids:
            return {}
        rows = await self._conn.fetch(queries.live_run_counts, list(job_ids))
        return {r["job_id"]: (r["unfinished"], r["buffered"]) for r in rows}

    @translate_db_errors()
    async def quarantine_jobs(self, job_ids: Sequence[uuid.UUID], until: datetime) -> None:
        """Jobs that could not be planned are not claimed again before ``until``."""
        if job_ids:
            await self._conn.execute(queries.quarantine_jobs, sorted(job_ids), until)

    @translate_db_errors()
    async def cancel_other_runs(self, job_ids: Sequence[uuid.UUID], now: datetime) -> None:
        """OVERLAP_POLICY_CANCEL_OTHER: stop the unfinished runs of ``job_ids``."""
        if job_ids:
            await self._conn.fetch(queries.cancel_other_runs, list(job_ids), now)

    @translate_db_errors()
    async def insert_runs(
        self,
        runs: Sequence[PlannedRun],
        now: datetime,
        *,
        confirm_until: datetime,
        traceparents: Sequence[str | None] | None = None,
        waiting: Mapping[PlannedRun, bool] | None = None,
        weights: Mapping[str, int] | None = None,
    ) -> tuple[int, list[PublishBatch]]:
        """Insert the planned run rows (a run key that exists is left alone).

        QUEUED runs already due get a dispatch sequence per partition (and per 500 runs)
        and ``check_at = confirm_until``: the returned batches must be published after
        the commit, then confirmed. A jittered run whose due time is ahead gets
        ``check_at`` at it (the sweeper publishes it then). The runs of ``waiting``
        (admission said wait; True: held by its rate-limit key) get neither, and a
        waiting-list row each. ``traceparents``
        (one per run, None while tracing is off) is each run's trace context;
        ``weights`` the fair-sharing weights admission read, carried in the messages.

        Returns:
            The number of rows inserted and the batches to publish.
        """
        if not runs:
            return 0, []
        waiting = waiting or {}
        weights = weights or {}
        publish_now: dict[int, list[RunRef]] = defaultdict(list)
        tenant_of: dict[RunRef, str] = {}
        for run in runs:
            if run.status is RunStatus.QUEUED and run.due_at <= now and run not in waiting:
                ref = RunRef(run.job_id, run.scheduled_at)
                publish_now[run.partition_id].append(ref)
                tenant_of[ref] = run.tenant_id
        chunks = _chunks(publish_now)
        seqs = await self._seqs(len(chunks))
        seq_of = {ref: seq for (_, chunk), seq in zip(chunks, seqs, strict=True) for ref in chunk}
        cols: list[list[Any]] = [[] for _ in range(9)]
        for run in runs:
            seq = seq_of.get(RunRef(run.job_id, run.scheduled_at), 0)
            if seq:
                check_at: datetime | None = confirm_until
            elif run in waiting:
                check_at = None  # published when admitted (run_waits)
            elif run.status is RunStatus.QUEUED:
                check_at = run.due_at  # jittered: the sweeper publishes it when due
            else:
                check_at = None
            values = (
                run.job_id,
                run.scheduled_at,
                run.tenant_id,
                run.partition_id,
                run.status.value,
                seq,
                check_at,
                run.lateness_ms,
                _text(run.skip_reason),
            )
            for col, value in zip(cols, values, strict=True):
                col.append(value)
        status = await self._conn.execute(
            queries.insert_runs, *cols, now, None if traceparents is None else list(traceparents)
        )
        inserted = int(status.split()[-1])
        await self.insert_run_waits(waiting, now, all_new=inserted == len(runs))
        if inserted == len(runs):  # the usual case: every run key was new
            return inserted, [
                publish_batch(partition, seq, chunk, tenant_of, weights)
                for (partition, chunk), seq in zip(chunks, seqs, strict=True)
            ]
        # Only the runs this transaction inserted: an existing run key is not ours.
        published: dict[int, set[RunRef]] = defaultdict(set)
        if seqs:
            for row in await self._conn.fetch(queries.runs_of_dispatches, cols[0], cols[1], seqs):
                published[row["dispatch_seq"]].add(ref_of(row))
        batches = []
        for (partition, chunk), seq in zip(chunks, seqs, strict=True):
            mine = [ref for ref in chunk if ref in published.get(seq, ())]
            if mine:
                batches.append(publish_batch(partition, seq, mine, tenant_of, weights))
        return inserted, batches

    @translate_db_errors()
    async def advance_jobs(self, advances: Sequence[JobAdvance], now: datetime) -> None:
        """Move each claimed job to its next fire time and record its counters."""
        if not advances:
            return
        # Key order, as the ledger's stats upsert: concurrent upserts never deadlock.
        ordered = sorted(advances, key=lambda a: a.job_id)
        await self._conn.execute(
            queries.advance_jobs,
            [a.job_id for a in ordered],
            [a.next_run_at for a in ordered],
            [a.fired for a in ordered],
            [a.last_fire_at for a in ordered],
            [a.lateness_ms for a in ordered],
        )
        dropped = [a for a in ordered if a.missed or a.skipped]
        if dropped:
            await self._conn.execute(
                queries.count_dispatch_drops,
                [a.job_id for a in dropped],
                [a.missed for a in dropped],
                [a.skipped for a in dropped],
                now,
            )
            # Only a batch that dropped misfires pays for this statement.
            await self.record_events(
                [misfire_skipped(a.job_id, a.missed) for a in dropped if a.missed], now
            )
        # The skipped misfires' times, for the job's SLO (migration 0016): only for a
        # dispatch that skipped any, so the normal path writes nothing more.
        misfired = [a for a in dropped if a.missed and a.missed_first and a.missed_last]
        if misfired:
            await self._conn.execute(
                queries.record_misfires,
                [a.job_id for a in misfired],
                [a.missed_first for a in misfired],
                [a.missed_last for a in misfired],
                [a.missed for a in misfired],
                [a.missed_exact for a in misfired],
                now,
            )

    async def _rearm_fixed_delays(self, ended: Sequence[Transition]) -> None:
        """Fixed delay (docs/design.md section 4): each ended run of a fixed-delay job
        makes its job due at the run's end plus the delay, in this transaction (before
        the stats: jobs come first in the lock order). Only calls that ended such a run
        pay for the statement."""
        rearm = [
            (t.ref, t.finished_at + delay)
            for t in ended
            if (delay := self._fixed_delays.get(t.ref)) is not None and t.finished_at
        ]
        if rearm:
            job_ids, times = unzip(ref for ref, _ in rearm)
            await self._conn.fetch(
                queries.rearm_fixed_delays, job_ids, times, [at for _, at in rearm]
            )

    # --- notifications (docs/design.md section 12) -------------------------------------

    @translate_db_errors()
    async def record_events(self, events: Sequence[JobEvent], now: datetime) -> None:
        """Write ``events`` into the notification outbox in this transaction: one row
        per channel of each job's tenant that wants the event's kind (none for a tenant
        without one, and none for a job that no longer exists).

        The one emitter of every kind: the ledger's and the sweeper's dead runs, the
        dispatcher's skipped misfires, and late runs (``sundial.notify.late_run``).
        """
        if not events:
            return
        await self._conn.execute(
            queries.record_job_events,
            [e.job_id for e in events],
            [e.kind.value for e in events],
            [e.detail_json() for e in events],
            [now] * len(events),
        )

    async def _apply_failure_policy(self, dead: Sequence[Transition], now: datetime) -> None:
        """After ``dead`` runs were counted: their events, and the pause of every job
        whose dead runs in a row reached its failure policy's threshold."""
        await self.record_events(
            [dead_run(t.ref.job_id, t.ref.key, t.last_error, _text(t.error_class)) for t in dead],
            now,
        )
        last_error = {t.ref.job_id: t.last_error or "" for t in dead}
        due = await self._conn.fetch(
            queries.mark_failure_pauses, list(last_error), list(last_error.values())
        )
        if due:
            await self._conn.fetch(
                queries.apply_failure_pauses, sorted(r["job_id"] for r in due), now
            )

    @translate_db_errors()
    async def apply_due_failure_pauses(
        self, owned: Sequence[int], limit: int, now: datetime
    ) -> int:
        """The sweeper's backstop: pause up to ``limit`` jobs of ``owned`` whose failure
        policy's pause could not be made in the transaction of their dead run (their
        jobs row was locked then). Returns how many were paused."""
        due = await self._conn.fetch(queries.due_failure_pauses, list(owned), limit)
        if not due:
            return 0
        rows = await self._conn.fetch(queries.apply_failure_pauses, [r["job_id"] for r in due], now)
        return len(rows)

    # --- sweeps -------------------------------------------------------------------

    @translate_db_errors()
    async def release_pending(self, owned: Sequence[int], limit: int, now: datetime) -> int:
        """Buffered runs whose blocker ended become QUEUED, due for publish now."""
        return len(await self._conn.fetch(queries.release_pending, list(owned), limit, now))

    @translate_db_errors()
    async def lock_due_checks(
        self, owned: Sequence[int], limit: int, now: datetime
    ) -> list[tuple[RunState, int, datetime | None, str]]:
        """Lock the runs of ``owned`` whose ``check_at`` passed (SKIP LOCKED): unconfirmed
        or unleased publishes, deferred or released runs, expired leases, due retries.

        Returns:
            Each run's state, partition, for a queued run whose publish JetStream
            acknowledged the ack's recheck time (else None), and its trace context
            (empty when it has none).
        """
        rows = await self._conn.fetch(queries.lock_due_checks, list(owned), limit, now)
        self._fixed_delays.update(fixed_delays(rows))
        for r in rows:
            if r["status"] == RunStatus.RETRYING.value:
                policies = policies_of(r["policies"])
                self._retry_terms[RunRef(r["job_id"], r["scheduled_at"])] = RetryTerms(
                    r["check_at"], policies.priority, policies.rate_limit_key
                )
        return [
            (run_state(r), r["partition_id"], r["acked_until"], r["traceparent"] or "")
            for r in rows
        ]

    @translate_db_errors()
    async def defer_checks(self, deferred: Sequence[tuple[RunRef, datetime]]) -> None:
        """Move the ``check_at`` of runs this transaction locked to the given times."""
        if deferred:
            job_ids, times = unzip(ref for ref, _ in deferred)
            await self._conn.execute(
                queries.defer_checks, job_ids, times, [at for _, at in deferred]
            )

    @translate_db_errors()
    async def apply_checks(
        self,
        transitions: Sequence[tuple[Transition, int]],
        now: datetime,
        *,
        confirm_until: datetime,
        tenants: Mapping[RunRef, str] | None = None,
        default_weight: int = 1,
    ) -> list[PublishBatch]:
        """Write the sweep's transitions (each with its run's partition).

        Runs to republish get a new dispatch sequence per partition (and per 500 runs)
        and ``check_at = confirm_until``; runs that ended are counted in their jobs'
        stats. A republished message names each run's tenant (``tenants``) and its
        weight (``default_weight`` for a tenant without its own), so an executor shares
        its slots and paces by them as for a first publish: unnamed, every tenant's
        retries were one tenant, "", to the executors (docs/design.md section 7, "Flow
        control").

        Returns:
            The batches to publish after the commit.
        """
        if not transitions:
            return []
        to_publish: dict[int, list[RunRef]] = defaultdict(list)
        for transition, partition in transitions:
            if transition.republish:
                to_publish[partition].append(transition.ref)
        chunks = _chunks(to_publish)
        seqs = await self._seqs(len(chunks))
        seq_of = {ref: seq for (_, chunk), seq in zip(chunks, seqs, strict=True) for ref in chunk}
        cols: list[list[Any]] = [[] for _ in range(8)]
        for transition, _ in transitions:
            seq = seq_of.get(transition.ref, 0)
            values = (
                transition.ref.job_id,
                transition.ref.scheduled_at,
                transition.status.value,
                seq,
                confirm_until if seq else transition.check_at,
                transition.finished_at,
                _text(transition.error_class),
                transition.last_error,
            )
            for col, value in zip(cols, values, strict=True):
                col.append(value)
        await self._conn.fetch(queries.apply_checks, *cols, now)
        await self._count_ended([t for t, _ in transitions], now)
        named = tenants or {}
        republished = sorted({named[r] for _, chunk in chunks for r in chunk if r in named})
        rows = await self._conn.fetch(queries.tenant_weights, republished) if republished else []
        weights = {r["tenant_id"]: r["fair_weight"] or default_weight for r in rows}
        return [
            PublishBatch(
                partition, seq, tuple(chunk), tuple(named.get(r, "") for r in chunk), weights
            )
            for (partition, chunk), seq in zip(chunks, seqs, strict=True)
        ]

    @translate_db_errors()
    async def claim_dead_letters(
        self, owned: Sequence[int], limit: int, now: datetime, *, retry_at: datetime
    ) -> list[DeadLetterRun]:
        """The due dead-letter outbox entries of ``owned``; each is due again at
        ``retry_at`` unless cleared first."""
        rows = await self._conn.fetch(queries.claim_dead_letters, list(owned), limit, now, retry_at)
        return [dead_letter_run(r) for r in rows]

    # --- the ledger ---------------------------------------------------------------

    @translate_db_errors()
    async def lock_for_lease(self, refs: Sequence[RunRef]) -> LeaseLock:
        """Lock the runs ``refs`` in key order, then their tenants (an advisory lock each,
        sorted: the concurrent-run cap holds across concurrent calls on any replica), and
        read each tenant's terms once under its lock (cap, RUNNING runs, signing
        secrets). Runs that do not exist are absent.

        The runs come first so that concurrent calls for one tenant lock and read their
        rows in parallel and queue on the tenant only for the count, the grant and the
        commit (queries.sql, lock_tenants)."""
        job_ids, times = unzip(refs)
        rows = await self._conn.fetch(queries.lock_runs, job_ids, times)
        tenants = sorted({r["tenant_id"] for r in rows})
        terms: dict[str, TenantTerms] = {}
        if tenants:
            await self._conn.execute(queries.lock_tenants, tenants)
            terms = {
                r["tenant_id"]: tenant_terms(r)
                for r in await self._conn.fetch(queries.tenant_lease_terms, tenants)
            }
        candidates = {ref_of(r): lease_candidate(r, terms.get(r["tenant_id"])) for r in rows}
        keyed = {
            (c.state.tenant_id, c.state.concurrency_key)
            for c in candidates.values()
            if c.state.concurrency_key
        }
        key_caps: dict[tuple[str, str], int] = {}
        key_running: dict[tuple[str, str], int] = {}
        if keyed:  # only calls with runs under a concurrency key pay for this statement
            tenants_of, keys_of = zip(*sorted(keyed), strict=True)
            for r in await self._conn.fetch(
                queries.concurrency_key_terms, list(tenants_of), list(keys_of)
            ):
                key_caps[(r["tenant_id"], r["key"])] = r["max_running"]
                key_running[(r["tenant_id"], r["key"])] = r["running_runs"]
            candidates = {
                ref: with_key_cap(c, key_caps.get((c.state.tenant_id, c.state.concurrency_key)))
                for ref, c in candidates.items()
            }
        return LeaseLock(
            candidates, {tenant: t.running for tenant, t in terms.items()}, key_running
        )

    @translate_db_errors()
    async def write_grants(
        self,
        grants: Sequence[Grant],
        lock: LeaseLock,
        *,
        executor_id: str,
        token_id: str,
        lease_until: datetime,
        now: datetime,
    ) -> dict[RunRef, WrittenLease]:
        """Write leases to ``executor_id`` until ``lease_until``: a new attempt under a new
        lease id for each grant, the same attempt and lease id with the lease extended
        for each re-grant.

        Returns:
            The lease of every run written.
        """
        regrants = [g.ref for g in grants if g.regrant]
        fresh = [g.ref for g in grants if not g.regrant]
        leases: dict[RunRef, WrittenLease] = {}
        if regrants:
            job_ids, times = unzip(regrants)
            rows = await self._conn.fetch(
                queries.regrant_leases,
                job_ids,
                times,
                [lock.candidates[ref].state.attempt for ref in regrants],
                executor_id,
                lease_until,
                now,
            )
            leases.update({ref_of(r): WrittenLease(r["attempt"], r["lease_id"]) for r in rows})
        if fresh:
            job_ids, times = unzip(fresh)
            rows = await self._conn.fetch(
                queries.grant_runs,
                job_ids,
                times,
                executor_id,
                lease_until,
                now,
                token_id or None,
            )
            leases.update({ref_of(r): WrittenLease(r["attempt"], r["lease_id"]) for r in rows})
        return leases

    @translate_db_errors()
    async def lock_for_completion(self, refs: Sequence[RunRef]) -> dict[RunRef, RunState]:
        """Lock the runs ``refs`` in key order with what fencing and the retry decision
        need (and nothing else: the hottest ledger call stays one probe per run)."""
        job_ids, times = unzip(refs)
        rows = await self._conn.fetch(queries.lock_runs_for_completion, job_ids, times)
        self._fixed_delays.update(fixed_delays(rows))
        return {ref_of(r): run_state(r) for r in rows}

    @translate_db_errors()
    async def record_successes(
        self, completions: Sequence[Completion], executor_id: str, now: datetime
    ) -> dict[RunRef, tuple[Transition, str]]:
        """CompleteRuns' fast path: write SUCCEEDED (:func:`sundial.run.succeeded`) for
        the runs ``completions`` (each reported succeeded, each run once) whose lease
        ``executor_id`` holds, fenced in the statement, without reading them first.

        Returns:
            The transition and the tenant of each run written; a run missing was fenced.
        """
        if not completions:
            return {}
        cs = completions  # the statement locks them in key order itself
        written = [succeeded(c.ref, c.outcome, now) for c in cs]
        rows = await self._conn.fetch(
            queries.record_successes,
            [c.ref.job_id for c in cs],
            [c.ref.scheduled_at for c in cs],
            [c.attempt for c in cs],
            [c.lease_id for c in cs],
            executor_id,
            [t.last_error for t in written],
            [t.http_status for t in written],
            [t.grpc_code for t in written],
            now,
        )
        self._fixed_delays.update(fixed_delays(rows))
        tenants = {ref_of(r): r["tenant_id"] for r in rows}
        return {t.ref: (t, tenants[t.ref]) for t in written if t.ref in tenants}

    @translate_db_errors()
    async def write_outcomes(
        self,
        transitions: Sequence[Transition],
        now: datetime,
        *,
        recorded: Sequence[Transition] = (),
    ) -> None:
        """Write accepted outcomes; for runs that ended, those and ``recorded`` (written
        already by :meth:`record_successes`), release the next buffered run of their
        jobs and count them in the jobs' stats."""
        if transitions:
            await self._conn.execute(
                queries.record_outcomes,
                [t.ref.job_id for t in transitions],
                [t.ref.scheduled_at for t in transitions],
                [t.status.value for t in transitions],
                [t.check_at for t in transitions],
                [t.next_attempt_at for t in transitions],
                [t.finished_at for t in transitions],
                [t.last_error for t in transitions],
                [_text(t.error_class) for t in transitions],
                [t.http_status for t in transitions],
                [t.grpc_code for t in transitions],
                now,
            )
        ts = [*recorded, *transitions]
        ended = sorted({t.ref.job_id for t in ts if t.status in _ENDED})
        if ended:
            await self._conn.execute(queries.release_pending_of_jobs, ended, now)
        await self._count_ended(ts, now)

    async def _count_ended(self, transitions: Sequence[Transition], now: datetime) -> None:
        """Per-job completion counters of the transitions that ended a run."""
        ended = sorted((t for t in transitions if t.status in _ENDED), key=lambda t: t.ref.job_id)
        if not ended:
            return
        await self._rearm_fixed_delays(ended)
        succeeded = [t.status is RunStatus.SUCCEEDED for t in ended]
        dead = [t.status is RunStatus.DEAD for t in ended]
        counted = await self._conn.fetch(
            queries.record_completion_stats,
            [t.ref.job_id for t in ended],
            [int(s) for s in succeeded],
            [int(d) for d in dead],
            [int(t.status is RunStatus.CANCELLED) for t in ended],
            [t.finished_at if s else None for t, s in zip(ended, succeeded, strict=True)],
            [t.finished_at if d else None for t, d in zip(ended, dead, strict=True)],
            now,
        )
        # Only a batch whose success ended a streak of dead runs pays for this statement.
        streaks = {row["job_id"]: row["recovered_streak"] for row in counted}
        if any(streaks.values()):
            success = {t.ref.job_id: t.ref.key for t in ended if t.status is RunStatus.SUCCEEDED}
            await self.record_events(
                [
                    recovered(job_id, success[job_id], streak)
                    for job_id, streak in sorted(streaks.items())
                    if streak and job_id in success
                ],
                now,
            )
        if any(dead):
            await self._apply_failure_policy([t for t in ended if t.status is RunStatus.DEAD], now)
