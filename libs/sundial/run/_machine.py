"""The run state machine, as pure functions: no I/O, no protobuf, no clock of its own.

Every state change of a run that is not a plain insert is decided here and written by a
store (``sundial.scheduler.store``): the ledger asks the store for the locked
:class:`RunState` of each run, calls these rules, and hands the store the result to
write in the same transaction. The sweeper calls :func:`lease_expiry` on runs whose
lease lapsed. ``tests/unit/run/test_machine.py`` covers every transition in one table;
``tests/helpers/ledger_double.py`` is built on the same functions.

The transitions (docs/design.md, "The life of a run")::

    pending --release--> queued --lease--> running --SUCCEEDED--> succeeded
    retrying --lease (due)--> running      running --retryable, attempts left--> retrying
    running --FAILED_FINAL, or retryable on the last attempt--> dead
    running --any outcome but success, cancel requested--> cancelled
    running --lease expired--> queued | dead (last attempt) | cancelled (cancel requested)
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sundial.run._key import RunRef
from sundial.run._vocab import (
    FINISHED_STATUSES,
    ErrorClass,
    FenceReason,
    OutcomeStatus,
    RejectReason,
    RunStatus,
)

__all__ = [
    "MAX_ERROR_BYTES",
    "MAX_RETRY_AFTER",
    "Completion",
    "Fenced",
    "Grant",
    "Outcome",
    "Rejection",
    "RetryPolicy",
    "RunState",
    "Transition",
    "backoff",
    "complete",
    "decide_completions",
    "decide_leases",
    "due_check",
    "fence",
    "is_last_attempt",
    "lease_expiry",
    "lease_verdict",
    "truncate_error",
]

MAX_ERROR_BYTES = 4096
"""Longest error text kept (UTF-8 bytes; cut on a character boundary)."""

MAX_RETRY_AFTER = timedelta(hours=24)
"""Longest Retry-After a target can impose on a retry."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """A job's retry policy (job.proto ``RetryPolicy``, defaults filled in)."""

    max_attempts: int = 5
    """Attempts in all, the first included: the ``max_attempts``-th failure is final."""
    base_delay: timedelta = timedelta(seconds=10)
    max_delay: timedelta = timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class RunState:
    """A run as its row holds it, locked by the transaction that decides about it."""

    ref: RunRef
    status: RunStatus
    attempt: int = 0
    """Grants so far: the fencing token of the current (or last) attempt."""
    attempt_base: int = 0
    """``attempt`` when the run was last (re)queued by ReplayRun: failures are counted
    from here, so a replayed run gets its whole retry budget again."""
    executor_id: str | None = None
    lease_id: str | None = None
    """The current lease's id (drawn with each new attempt); None before the first
    grant."""
    lease_token_id: str | None = None
    """The credential (token id) the current lease was granted to."""
    lease_until: datetime | None = None
    next_attempt_at: datetime | None = None
    cancel_requested: bool = False
    job_exists: bool = True
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    tenant_id: str = ""
    max_concurrent_runs: int | None = None
    """The tenant's cap on RUNNING runs (None: not known to this caller, not enforced)."""
    concurrency_key: str = ""
    """The job's concurrency key (Policies.flow); empty: none."""
    key_max_running: int | None = None
    """The cap on RUNNING runs of ``concurrency_key`` (FlowLimit.max_running; None: no
    limit, or not known to this caller)."""

    @property
    def failures(self) -> int:
        """Attempts granted since the last replay: each one that ended counts as failed."""
        return self.attempt - self.attempt_base


def is_last_attempt(failures: int, retry: RetryPolicy) -> bool:
    """Whether ``failures`` failed attempts use up the retry budget."""
    return failures >= retry.max_attempts


def backoff(retry: RetryPolicy, failures: int, rng: random.Random) -> timedelta:
    """Full-jitter delay after the ``failures``-th failed attempt (1-based):
    ``random(0, min(max_delay, base_delay * 2^failures))``."""
    # In integer microseconds: ``base_delay * 2**failures`` as a timedelta overflows
    # (OverflowError) from 2^35 hours on, well inside max_attempts' 1-100, although the
    # cap is max_delay long before that. Same float as ``cap.total_seconds()`` otherwise.
    micros = timedelta(microseconds=1)
    cap_us = min(retry.max_delay // micros, (retry.base_delay // micros) * 2**failures)
    return timedelta(seconds=rng.uniform(0, cap_us / 1_000_000))


def truncate_error(text: str) -> str:
    """``text`` cut to :data:`MAX_ERROR_BYTES` UTF-8 bytes on a character boundary."""
    return text.encode()[:MAX_ERROR_BYTES].decode(errors="ignore")


# --- leasing --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Rejection:
    """A lease refused, with why and when to ask again (NOT_DUE, TENANT_AT_CAPACITY)."""

    reason: RejectReason
    detail: str
    retry_after: timedelta | None = None


@dataclass(frozen=True, slots=True)
class Grant:
    """A lease to write: a new attempt, or (``regrant``) the caller's own live lease
    extended at the same attempt."""

    ref: RunRef
    regrant: bool = False


def lease_verdict(state: RunState | None, now: datetime) -> Rejection | None:
    """Whether a run can be leased now, ignoring who asks and the tenant's cap.

    A run is leasable when QUEUED, RETRYING and due, or RUNNING with an expired lease
    the sweeper has not reclaimed yet (that expired attempt counts as failed, so on the
    last attempt the run is over: FINISHED).
    """
    if state is None or not state.job_exists:
        return Rejection(RejectReason.NOT_FOUND, "no such run")
    status = state.status
    if status in FINISHED_STATUSES:
        return Rejection(RejectReason.FINISHED, f"run is {status.name}")
    if status is RunStatus.CANCELLED:
        return Rejection(RejectReason.CANCELLED, "run is CANCELLED")
    if state.cancel_requested:
        # Cancelled while its lease expired (or before a retry): never run it again.
        return Rejection(RejectReason.CANCELLED, "run cancellation requested")
    if status is RunStatus.PENDING:
        return Rejection(RejectReason.NOT_DUE, "run waits behind an earlier run")
    if status is RunStatus.RETRYING and state.next_attempt_at and state.next_attempt_at > now:
        return Rejection(RejectReason.NOT_DUE, "retry not due yet", state.next_attempt_at - now)
    if status is RunStatus.RUNNING and state.lease_until and state.lease_until > now:
        return Rejection(RejectReason.LEASED_ELSEWHERE, "run is leased")
    if status is RunStatus.RUNNING and is_last_attempt(state.failures, state.retry):
        return Rejection(
            RejectReason.FINISHED, "lease expired on the last attempt: the run is dead"
        )
    return None


def decide_leases(
    refs: Sequence[RunRef],
    states: Mapping[RunRef, RunState],
    *,
    executor_id: str,
    token_id: str,
    now: datetime,
    running: Mapping[str, int],
    capacity_retry: timedelta,
    key_running: Mapping[tuple[str, str], int] | None = None,
) -> list[Grant | Rejection]:
    """One LeaseRuns call's answer for each of ``refs``, in order.

    Args:
        refs: The runs asked for (a run may appear twice: the second is a duplicate).
        states: The locked states of those that exist.
        executor_id: The caller.
        token_id: The caller's credential: a live lease is re-granted (lease id and all)
            only to the same executor id under the same credential.
        now: The transaction's "now".
        running: RUNNING runs per tenant before this call (the cap counts them).
        capacity_retry: retry_after of a TENANT_AT_CAPACITY or KEY_AT_CAPACITY rejection.
        key_running: RUNNING runs per (tenant, concurrency key) with a limit, before
            this call.
    """
    counts = dict(running)
    key_counts = dict(key_running or {})
    decided: set[RunRef] = set()
    answers: list[Grant | Rejection] = []
    for ref in refs:
        state = states.get(ref)
        rejection = lease_verdict(state, now)
        if ref in decided:
            answers.append(Rejection(RejectReason.LEASED_ELSEWHERE, "duplicate"))
            continue
        if (
            rejection is not None
            and rejection.reason is RejectReason.LEASED_ELSEWHERE
            and state is not None
            and state.executor_id == executor_id
            and (state.lease_token_id or "") == token_id
        ):
            # Idempotent re-grant: this executor already holds the live lease, so this is
            # a retried LeaseRuns whose answer was lost (deadline, broken connection)
            # after the grant committed, or a redelivery of a message it leased.
            # Answering LEASED_ELSEWHERE would leave a granted run nobody calls until its
            # lease expires as a failed attempt (DEAD on the last one, the target never
            # called). The same attempt is granted again with its lease extended: no new
            # fencing token, no capacity counted twice.
            decided.add(ref)
            answers.append(Grant(ref, regrant=True))
            continue
        if rejection is None and state is not None and state.status is not RunStatus.RUNNING:
            tenant = state.tenant_id
            cap = state.max_concurrent_runs
            key = (tenant, state.concurrency_key)
            if cap is not None and counts.get(tenant, 0) >= cap:
                rejection = Rejection(
                    RejectReason.TENANT_AT_CAPACITY,
                    f"tenant has {counts.get(tenant, 0)} runs running",
                    capacity_retry,
                )
            elif state.key_max_running is not None and key_counts.get(key, 0) >= (
                state.key_max_running
            ):
                rejection = Rejection(
                    RejectReason.KEY_AT_CAPACITY,
                    f"concurrency key has {key_counts.get(key, 0)} runs running",
                    capacity_retry,
                )
            else:
                counts[tenant] = counts.get(tenant, 0) + 1
                if state.key_max_running is not None:
                    key_counts[key] = key_counts.get(key, 0) + 1
        if rejection is not None:
            answers.append(rejection)
            continue
        decided.add(ref)
        answers.append(Grant(ref))
    return answers


# --- completing -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one attempt ended, as its executor reports it."""

    status: OutcomeStatus
    started_at: datetime | None = None
    finished_at: datetime | None = None
    error: str = ""
    error_class: ErrorClass | None = None
    retry_after: timedelta | None = None
    """The target's Retry-After: the retry waits at least this long."""
    http_status: int | None = None
    grpc_code: int | None = None

    @property
    def failed(self) -> bool:
        """True unless the attempt succeeded or was cancelled."""
        return self.status not in (OutcomeStatus.SUCCEEDED, OutcomeStatus.CANCELLED)


@dataclass(frozen=True, slots=True)
class Completion:
    """An outcome addressed to the ledger: the run, its attempt (fencing token), how it
    ended."""

    ref: RunRef
    attempt: int
    outcome: Outcome
    lease_id: str = ""
    """The lease the outcome is reported under (from the grant): only its holder's
    report is written."""


@dataclass(frozen=True, slots=True)
class Transition:
    """A run's new state, as a store writes it."""

    ref: RunRef
    status: RunStatus
    check_at: datetime | None
    """When the scheduler looks at the run again: a retry's due time, a dead run's
    dead-letter outbox entry, a republish; None when nothing is left to do."""
    next_attempt_at: datetime | None = None
    finished_at: datetime | None = None
    last_error: str | None = None
    error_class: ErrorClass | None = None
    http_status: int | None = None
    grpc_code: int | None = None
    republish: bool = False
    """The run goes back to QUEUED and needs a new dispatch sequence (sweeper)."""


def holds(state: RunState, attempt: int, *, executor_id: str, lease_id: str) -> bool:
    """Whether ``executor_id`` holds the lease ``lease_id`` on ``attempt`` of the run.

    A lease is (attempt, executor_id, lease_id). The attempt alone is a small integer
    anyone can guess, and the executor id is chosen by the caller; the lease id is 122
    random bits only the grant's receiver knows. A row leased before lease ids existed
    has none: its holder reports an empty one.
    """
    return (
        state.attempt == attempt
        and state.executor_id == executor_id
        and (state.lease_id or "") == lease_id
    )


def fence(
    state: RunState | None, attempt: int, *, executor_id: str, lease_id: str
) -> FenceReason | None:
    """Whether an outcome reported for ``attempt`` by ``executor_id`` under ``lease_id``
    may be written (None) or is fenced."""
    if state is None:
        return FenceReason.NOT_FOUND
    if state.attempt != attempt:
        return FenceReason.STALE_ATTEMPT
    if state.status is not RunStatus.RUNNING:
        return FenceReason.NOT_RUNNING
    if not holds(state, attempt, executor_id=executor_id, lease_id=lease_id):
        return FenceReason.NOT_HOLDER
    return None


def succeeded(ref: RunRef, outcome: Outcome, now: datetime) -> Transition:
    """The new state of a RUNNING run whose holder reports that ``outcome`` (SUCCEEDED)
    ended it at ``now``. It depends on nothing of the run but the fence, so the ledger
    writes it fenced inside one statement, without reading the run first."""
    return Transition(
        ref=ref,
        status=RunStatus.SUCCEEDED,
        check_at=None,
        finished_at=now,
        last_error=truncate_error(outcome.error) or None,
        http_status=outcome.http_status or None,
        grpc_code=outcome.grpc_code,
    )


def complete(
    state: RunState,
    attempt: int,
    outcome: Outcome,
    now: datetime,
    *,
    rng: random.Random,
    dead_letter_at: datetime,
) -> Transition:
    """The new state of a RUNNING run whose ``attempt`` ended with ``outcome``.

    The caller has checked :func:`fence`. Success wins over a cancel request; any other
    outcome of a run asked to stop ends it CANCELLED (a retryable failure included). A
    retryable failure with attempts left waits :func:`backoff` (or the target's
    Retry-After when longer, capped at :data:`MAX_RETRY_AFTER`); a final failure, or a
    retryable one on the last attempt, makes the run DEAD with its dead-letter outbox
    entry due at ``dead_letter_at``.
    """
    error = truncate_error(outcome.error) or None
    error_class = outcome.error_class
    http_status = outcome.http_status or None

    def ended(
        status: RunStatus, err_class: ErrorClass | None, check_at: datetime | None
    ) -> Transition:
        return Transition(
            ref=state.ref,
            status=status,
            check_at=check_at,
            finished_at=now,
            last_error=error,
            error_class=err_class,
            http_status=http_status,
            grpc_code=outcome.grpc_code,
        )

    if outcome.status is OutcomeStatus.SUCCEEDED:
        return succeeded(state.ref, outcome, now)
    if outcome.status is OutcomeStatus.CANCELLED or state.cancel_requested:
        return ended(RunStatus.CANCELLED, ErrorClass.CANCELLED, None)
    if outcome.status is OutcomeStatus.TIMED_OUT:
        error_class = ErrorClass.TIMEOUT
    if outcome.status.retryable:
        failures = attempt - state.attempt_base
        if not is_last_attempt(failures, state.retry):
            delay = backoff(state.retry, failures, rng)
            if outcome.retry_after is not None:
                delay = max(delay, min(outcome.retry_after, MAX_RETRY_AFTER))
            at = now + delay
            return Transition(
                ref=state.ref,
                status=RunStatus.RETRYING,
                check_at=at,
                next_attempt_at=at,
                last_error=error,
                error_class=error_class or ErrorClass.RETRYABLE,
                http_status=http_status,
                grpc_code=outcome.grpc_code,
            )
    return ended(RunStatus.DEAD, error_class or ErrorClass.FINAL, dead_letter_at)


@dataclass(frozen=True, slots=True)
class Fenced:
    """An outcome refused: why, and the run's status when it exists."""

    reason: FenceReason
    status: RunStatus | None


def decide_completions(
    completions: Sequence[Completion],
    states: Mapping[RunRef, RunState],
    now: datetime,
    *,
    executor_id: str,
    rng: random.Random,
    dead_letter_at: datetime,
) -> list[Transition | Fenced]:
    """One CompleteRuns call's answer for each completion, in order: the run's new state
    (:func:`complete`) where :func:`fence` lets it through, else why it was fenced. A
    run named twice in one call is decided once: the next outcomes for it are fenced
    against the state the first gave it (a second report of the same attempt is
    NOT_RUNNING), as they would be in a call of their own after it.

    Args:
        completions: The reported outcomes.
        states: The locked states (before this call) of the runs that exist.
        now: The transaction's "now".
        executor_id: The caller: an outcome is written only from its lease's holder.
        rng: Randomness of the backoff.
        dead_letter_at: When a run that dies now has its dead-letter outbox entry due.
    """
    decided: dict[RunRef, RunState] = {}
    answers: list[Transition | Fenced] = []
    for completion in completions:
        state = decided.get(completion.ref) or states.get(completion.ref)
        reason = fence(
            state, completion.attempt, executor_id=executor_id, lease_id=completion.lease_id
        )
        if state is None or reason is not None:
            answers.append(Fenced(reason or FenceReason.NOT_FOUND, state.status if state else None))
            continue
        transition = complete(
            state,
            completion.attempt,
            completion.outcome,
            now,
            rng=rng,
            dead_letter_at=dead_letter_at,
        )
        decided[completion.ref] = dataclasses.replace(state, status=transition.status)
        answers.append(transition)
    return answers


# --- lease expiry (the sweeper) -------------------------------------------------------


def lease_expiry(state: RunState, now: datetime) -> Transition:
    """What becomes of a RUNNING run whose lease lapsed (its executor stopped
    heartbeating): the lapsed attempt counts as failed.

    - asked to stop: CANCELLED;
    - that attempt was the last: DEAD (``ERROR_CLASS_LEASE_EXPIRED``), its dead-letter
      outbox entry due now;
    - otherwise QUEUED and republished; the next grant increments the attempt.
    """
    if state.cancel_requested:
        return Transition(
            ref=state.ref,
            status=RunStatus.CANCELLED,
            check_at=None,
            finished_at=now,
            error_class=ErrorClass.CANCELLED,
            last_error="cancelled; the lease expired before the executor confirmed",
        )
    if is_last_attempt(state.failures, state.retry):
        return Transition(
            ref=state.ref,
            status=RunStatus.DEAD,
            check_at=now,
            finished_at=now,
            error_class=ErrorClass.LEASE_EXPIRED,
            last_error="lease expired on the last attempt: the executor stopped heartbeating",
        )
    return Transition(
        ref=state.ref,
        status=RunStatus.QUEUED,
        check_at=None,
        error_class=ErrorClass.LEASE_EXPIRED,
        last_error="lease expired: the executor stopped heartbeating",
        republish=True,
    )


def due_check(state: RunState, now: datetime) -> Transition:
    """What the sweeper does with a run whose ``check_at`` passed: a RUNNING run's lease
    lapsed (:func:`lease_expiry`); a QUEUED or RETRYING one (publish unconfirmed, message
    never leased, jitter or release due, retry due) is published again."""
    if state.status is RunStatus.RUNNING:
        return lease_expiry(state, now)
    return Transition(ref=state.ref, status=RunStatus.QUEUED, check_at=None, republish=True)
