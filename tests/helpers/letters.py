"""A dead run's letter as the scheduler's outbox reads it, for tests of what goes on
SUNDIAL_DEAD."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from sundial.run import ErrorClass, HttpTarget, RunKind, RunRef
from sundial.scheduler.model import DeadLetterRun

AT = datetime(2030, 1, 1, tzinfo=UTC)


def dead_letter_run(
    tenant_id: str = "acme",
    ref: RunRef | None = None,
    *,
    payload: bytes = b"{}",
    headers: dict[str, str] | None = None,
) -> DeadLetterRun:
    """A run of ``tenant_id`` that died at its third attempt (``ref``: a new run at
    :data:`AT`), with ``payload`` and its HTTP target's ``headers``."""
    return DeadLetterRun(
        ref=ref or RunRef(uuid.uuid4(), AT),
        tenant_id=tenant_id,
        kind=RunKind.SCHEDULED,
        attempt=3,
        executor_id="ex-1",
        started_at=AT,
        finished_at=AT,
        last_error="HTTP 500",
        error_class=ErrorClass.RETRYABLE,
        job_name="report",
        target=HttpTarget("https://example.com/hook", headers=headers or {}),
        payload=payload,
        labels={"team": "billing"},
    )
