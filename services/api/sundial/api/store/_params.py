"""The parameters of job writes: the documents as JSON text (each distinct one encoded
once), who writes, and insert_jobs' parameters by name."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sundial.api.model import (
    NewJob,
)
from sundial.core.auth import current_credential
from sundial.core.db import json_text
from sundial.core.logging import request_id_var
from sundial.job import (
    calendars_to_json,
    policies_to_json,
    schedule_to_json,
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
    """``encode`` of every value, once per distinct value (a batch of 1,000 jobs shares a
    few schedules and policies; an unhashable value is encoded on its own)."""
    done: dict[Any, Any] = {}
    out = []
    for value in values:
        try:
            if value not in done:
                done[value] = encode(value)
            out.append(done[value])
        except TypeError:
            out.append(encode(value))
    return out


def _schedule_text(schedule: Schedule) -> str:
    return json_text(schedule_to_json(schedule))


def _target_text(target: Any) -> str:
    return json_text(target_to_json(target))


def _policies_text(policies: Any) -> str:
    return json_text(policies_to_json(policies))


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
    """insert_jobs' parameters by name: one entry per job in each list (the ``unnest``
    arrays), built once from the jobs; :meth:`args` lays them out as asyncpg takes them."""

    tenant_id: str
    job_ids: list[uuid.UUID]
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
            labels=[json_text(spec.labels) if spec.labels else "{}" for spec in specs],
            descriptions=[spec.description for spec in specs],
            pause_notes=[spec.pause_note for spec in specs],
            client_job_ids=[job.client_id for job in jobs],
            now=now,
            traceparent=traceparent or None,
            changed_by=changed_by,
            request_id=request_id,
            calendars=[_calendars_text(job.calendars) for job in jobs],
        )

    def args(self) -> tuple[Any, ...]:
        """The positional parameters of insert_jobs (queries.sql names each)."""
        return (
            self.tenant_id,  # $1
            self.job_ids,  # $2
            self.names,  # $3
            self.partition_ids,  # $4
            self.next_run_ats,  # $5
            self.paused,  # $6
            self.schedules,  # $7
            self.targets,  # $8
            self.policies,  # $9
            self.payloads,  # $10
            self.labels,  # $11
            self.descriptions,  # $12
            self.pause_notes,  # $13
            self.client_job_ids,  # $14
            self.now,  # $15
            len(self.job_ids),  # $16: how many jobs (the quota check)
            self.traceparent,  # $17
            self.changed_by,  # $18
            self.request_id,  # $19
            self.calendars,  # $20
        )
