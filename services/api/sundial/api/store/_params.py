"""The parameters of job writes: the documents as JSON text (each distinct one encoded
once), who writes, and the named parameters of insert_jobs, update_job and
claim_request.

Each class holds one named query's parameters (queries.sql ``:name``) as its fields,
and ``queries.bind`` lays them out by name: a field the query does not read, or a
parameter no field holds, fails the first call and tests/unit/api/test_job_queries.py."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sundial.api.model import (
    NewJob,
)
from sundial.core.auth import current_credential
from sundial.core.db import json_text
from sundial.core.logging import request_id_var
from sundial.core.memo import Memo, per_object
from sundial.job import (
    JobSpec,
    calendars_to_json,
    policies_to_json,
    schedule_to_json,
    spec_to_columns,
    target_to_json,
)
from sundial.schedule import Calendar, Schedule


def calendars_doc(calendars: Sequence[Calendar]) -> list[dict[str, Any]] | None:
    """``job_definitions.calendars`` (NULL for a schedule naming none: migration 0015)."""
    return calendars_to_json(list(calendars)) if calendars else None


def _calendars_text(calendars: Sequence[Calendar]) -> str | None:
    """:func:`calendars_doc` as JSON text, for a ``text[]`` parameter of many jobs."""
    doc = calendars_doc(calendars)
    return None if doc is None else json.dumps(doc)


def distinct_calendars(calendars: Sequence[Calendar]) -> list[Calendar]:
    return list({c.name: c for c in calendars}.values())


def _each(encode: Callable[[Any], Any], values: Sequence[Any]) -> list[Any]:
    """``encode`` of every value, once per value object (a batch of 1,000 jobs shares a
    few schedule, target and policy objects: sundial.core.memo)."""
    memo: Memo = {}
    return [per_object(memo, value, encode) for value in values]


def _schedule_text(schedule: Schedule) -> str:
    return json_text(schedule_to_json(schedule))


def _target_text(target: Any) -> str:
    return json_text(target_to_json(target))


def _policies_text(policies: Any) -> str:
    return json_text(policies_to_json(policies))


_STRING = json.encoder.encode_basestring_ascii


def labels_text(labels: Mapping[str, str]) -> str:
    """:func:`~sundial.core.db.json_text` of a labels map, written directly (a batch
    encodes one per job; the encoder's own setup per call cost more than the text)."""
    return (
        "{" + ",".join([_STRING(key) + ":" + _STRING(value) for key, value in labels.items()]) + "}"
    )


def writer() -> tuple[str | None, str | None]:
    """Who is writing (the caller's token id; ``admin`` for the bootstrap token) and the
    RPC's request id, recorded with the job's revision (migration 0012)."""
    credential = current_credential()
    actor = None
    if credential is not None:
        actor = str(credential.token_id) if credential.token_id is not None else "admin"
    return actor, request_id_var.get()


@dataclass(frozen=True, slots=True)
class InsertJobs:
    """insert_jobs' parameters: one entry per job in each list (the ``unnest`` arrays),
    built once from the jobs."""

    tenant_id: str
    job_ids: list[uuid.UUID]
    """Also how many jobs the quota check counts."""
    names: list[str]
    partition_ids: list[int]
    next_run_ats: list[datetime | None]
    paused: list[bool]
    schedules: list[str]
    """The JSON documents as text (sundial.core.db.json_text): each distinct one encoded
    once, as are ``targets`` and ``policies``."""
    targets: list[str]
    policies: list[str]
    payloads: list[bytes]
    labels: list[str]
    descriptions: list[str]
    pause_notes: list[str]
    client_job_ids: list[str | None]
    now: datetime
    traceparent: str | None
    changed_by: str | None
    request_id: str | None
    calendars: list[str | None]
    """The referenced calendars' contents per job as JSON text (None: it names none)."""

    @classmethod
    def of(
        cls, tenant_id: str, jobs: Sequence[NewJob], now: datetime, traceparent: str
    ) -> InsertJobs:
        """The parameters inserting ``jobs``, written by the caller (:func:`writer`)."""
        specs = [job.spec for job in jobs]
        changed_by, request_id = writer()
        return cls(
            tenant_id=tenant_id,
            job_ids=[job.job_id for job in jobs],
            names=[spec.name for spec in specs],
            partition_ids=[job.partition_id for job in jobs],
            next_run_ats=[job.next_run_at for job in jobs],
            paused=[spec.paused for spec in specs],
            schedules=_each(_schedule_text, [spec.schedule for spec in specs]),
            targets=_each(_target_text, [spec.target for spec in specs]),
            policies=_each(_policies_text, [spec.policies for spec in specs]),
            payloads=[spec.payload for spec in specs],
            labels=[labels_text(spec.labels) for spec in specs],
            descriptions=[spec.description for spec in specs],
            pause_notes=[spec.pause_note for spec in specs],
            client_job_ids=[job.client_id for job in jobs],
            now=now,
            traceparent=traceparent or None,
            changed_by=changed_by,
            request_id=request_id,
            calendars=[_calendars_text(job.calendars) for job in jobs],
        )


@dataclass(frozen=True, slots=True)
class UpdateJob:
    """update_job's parameters: the job's new definition, written if the job is still
    at ``read_version``."""

    job_id: uuid.UUID
    tenant_id: str
    read_version: int
    name: str
    reschedule: bool
    """Whether to write ``next_run_at`` (else the job keeps its own)."""
    next_run_at: datetime | None
    now: datetime
    schedule: dict[str, Any]
    """The JSON documents as JSON-ready values (the pool's jsonb codec encodes them), as
    are ``target``, ``policies``, ``labels`` and ``calendars``."""
    target: dict[str, Any]
    policies: dict[str, Any]
    payload: bytes
    labels: dict[str, str]
    description: str
    changed_by: str | None
    request_id: str | None
    calendars: list[dict[str, Any]] | None
    """The contents of the calendars the schedule names (None: it names none)."""

    @classmethod
    def of(
        cls,
        tenant_id: str,
        job_id: uuid.UUID,
        spec: JobSpec,
        *,
        read_version: int,
        reschedule: bool,
        next_run_at: datetime | None,
        now: datetime,
        calendars: Sequence[Calendar],
    ) -> UpdateJob:
        """The parameters writing ``spec`` over the job, by the caller (:func:`writer`)."""
        doc = spec_to_columns(spec)
        changed_by, request_id = writer()
        return cls(
            job_id=job_id,
            tenant_id=tenant_id,
            read_version=read_version,
            name=doc["name"],
            reschedule=reschedule,
            next_run_at=next_run_at,
            now=now,
            schedule=doc["schedule"],
            target=doc["target"],
            policies=doc["policies"],
            payload=doc["payload"],
            labels=doc["labels"],
            description=doc["description"],
            changed_by=changed_by,
            request_id=request_id,
            calendars=calendars_doc(calendars),
        )


@dataclass(frozen=True, slots=True)
class ClaimRequest:
    """claim_request's parameters: an idempotency record claimed with the work it
    records (store._requests)."""

    tenant_id: str
    method: str
    request_id: str
    request_hash: bytes
    job_id: uuid.UUID | None
    """The job the call wrote (a single-job call), or None."""
    job_ids: list[uuid.UUID] | None
    """The jobs the call wrote (a batch), or None."""
    scheduled_at: datetime | None
    """The run the call made (TriggerJob), or None."""
    now: datetime
    expired_before: datetime
    """A record created before this is expired: taken over."""
    outcome: str | None


NAMED_PARAMS: dict[str, type] = {
    "insert_jobs": InsertJobs,
    "update_job": UpdateJob,
    "claim_request": ClaimRequest,
}
"""Every named query of queries.sql and the class that holds its parameters."""
