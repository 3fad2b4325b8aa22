"""asyncpg rows into the scheduler's typed values: rows never leave the store."""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import asyncpg

from sundial.core.egress import policy_from_document
from sundial.job import JobPolicies, duration_from_json, policies_from_json, target_from_json
from sundial.run import ErrorClass, RetryPolicy, RunKind, RunRef, RunState, RunStatus, Target
from sundial.scheduler.model import DeadLetterRun, LeaseCandidate, PublishBatch, TenantTerms

Record = asyncpg.Record

log = logging.getLogger(__name__)


@functools.lru_cache(maxsize=4096)
def policies_of(text: str | None) -> JobPolicies:
    """Decode ``job_definitions.policies`` read as text (a herd shares a few documents:
    each is decoded once). A missing definition has the default policies, and so has an
    undecodable one: one bad document must not fail a whole sweep or CompleteRuns batch
    (the dispatcher quarantines such a job; its runs still end by the default rules)."""
    if not text:
        return JobPolicies()
    try:
        return policies_from_json(json.loads(text))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        log.warning(
            "undecodable policies document; default policies apply: %s",
            exc,
            extra={"action": "decode_policies"},
        )
        return JobPolicies()


@functools.lru_cache(maxsize=4096)
def target_of(text: str | None) -> Target | None:
    """Decode ``job_definitions.target`` read as text (a herd's jobs share a few targets:
    each is decoded once; a target is frozen, so the runs may share it)."""
    return target_from_json(json.loads(text)) if text else None


@functools.lru_cache(maxsize=4096)
def _run_terms(text: str | None) -> tuple[RetryPolicy, str]:
    """The retry policy and concurrency key a run state takes from its job's policies
    document (built once per document, not once per locked row)."""
    policies = policies_of(text)
    return policies.retry, policies.concurrency_key


# A status by its stored text: a dict lookup (RunStatus(text) goes through EnumType's
# call, a per-row cost of every lock the ledger takes).
_STATUS_OF: dict[str, RunStatus] = {status.value: status for status in RunStatus}


def ref_of(row: Record) -> RunRef:
    """The run a row with ``job_id`` and ``scheduled_at`` is about."""
    return RunRef(row["job_id"], row["scheduled_at"])


def fixed_delays(rows: Iterable[Record]) -> dict[RunRef, timedelta]:
    """The delay of each row's job that is a fixed-delay job (the ``fixed_delay``
    fragment of queries.sql), by run."""
    return {
        ref_of(r): duration_from_json(r["fixed_delay"], "schedule.interval.every")
        for r in rows
        if r["fixed_delay"] is not None
    }


def run_state(row: Record, *, max_concurrent_runs: int | None = None) -> RunState:
    """The state of a locked ``job_runs`` row (``lock_runs``, ``lock_runs_for_completion``,
    ``lock_due_checks``).

    Args:
        row: Holds at least job_id, scheduled_at, status, attempt, attempt_base,
            cancel_requested and policies (text); lease columns where selected.
        max_concurrent_runs: The cap of the row's tenant (LeaseRuns; the row then holds
            tenant_id).
    """
    get = row.get
    retry, concurrency_key = _run_terms(row["policies"])
    status = row["status"]
    return RunState(
        ref=ref_of(row),
        status=_STATUS_OF.get(status) or RunStatus(status),
        attempt=row["attempt"],
        attempt_base=row["attempt_base"],
        executor_id=get("executor_id"),
        lease_id=str(lease_id) if (lease_id := get("lease_id")) is not None else None,
        lease_token_id=str(token) if (token := get("lease_token_id")) is not None else None,
        lease_until=get("lease_until"),
        next_attempt_at=get("next_attempt_at"),
        cancel_requested=row["cancel_requested"],
        job_exists=get("job_exists", True),
        retry=retry,
        tenant_id=get("tenant_id") or "",
        max_concurrent_runs=max_concurrent_runs,
        concurrency_key=concurrency_key,
    )


def with_key_cap(candidate: LeaseCandidate, cap: int | None) -> LeaseCandidate:
    """``candidate`` with its concurrency key's cap (None: the key has no limit)."""
    if cap is None:
        return candidate
    return dataclasses.replace(
        candidate, state=dataclasses.replace(candidate.state, key_max_running=cap)
    )


def lease_candidate(row: Record, terms: TenantTerms | None) -> LeaseCandidate:
    """A ``lock_runs`` row as what LeaseRuns decides on and grants, with its tenant's
    terms (None: no tenant row, so no cap and no secret)."""
    policies = policies_of(row["policies"])
    return LeaseCandidate(
        state=run_state(row, max_concurrent_runs=terms.max_concurrent_runs if terms else None),
        kind=RunKind(row["kind"]),
        job_name=row["job_name"] or "",
        target=target_of(row["target"]),
        payload=bytes(row["payload"] or b""),
        run_timeout=policies.run_timeout,
        signing_secrets=terms.signing_secrets if terms else (),
        egress=terms.egress if terms else None,
        traceparent=row["traceparent"] or "",
        lateness_threshold=policies.lateness_threshold,
        jitter=_jitter_of(row["jitter"]),
        throttled=row["throttled"],
    )


@functools.lru_cache(maxsize=1024)
def _jitter_of(text: str | None) -> timedelta:
    """A schedule document's jitter bound (``"30s"``); a herd shares a few values."""
    try:
        return duration_from_json(text, "schedule.jitter") if text else timedelta(0)
    except ValueError:
        return timedelta(0)  # measured only: an odd document must not fail a grant


def tenant_terms(row: Record) -> TenantTerms:
    """A ``tenant_lease_terms`` row."""
    secrets = row["signing_secrets"] or [row["signing_secret"]]
    return TenantTerms(
        running=row["running_runs"],
        max_concurrent_runs=row["max_concurrent_runs"],
        signing_secrets=tuple(bytes(s) for s in secrets if s is not None),
        egress=policy_from_document(row["egress_policy"]) if row["egress_policy"] else None,
    )


def dead_letter_run(row: Record) -> DeadLetterRun:
    """A ``claim_dead_letters``/``dead_letters_of`` row."""
    labels: dict[str, Any] = row["labels"] or {}
    return DeadLetterRun(
        ref=ref_of(row),
        tenant_id=row["tenant_id"],
        kind=RunKind(row["kind"]),
        attempt=row["attempt"],
        executor_id=row["executor_id"] or "",
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        last_error=row["last_error"] or "",
        error_class=ErrorClass(row["error_class"]) if row["error_class"] else None,
        job_name=row["job_name"] or "",
        target=target_from_json(row["target"]),
        payload=bytes(row["payload"] or b""),
        labels={str(k): str(v) for k, v in labels.items()},
        traceparent=row["traceparent"] or "",
    )


def unzip(refs: Iterable[RunRef]) -> tuple[list[uuid.UUID], list[datetime]]:
    """Parallel job_id and scheduled_at arrays of ``refs`` (for unnest)."""
    pairs = [(r.job_id, r.scheduled_at) for r in refs]
    return [p[0] for p in pairs], [p[1] for p in pairs]


MAX_RUNS_PER_MESSAGE = 500
"""Runs of one RunDispatch message (LeaseRuns takes up to 500)."""


def publish_batch(
    partition: int,
    seq: int,
    refs: Sequence[RunRef],
    tenant_of: Mapping[RunRef, str],
    weights: Mapping[str, int],
) -> PublishBatch:
    """The message of ``refs`` with each run's tenant and the tenants' weights (an
    executor shares its call slots by them before it leases: docs/design.md section 7,
    "Flow control")."""
    tenants = tuple(tenant_of[ref] for ref in refs)
    mine = {tenant: weights[tenant] for tenant in set(tenants) if tenant in weights}
    return PublishBatch(partition, seq, tuple(refs), tenants, mine)


def chunks(by_partition: dict[int, list[RunRef]]) -> list[tuple[int, list[RunRef]]]:
    """One publish per 500 runs of any partitions (partitions in order), each named by
    its first run's partition.

    Not one per partition: a herd spreads over every partition, so a dispatch of 100 runs
    made about 100 messages of one run each, and an executor with one free slot fetches
    one message at a time: those runs reached it a fetch and a LeaseRuns round trip
    apiece, 0.56 s for 100 of them behind another tenant's herd (docs/design.md section
    7, "Flow control")."""
    flat = [(partition, ref) for partition, refs in sorted(by_partition.items()) for ref in refs]
    return [
        (flat[i][0], [ref for _, ref in flat[i : i + MAX_RUNS_PER_MESSAGE]])
        for i in range(0, len(flat), MAX_RUNS_PER_MESSAGE)
    ]
