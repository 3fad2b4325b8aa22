"""Shared pieces of the store: the query file, error translation, records, row mapping."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sundial.api.model import (
    ApiToken,
    Job,
    JobSpec,
    JobStats,
    Role,
    Run,
    RunKind,
    RunStatus,
    SigningSecretInfo,
    Tenant,
    target_from_doc,
)
from sundial.core.db import Queries, translate_db_errors
from sundial.run import (
    policies_from_json,
    schedule_from_json,
)

queries = Queries.from_package("sundial.api")

_CONSTRAINTS = {
    "jobs_tenant_id_name_key": "name: a job with this name already exists",
    "tenants_pkey": "tenant.tenant_id: a tenant with this id already exists",
}
translate = translate_db_errors(constraint_messages=_CONSTRAINTS)


class RequestTaken(Exception):
    """A live idempotency record exists for the key being claimed (a concurrent or
    earlier identical request won): the caller re-reads it instead of writing."""


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """What an earlier request with the same request_id did."""

    request_hash: bytes
    job_id: uuid.UUID | None
    job_ids: Sequence[uuid.UUID]
    scheduled_at: datetime | None


@dataclass(frozen=True, slots=True)
class RequestClaim:
    """An idempotency record to write in the same transaction as the work."""

    method: str
    request_id: str
    request_hash: bytes
    expired_before: datetime
    """A record of the same key created before this is expired and may be replaced."""


@dataclass(frozen=True, slots=True)
class TokenRecord:
    """An api_tokens row as authentication needs it."""

    token_id: uuid.UUID
    tenant_id: str | None
    role: Role
    usable: bool
    last_used_at: datetime | None


# --- row mapping --------------------------------------------------------------------------


def job_from_row(row: Mapping[str, Any]) -> Job:
    spec = JobSpec(
        name=row["name"],
        schedule=schedule_from_json(row["schedule"]),
        target=target_from_doc(row["target"]),
        description=row["description"],
        payload=bytes(row["payload"]),
        policies=policies_from_json(row["policies"]),
        labels=dict(row["labels"]),
        paused=row["paused"],
        pause_note=row["pause_note"],
    )
    lateness_ms = row["last_lateness_ms"]
    stats = JobStats(
        last_fire_time=row["last_fire_at"],
        last_success_time=row["last_success_at"],
        last_failure_time=row["last_failure_at"],
        succeeded=row["succeeded_count"] or 0,
        failed=row["dead_count"] or 0,
        skipped_misfires=row["missed_count"] or 0,
        skipped_overlaps=row["skipped_count"] or 0,
        cancelled=row["cancelled_count"] or 0,
        last_lateness=None if lateness_ms is None else timedelta(milliseconds=lateness_ms),
        scheduled_occurrences=row["fired_count"],
    )
    return Job(
        job_id=row["job_id"],
        tenant_id=row["tenant_id"],
        spec=spec,
        partition_id=row["partition_id"],
        next_run_at=row["next_run_at"],
        version=row["version"],
        create_time=row["created_at"],
        update_time=row["updated_at"],
        stats=stats,
    )


def run_from_row(row: Mapping[str, Any]) -> Run:
    lateness_ms = row["lateness_ms"]
    return Run(
        job_id=row["job_id"],
        scheduled_at=row["scheduled_at"],
        kind=RunKind(row["kind"]),
        status=RunStatus(row["status"]),
        attempt=row["attempt"],
        lease_until=row["lease_until"],
        executor_id=row["executor_id"] or "",
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        lateness=None if lateness_ms is None else timedelta(milliseconds=lateness_ms),
        last_error=row["last_error"] or "",
        error_class=row["error_class"] or "",
        skip_reason=row["skip_reason"] or "",
        next_attempt_at=row["next_attempt_at"],
        create_time=row["created_at"],
        cancel_requested=row["cancel_requested"],
        replay_count=row["replay_count"],
        last_http_status=row["last_http_status"] or 0,
        last_grpc_code=row["last_grpc_code"],
    )


def token_from_row(row: Mapping[str, Any]) -> ApiToken:
    return ApiToken(
        token_id=row["token_id"],
        tenant_id=row["tenant_id"],
        role=Role(row["role"]),
        description=row["description"],
        prefix=row["prefix"],
        create_time=row["created_at"],
        expire_time=row["expires_at"],
        last_used_time=row["last_used_at"],
        revoke_time=row["revoked_at"],
    )


def tenant_from_row(row: Mapping[str, Any], secrets: Sequence[SigningSecretInfo]) -> Tenant:
    return Tenant(
        tenant_id=row["tenant_id"],
        display_name=row["name"],
        max_jobs=row["max_jobs"],
        max_concurrent_runs=row["max_concurrent_runs"],
        create_time=row["created_at"],
        update_time=row["updated_at"],
        signing_secrets=tuple(secrets),
    )
