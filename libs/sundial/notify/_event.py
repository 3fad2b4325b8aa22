"""What happened to a job that a tenant may want to hear about."""

from __future__ import annotations

import enum
import json
import uuid
from dataclasses import dataclass
from datetime import timedelta

__all__ = ["EventKind", "JobEvent", "dead_run", "late_run", "misfire_skipped"]


class EventKind(enum.Enum):
    """The kinds a channel subscribes to; each value is the text stored in
    ``notification_channels.event_kinds`` and ``notification_events.kind``, and maps to
    ``NOTIFICATION_EVENT_KIND_<NAME>`` on the wire."""

    DEAD_RUN = "dead_run"
    AUTO_PAUSED = "auto_paused"
    MISFIRE_SKIPPED = "misfire_skipped"
    LATE_RUN = "late_run"
    RECOVERED = "recovered"


@dataclass(frozen=True, slots=True)
class JobEvent:
    """One event about a job, as the emitters hand it to the outbox.

    The outbox adds the job's id and name to ``detail`` and writes one row per channel of
    the job's tenant that wants ``kind`` (none when no channel does)."""

    job_id: uuid.UUID
    kind: EventKind
    detail: dict[str, str | int]

    def detail_json(self) -> str:
        """``detail`` as the JSON text the outbox query takes."""
        return json.dumps(self.detail, separators=(",", ":"), sort_keys=True)


def dead_run(
    job_id: uuid.UUID, run_key: str, error: str | None, error_class: str | None
) -> JobEvent:
    """A run of ``job_id`` ended DEAD with ``error``."""
    return JobEvent(
        job_id,
        EventKind.DEAD_RUN,
        {"run_key": run_key, "error": (error or "")[:1000], "error_class": error_class or ""},
    )


def recovered(job_id: uuid.UUID, run_key: str, dead_in_a_row: int) -> JobEvent:
    """A run of ``job_id`` succeeded after ``dead_in_a_row`` runs in a row had died (each
    of them told as a DEAD_RUN): the first success after that streak."""
    return JobEvent(
        job_id, EventKind.RECOVERED, {"run_key": run_key, "dead_in_a_row": dead_in_a_row}
    )


def misfire_skipped(job_id: uuid.UUID, missed: int) -> JobEvent:
    """The dispatcher dropped ``missed`` occurrences of ``job_id`` as misfires."""
    return JobEvent(job_id, EventKind.MISFIRE_SKIPPED, {"missed": missed})


def late_run(
    job_id: uuid.UUID, run_key: str, lateness: timedelta, threshold: timedelta
) -> JobEvent:
    """A run of ``job_id`` started ``lateness`` after its due time, beyond ``threshold``."""
    return JobEvent(
        job_id,
        EventKind.LATE_RUN,
        {
            "run_key": run_key,
            "lateness_ms": lateness // timedelta(milliseconds=1),
            "threshold_ms": threshold // timedelta(milliseconds=1),
        },
    )
