"""Cancelling a run: one transition, whoever asks (CancelRun, DeleteJob, CANCEL_OTHER).

The transition is written by SQL, a whole job's runs in one statement
(``cancel_run``, ``cancel_runs_of_job`` in the API's queries, ``cancel_other_runs`` in
the scheduler's), so it is stated here as the columns every one of those statements
writes; ``tests/integration/api/test_cancel.py`` runs each statement on a run of every
status and compares the row with :func:`cancel`, and ``tests/unit/run/test_sql_statuses.py``
checks the status lists of both query files against this vocabulary.

- A ``pending``, ``queued`` or ``retrying`` run (:data:`CANCELLED_AT_ONCE`) ends
  ``cancelled`` at once: finished now, nothing left to check (``check_at``,
  ``next_attempt_at`` cleared), error class ``cancelled`` (as a cancelled attempt's,
  :func:`~sundial.run.complete`), no skip reason, the reason as its last error.
- A ``running`` run is asked to stop (``cancel_requested``, the reason as its last error
  until its outcome replaces it); it keeps its lease and its check. Its executor learns
  it through its heartbeat and reports it ``CANCELLED`` (or the lease lapses:
  :func:`~sundial.run.lease_expiry`), and the ledger ends it.
- An ended run is left alone (:func:`cancel` returns None).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sundial.run._vocab import CANCELLED_AT_ONCE, ErrorClass, RunStatus


@dataclass(frozen=True, slots=True)
class Cancel:
    """The columns a cancel writes on one run (every other column is kept).

    ``finished_at``, ``check_at``, ``next_attempt_at``, ``error_class`` and
    ``skip_reason`` are written only when ``status`` is CANCELLED (a run asked to stop
    keeps them).
    """

    status: RunStatus
    cancel_requested: bool
    last_error: str
    updated_at: datetime
    finished_at: datetime | None = None
    check_at: None = None
    next_attempt_at: None = None
    error_class: ErrorClass | None = None
    skip_reason: None = None


def cancel(status: RunStatus, reason: str, now: datetime) -> Cancel | None:
    """What cancelling a run in ``status`` at ``now`` writes; None: nothing (it ended).

    Args:
        reason: Why, stored as ``last_error`` (CancelRun's reason, or the word
            ``cancelled``; DeleteJob's and CANCEL_OTHER's fixed texts).
    """
    if status in CANCELLED_AT_ONCE:
        return Cancel(
            status=RunStatus.CANCELLED,
            cancel_requested=False,
            last_error=reason,
            updated_at=now,
            finished_at=now,
            error_class=ErrorClass.CANCELLED,
        )
    if status is RunStatus.RUNNING:
        return Cancel(
            status=RunStatus.RUNNING, cancel_requested=True, last_error=reason, updated_at=now
        )
    return None
