"""The admission steps of a scheduler transaction (flow control; decisions in
:mod:`sundial.scheduler.admission`, docs/design.md section 7 "Flow control").

Lock order: a dispatch holds its claimed jobs rows, then takes the tenants' admission
locks (sorted); a sweep takes the admission locks, then writes waiting runs that no
other transaction locks first. Neither waits for the other in a cycle. The same sweep
then locks its due runs (SKIP LOCKED) and admits their retries
(:meth:`AdmissionSteps.hold_retries`) as a dispatch admits its runs, with try-locks
only: a tenant whose admission lock is held elsewhere counts as full.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections import Counter, defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from sundial.core.db import translate_db_errors
from sundial.run import RunRef, RunStatus, Transition
from sundial.scheduler.admission import (
    KeyBucket,
    TenantFlow,
    admit_at_dispatch,
    interleave,
    origin_of,
    take_tokens,
)
from sundial.scheduler.model import PlannedRun, PublishBatch
from sundial.scheduler.store._queries import queries
from sundial.scheduler.store._rows import chunks, publish_batch, target_of, unzip

__all__ = ["AdmissionSteps", "Admitted", "RetryTerms"]

WAITING_TENANTS_PER_PASS = 64
"""Tenants with waiting runs one sweep pass admits for (the next pass goes on from the
last one, so every tenant gets its turn)."""


@dataclass(frozen=True, slots=True)
class RetryTerms:
    """What admitting a due retry needs of its run and job (read by lock_due_checks)."""

    due_at: datetime
    """When the retry fell due (its check_at)."""
    priority: int
    rate_key: str
    """The job's own rate-limit key; empty for the default (the target's origin)."""


@dataclass(frozen=True, slots=True)
class Admitted:
    """What one admission pass did."""

    admitted: Mapping[str, int]
    """Runs made due for publish in this pass, per tenant."""
    waiting: bool
    """Runs still wait somewhere (the sweeper looks again soon)."""
    cursor: str = ""
    """The tenant the next pass starts after (empty: from the first)."""
    batches: list[PublishBatch] = field(default_factory=list)
    """The admitted runs' RunDispatch messages, to publish after the commit."""


class AdmissionSteps:
    """Mixed into :class:`~sundial.scheduler.store.Transaction`."""

    _conn: asyncpg.Connection | PoolConnectionProxy
    _retry_terms: dict[RunRef, RetryTerms]

    @translate_db_errors()
    async def hold_retries(
        self,
        transitions: Sequence[tuple[Transition, int]],
        tenants: Mapping[RunRef, str],
        *,
        window: int,
        default_weight: int,
        now: datetime,
    ) -> tuple[list[tuple[Transition, int]], dict[PlannedRun, bool]]:
        """Admit the sweep's due retries as a dispatch admits its runs: a retry under a
        held rate-limit key, past its tenant's free window, or of a tenant that has runs
        waiting already waits instead of being republished (a failing target's retry
        storm took its tenant's window and its key's rate limit for nothing before).

        Args:
            transitions: The sweep's transitions (each with its run's partition); the
                retries among them are the runs ``lock_due_checks`` read as RETRYING.
            tenants: Each run's tenant.

        Returns:
            The transitions, a waiting retry's no longer republished (QUEUED, no
            dispatch sequence, no check: as a dispatch's waiting run is), and the
            waiting runs for :meth:`insert_run_waits` once the transitions are written
            (True: held by its rate-limit key).
        """
        retries: list[PlannedRun] = []
        for transition, partition in transitions:
            terms = self._retry_terms.get(transition.ref)
            if terms is None or not transition.republish or transition.ref not in tenants:
                continue
            retries.append(
                PlannedRun(
                    job_id=transition.ref.job_id,
                    scheduled_at=transition.ref.scheduled_at,
                    tenant_id=tenants[transition.ref],
                    partition_id=partition,
                    status=RunStatus.QUEUED,
                    due_at=terms.due_at,
                    lateness_ms=None,
                    priority=terms.priority,
                    rate_key=terms.rate_key,
                )
            )
        if not retries:
            return list(transitions), {}
        flows = await self.lock_admission(
            {r.tenant_id for r in retries}, window, default_weight, now, wait=False
        )
        wait = admit_at_dispatch(await self.resolve_rate_keys(retries, flows, now), flows, now)
        held = {RunRef(r.job_id, r.scheduled_at) for r in wait}
        return [
            (dataclasses.replace(t, republish=False) if t.ref in held else t, partition)
            for t, partition in transitions
        ], wait

    @translate_db_errors()
    async def lock_admission(
        self,
        tenants: Collection[str],
        window: int,
        default_weight: int,
        now: datetime,
        *,
        wait: bool = True,
    ) -> dict[str, TenantFlow]:
        """Take the admission locks of ``tenants`` and read each one's flow (a tenant
        without a row is absent: not limited). With ``wait`` False (a dispatch, a
        sweep's due retries), a lock another transaction holds is not waited for: that
        tenant's flow is full (every due run of it waits, and the sweeper admits it
        within a pass)."""
        if not tenants:
            return {}
        names = sorted(tenants)
        busy: set[str] = set()
        if wait:
            await self._conn.execute(queries.lock_admission, names)
        else:
            rows = await self._conn.fetch(queries.try_lock_admission, names)
            busy = {r["tenant_id"] for r in rows if not r["locked"]}
        keys: dict[str, dict[str, KeyBucket]] = {}
        for r in await self._conn.fetch(queries.admission_keys, names, now):
            keys.setdefault(r["tenant_id"], {})[r["key"]] = KeyBucket(
                r["rate_per_s"], r["burst"], r["tokens"], r["refilled_at"], r["blocked_until"]
            )
        flows = {
            tenant: TenantFlow(window=0, in_flight=0, waiting=True, keys=keys.get(tenant, {}))
            for tenant in busy
        }
        locked = [name for name in names if name not in busy]
        if locked:
            flows.update(
                {
                    r["tenant_id"]: TenantFlow(
                        window=window * (r["fair_weight"] or default_weight),
                        in_flight=r["in_flight"],
                        waiting=r["waiting"],
                        keys=keys.get(r["tenant_id"], {}),
                        weight=r["fair_weight"] or default_weight,
                    )
                    for r in await self._conn.fetch(queries.admission_terms, locked)
                }
            )
        return flows

    @translate_db_errors()
    async def resolve_rate_keys(
        self, runs: Sequence[PlannedRun], flows: Mapping[str, TenantFlow], now: datetime
    ) -> list[PlannedRun]:
        """``runs`` with the default rate-limit key (the target's origin) filled in for
        the tenants that hold keys; the others' runs need no key and are left alone."""
        unkeyed = {r.job_id for r in runs if not r.rate_key and flows.get(r.tenant_id, _NONE).keys}
        if not unkeyed:
            return list(runs)
        origins = {
            r["job_id"]: origin_of(target_of(r["target"]))
            for r in await self._conn.fetch(queries.job_origins, sorted(unkeyed))
        }
        return [
            dataclasses.replace(r, rate_key=origins.get(r.job_id, "")) if r.job_id in unkeyed else r
            for r in runs
        ]

    @translate_db_errors()
    async def insert_run_waits(
        self, waiting: Mapping[PlannedRun, bool], now: datetime, *, all_new: bool = False
    ) -> None:
        """The waiting-list rows of the runs ``waiting`` (a dispatch's runs inserted to
        wait, or a sweep's held retries once written; True: held by its rate-limit key).
        ``all_new``: every run key the dispatch inserted was new, so each of them is this
        dispatch's own."""
        if not waiting:
            return
        runs = list(waiting)
        await self._conn.execute(
            queries.insert_run_waits,
            [r.job_id for r in runs],
            [r.scheduled_at for r in runs],
            [r.tenant_id for r in runs],
            [r.partition_id for r in runs],
            [r.priority for r in runs],
            [r.due_at for r in runs],
            [r.rate_key for r in runs],
            now,
            [waiting[r] for r in runs],
            all_new,
        )

    @translate_db_errors()
    async def admit_waiting(
        self,
        owned: Sequence[int],
        *,
        window: int,
        default_weight: int,
        limit: int,
        now: datetime,
        confirm_until: datetime,
        after: str = "",
    ) -> Admitted:
        """Admit waiting runs of partitions ``owned``, at most ``limit``: per tenant
        with waiting runs, as many as its window's free room takes (the highest priority
        and oldest due first), those of a rate-limited key as its bucket allows, none
        of a key blocked by a Retry-After. Admitted runs get their dispatch sequences
        and ``check_at = confirm_until`` in this transaction, as a dispatch's: the
        caller publishes :attr:`Admitted.batches` after the commit, then confirms them.
        Tenants are taken from the first after ``after`` on (the previous pass's
        :attr:`Admitted.cursor`)."""
        rows = await self._conn.fetch(queries.waiting_tenants, after, WAITING_TENANTS_PER_PASS)
        tenants = [r["tenant_id"] for r in rows]
        # A short page reached the end: the next pass starts over from the first.
        cursor = tenants[-1] if len(tenants) == WAITING_TENANTS_PER_PASS else ""
        if not tenants:
            return Admitted({}, bool(after), cursor)
        flows = await self.lock_admission(tenants, window, default_weight, now)
        # Per tenant, in its order: the run, its partition, whether its key held it.
        by_tenant: list[list[tuple[RunRef, int, bool]]] = []
        tenant_of: dict[RunRef, str] = {}
        spent: list[tuple[str, str, float]] = []
        total = 0
        for tenant in sorted(flows):
            flow = flows[tenant]
            free = min(flow.free, limit - total)
            if free <= 0:
                continue
            mine: list[tuple[RunRef, int, bool]] = []
            held = flow.held_keys(now)
            for key in sorted(held):
                taken, left = take_tokens(flow.keys[key], free, now)
                if taken <= 0:
                    continue
                found = await self._next_waiting(tenant, owned, key, taken, held)
                mine.extend((ref, partition, True) for ref, partition in found)
                free -= len(found)
                if found and flow.keys[key].rate_per_s > 0:
                    spent.append((tenant, key, left + (taken - len(found))))
            if free > 0:
                found = await self._next_waiting(tenant, owned, None, free, held)
                mine.extend((ref, partition, False) for ref, partition in found)
            by_tenant.append(mine)
            tenant_of.update((ref, tenant) for ref, _, _ in mine)
            total += len(mine)
        # The message's order: each tenant's runs spread over it (see interleave).
        chosen = interleave(by_tenant)
        if spent:
            tenants_of, keys_of, tokens_of = zip(*spent, strict=True)
            await self._conn.execute(
                queries.spend_tokens, list(tenants_of), list(keys_of), list(tokens_of), now
            )
        if not chosen:
            return Admitted({}, True, cursor)
        # One message per 500 admitted runs, whatever their partitions (the subject
        # names the first run's): a pass admits a few runs of many partitions, and a
        # message per partition would cost a publish, a fetch and an ack per run.
        first = chosen[0][1]
        planned = chunks({first: [ref for ref, _, _ in chosen]})
        seqs = [r["seq"] for r in await self._conn.fetch(queries.next_dispatch_seqs, len(planned))]
        seq_of = {ref: seq for (_, refs), seq in zip(planned, seqs, strict=True) for ref in refs}
        job_ids, times = unzip([ref for ref, _, _ in chosen])
        rows = await self._conn.fetch(
            queries.admit_runs,
            job_ids,
            times,
            [seq_of[ref] for ref, _, _ in chosen],
            now,
            confirm_until,
            [throttled for _, _, throttled in chosen],
        )
        admitted: Counter[str] = Counter(r["tenant_id"] for r in rows)
        # In the chosen order (RETURNING has none): a run cancelled meanwhile is left out.
        done = {RunRef(r["job_id"], r["scheduled_at"]) for r in rows}
        published: dict[int, list[RunRef]] = defaultdict(list)
        for ref, _, _ in chosen:
            if ref in done:
                published[seq_of[ref]].append(ref)
        weights = {tenant: flow.weight for tenant, flow in flows.items()}
        batches = [
            publish_batch(first, seq, refs, tenant_of, weights)
            for seq, refs in sorted(published.items())
        ]
        return Admitted(admitted, True, cursor, batches)

    async def _next_waiting(
        self,
        tenant: str,
        owned: Sequence[int],
        key: str | None,
        count: int,
        held: Collection[str],
    ) -> list[tuple[RunRef, int]]:
        rows = await self._conn.fetch(
            queries.next_waiting, tenant, list(owned), key, count, sorted(held)
        )
        return [(RunRef(r["job_id"], r["scheduled_at"]), r["partition_id"]) for r in rows]

    @translate_db_errors()
    async def block_keys(self, until: Mapping[uuid.UUID, datetime]) -> None:
        """Hold every waiting run of the rate-limit key of each job of ``until`` (its
        run's target answered 429 with Retry-After) until that instant."""
        if not until:
            return
        blocks: dict[tuple[str, str], datetime] = {}
        for r in await self._conn.fetch(queries.rate_keys_of, sorted(until)):
            key = r["rate_limit_key"] or origin_of(target_of(r["target"]))
            if key:
                pair = (r["tenant_id"], key)
                blocks[pair] = max(until[r["job_id"]], blocks.get(pair, until[r["job_id"]]))
        ordered = sorted(blocks.items())
        await self._conn.execute(
            queries.block_keys,
            [k[0] for k, _ in ordered],
            [k[1] for k, _ in ordered],
            [until for _, until in ordered],
        )


_NONE = TenantFlow(window=0, in_flight=0)
