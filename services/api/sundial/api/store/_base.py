"""Shared pieces of the store: the query file, error translation, records, row mapping."""

from __future__ import annotations

import enum
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeVar

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from sundial.api.model import (
    ApiToken,
    Job,
    JobStats,
    Role,
    Run,
    SigningSecretInfo,
    Tenant,
)
from sundial.core.auth import ALL_SCOPES, Scope
from sundial.core.db import Queries, translate_db_errors
from sundial.core.errors import AlreadyExists
from sundial.job import (
    calendars_from_json,
    spec_from_columns,
)
from sundial.run import ErrorClass, RunKind, RunStatus, SkipReason

queries = Queries.from_package("sundial.api", shared=[("sundial.run", "cancel.sql")])

CLIENT_JOB_ID_INDEX = "jobs_tenant_client_job_id_key"
NAME_INDEX = "jobs_tenant_id_name_key"
_CONSTRAINTS = {
    NAME_INDEX: "name: a job with this name already exists",
    CLIENT_JOB_ID_INDEX: "job_id: a job with this id already exists",
    "tenants_pkey": "tenant.tenant_id: a tenant with this id already exists",
    "calendars_pkey": "calendar.name: a calendar with this name already exists",
    "tenant_secrets_pkey": "secret.name: a secret with this name already exists",
}
translate = translate_db_errors(constraint_messages=_CONSTRAINTS)

E = TypeVar("E", bound=enum.Enum)

Row = asyncpg.Record
"""A result row; only the store reads one (the managers get domain values)."""
Conn = asyncpg.Connection | PoolConnectionProxy
"""A connection: a bare one, or one acquired from the pool (a proxy to it)."""


def one(row: Row | None) -> Row:
    """The row a statement always returns (INSERT ... RETURNING, a row locked earlier in
    the transaction): None there is a bug, not a result."""
    if row is None:
        raise AssertionError("the statement returned no row")
    return row


class RequestTaken(Exception):
    """A live idempotency record exists for the key being claimed (a concurrent or
    earlier identical request won): the caller re-reads it instead of writing."""


class JobIdTaken(AlreadyExists):
    """A client job id is taken: the tenant has a job with it (the unique index said so,
    also for a create that committed meanwhile). ApplyJob takes it as "a concurrent
    apply created it" and compares with that job instead."""

    def __init__(self, field: str, client_id: str | None) -> None:
        named = f" {client_id!r}" if client_id else ""
        super().__init__(f"{field}: a job with id{named} already exists")


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """What an earlier request with the same request_id did."""

    request_hash: bytes
    job_id: uuid.UUID | None
    job_ids: Sequence[uuid.UUID]
    scheduled_at: datetime | None
    outcome: str | None = None
    """ApplyJob's outcome (``ApplyOutcome`` value); None for the other methods."""


@dataclass(frozen=True, slots=True)
class RequestClaim:
    """An idempotency record to write in the same transaction as the work."""

    method: str
    request_id: str
    request_hash: bytes
    expired_before: datetime
    """A record of the same key created before this is expired and may be replaced."""
    outcome: str | None = None
    """ApplyJob's outcome, recorded with the write that had it."""


# --- row mapping --------------------------------------------------------------------------


def job_from_row(row: Row) -> Job:
    spec = spec_from_columns(row)
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
        client_id=row["client_job_id"],
        calendars=calendars_from_json(row["calendars"]),
        pause_until=row["pause_until"],
    )


def _optional(kind: type[E], text: str | None) -> E | None:
    """A nullable vocabulary column; text the API does not know reads as None (shown as
    UNSPECIFIED) rather than failing the read: the scheduler and executor write these
    columns, and during a rolling upgrade a newer one may write a value this API predates.
    """
    try:
        return kind(text) if text else None
    except ValueError:
        return None


def run_from_row(row: Row) -> Run:
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
        error_class=_optional(ErrorClass, row["error_class"]),
        skip_reason=_optional(SkipReason, row["skip_reason"]),
        next_attempt_at=row["next_attempt_at"],
        create_time=row["created_at"],
        cancel_requested=row["cancel_requested"],
        replay_count=row["replay_count"],
        last_http_status=row["last_http_status"] or 0,
        last_grpc_code=row["last_grpc_code"],
    )


def token_from_row(row: Row) -> ApiToken:
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
        scopes=scopes_of(Role(row["role"]), row["scopes"]),
    )


def scopes_of(role: Role, stored: Sequence[str] | None) -> tuple[Scope, ...]:
    """A token's scopes, sorted: every scope for a TENANT token stored without (NULL),
    none for the other roles."""
    if role is not Role.TENANT:
        return ()
    held = ALL_SCOPES if stored is None else {Scope(s) for s in stored}
    return tuple(s for s in Scope if s in held)


def tenant_from_row(row: Row, secrets: Sequence[SigningSecretInfo]) -> Tenant:
    return Tenant(
        tenant_id=row["tenant_id"],
        display_name=row["name"],
        max_jobs=row["max_jobs"],
        max_concurrent_runs=row["max_concurrent_runs"],
        create_time=row["created_at"],
        update_time=row["updated_at"],
        signing_secrets=tuple(secrets),
        max_calendars=row["max_calendars"],
        max_waiting_requested_runs=row["max_waiting_requested_runs"],
        revisions_per_job=row["revisions_per_job"],
        fair_weight=row["fair_weight"],
    )
