"""Every transition of the run state machine, in one table.

Each case names a situation, calls one rule of :mod:`sundial.run._machine` and states
the whole answer (a Rejection, Grant list, FenceReason or Transition compared field by
field). Randomness is a seeded ``random.Random``: a retry's due time is written as the
full-jitter formula over the cap the case spells out, and checked to lie in
``[now, now + cap]``.

The expectations are those of the code the machine was extracted from: the ledger's
``_lease_verdict``, LeaseRuns' ``decide`` and ``_outcome_write``, and the sweeper's
``_sweep_checks`` (``git show acf38e8~1:services/scheduler/sundial/scheduler/ledger.py``).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sundial.run import (
    MAX_ERROR_BYTES,
    MAX_RETRY_AFTER,
    Completion,
    ErrorClass,
    Fenced,
    FenceReason,
    Grant,
    Outcome,
    OutcomeStatus,
    Rejection,
    RejectReason,
    RetryPolicy,
    RunRef,
    RunState,
    RunStatus,
    Transition,
    backoff,
    complete,
    decide_completions,
    decide_leases,
    due_check,
    fence,
    lease_expiry,
    lease_verdict,
)

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SEED = 20260301
DEAD_LETTER_AT = NOW + timedelta(seconds=5)
CAPACITY_RETRY = timedelta(seconds=2)
RETRY = RetryPolicy(
    max_attempts=3, base_delay=timedelta(seconds=10), max_delay=timedelta(seconds=60)
)
LONG_RETRY = replace(RETRY, max_attempts=10)
ME, OTHER = "executor-a", "executor-b"
LEASE_ID, OTHER_LEASE_ID = str(uuid.UUID(int=101)), str(uuid.UUID(int=102))
MY_TOKEN, OTHER_TOKEN = str(uuid.UUID(int=201)), str(uuid.UUID(int=202))
TENANT = "acme"

REF = RunRef(uuid.UUID(int=1), datetime(2026, 3, 1, 11, 0, tzinfo=UTC))
REF2 = RunRef(uuid.UUID(int=2), datetime(2026, 3, 1, 11, 0, tzinfo=UTC))
REF3 = RunRef(uuid.UUID(int=3), datetime(2026, 3, 1, 11, 0, tzinfo=UTC))


def state(status: RunStatus, ref: RunRef = REF, **fields: Any) -> RunState:
    """A run of tenant ``acme`` (cap 2) under ``RETRY``, overridden by ``fields``."""
    defaults: dict[str, Any] = {
        "tenant_id": TENANT,
        "max_concurrent_runs": 2,
        "retry": RETRY,
    }
    return RunState(ref, status, **{**defaults, **fields})


def live(attempt: int = 1, executor: str = ME, **fields: Any) -> RunState:
    """RUNNING under a lease that lasts 30 s more."""
    return state(
        RunStatus.RUNNING,
        attempt=attempt,
        executor_id=executor,
        lease_id=fields.pop("lease_id", LEASE_ID),
        lease_token_id=fields.pop("lease_token_id", MY_TOKEN),
        lease_until=NOW + timedelta(seconds=30),
        **fields,
    )


def lapsed(attempt: int = 1, **fields: Any) -> RunState:
    """RUNNING under a lease that ended a second ago."""
    return state(
        RunStatus.RUNNING,
        attempt=attempt,
        executor_id=OTHER,
        lease_id=OTHER_LEASE_ID,
        lease_until=NOW - timedelta(seconds=1),
        **fields,
    )


def fenced(
    s: RunState | None, attempt: int, executor: str = ME, lease_id: str = LEASE_ID
) -> Callable[[], object]:
    return lambda: fence(s, attempt, executor_id=executor, lease_id=lease_id)


def verdict(s: RunState | None) -> Callable[[], object]:
    return lambda: lease_verdict(s, NOW)


def leases(
    refs: Sequence[RunRef],
    states: Sequence[RunState],
    running: Mapping[str, int] | None = None,
    token_id: str = MY_TOKEN,
) -> Callable[[], object]:
    return lambda: decide_leases(
        refs,
        {s.ref: s for s in states},
        executor_id=ME,
        token_id=token_id,
        now=NOW,
        running=running or {},
        capacity_retry=CAPACITY_RETRY,
    )


def completes(s: RunState, outcome: Outcome, attempt: int | None = None) -> Callable[[], object]:
    return lambda: complete(
        s,
        s.attempt if attempt is None else attempt,
        outcome,
        NOW,
        rng=random.Random(SEED),
        dead_letter_at=DEAD_LETTER_AT,
    )


def jittered(cap: timedelta) -> timedelta:
    """Full jitter over ``cap`` with the case's seed: ``uniform(0, cap)``, i.e.
    ``0 + (cap - 0) * random()`` as ``random.uniform`` is documented to compute it."""
    return timedelta(seconds=cap.total_seconds() * random.Random(SEED).random())


def failed(**fields: Any) -> Outcome:
    """A retryable failure: HTTP 503 with a message."""
    defaults: dict[str, Any] = {"error": "503 Service Unavailable", "http_status": 503}
    return Outcome(OutcomeStatus.FAILED_RETRYABLE, **{**defaults, **fields})


def retrying(
    delay: timedelta, error_class: ErrorClass = ErrorClass.RETRYABLE, **fields: Any
) -> Transition:
    at = NOW + delay
    defaults: dict[str, Any] = {"last_error": "503 Service Unavailable", "http_status": 503}
    return Transition(
        REF,
        RunStatus.RETRYING,
        check_at=at,
        next_attempt_at=at,
        error_class=error_class,
        **{**defaults, **fields},
    )


def ended(status: RunStatus, error_class: ErrorClass | None, **fields: Any) -> Transition:
    """A run that ended now (DEAD ones with their dead-letter outbox entry)."""
    return Transition(
        REF,
        status,
        check_at=DEAD_LETTER_AT if status is RunStatus.DEAD else None,
        finished_at=NOW,
        error_class=error_class,
        **fields,
    )


@dataclass(frozen=True)
class Case:
    name: str
    decide: Callable[[], object]
    expect: object
    retry_cap: timedelta | None = None
    """For a RETRYING answer: its due time lies in [NOW, NOW + retry_cap]."""


NOT_DUE_RETRY = state(RunStatus.RETRYING, attempt=1, next_attempt_at=NOW + timedelta(seconds=90))
LEASED = Rejection(RejectReason.LEASED_ELSEWHERE, "run is leased")
AT_CAPACITY_2 = Rejection(
    RejectReason.TENANT_AT_CAPACITY, "tenant has 2 runs running", CAPACITY_RETRY
)
AT_CAPACITY_1 = Rejection(
    RejectReason.TENANT_AT_CAPACITY, "tenant has 1 runs running", CAPACITY_RETRY
)
LONG_ERROR = "a" + "é" * 3000  # 6001 bytes; byte 4096 is the first half of an "é"

CASES = [
    # --- lease_verdict: can the run be leased now, whoever asks ----------------------
    Case("verdict/none", verdict(None), Rejection(RejectReason.NOT_FOUND, "no such run")),
    Case(
        "verdict/job deleted",
        verdict(state(RunStatus.QUEUED, job_exists=False)),
        Rejection(RejectReason.NOT_FOUND, "no such run"),
    ),
    Case(
        "verdict/pending",
        verdict(state(RunStatus.PENDING)),
        Rejection(RejectReason.NOT_DUE, "run waits behind an earlier run"),
    ),
    Case("verdict/queued", verdict(state(RunStatus.QUEUED)), None),
    Case("verdict/running, live lease", verdict(live()), LEASED),
    Case("verdict/running, lease expired", verdict(lapsed(attempt=2)), None),
    Case(
        "verdict/running, lease ends exactly now",
        verdict(replace(live(), lease_until=NOW)),
        None,
    ),
    Case(
        "verdict/running, lease expired on the last attempt",
        verdict(lapsed(attempt=3)),
        Rejection(RejectReason.FINISHED, "lease expired on the last attempt: the run is dead"),
    ),
    Case(
        "verdict/running, lease expired on the last attempt after a replay",
        verdict(lapsed(attempt=5, attempt_base=3)),
        None,
    ),
    Case(
        "verdict/retrying, due",
        verdict(state(RunStatus.RETRYING, attempt=1, next_attempt_at=NOW - timedelta(seconds=1))),
        None,
    ),
    Case(
        "verdict/retrying, due exactly now",
        verdict(state(RunStatus.RETRYING, attempt=1, next_attempt_at=NOW)),
        None,
    ),
    Case(
        "verdict/retrying, not due: retry_after is the wait",
        verdict(NOT_DUE_RETRY),
        Rejection(RejectReason.NOT_DUE, "retry not due yet", timedelta(seconds=90)),
    ),
    Case(
        "verdict/succeeded",
        verdict(state(RunStatus.SUCCEEDED)),
        Rejection(RejectReason.FINISHED, "run is SUCCEEDED"),
    ),
    Case(
        "verdict/dead",
        verdict(state(RunStatus.DEAD)),
        Rejection(RejectReason.FINISHED, "run is DEAD"),
    ),
    Case(
        "verdict/skipped",
        verdict(state(RunStatus.SKIPPED)),
        Rejection(RejectReason.FINISHED, "run is SKIPPED"),
    ),
    Case(
        "verdict/cancelled",
        verdict(state(RunStatus.CANCELLED)),
        Rejection(RejectReason.CANCELLED, "run is CANCELLED"),
    ),
    Case(
        "verdict/queued, cancel requested",
        verdict(state(RunStatus.QUEUED, cancel_requested=True)),
        Rejection(RejectReason.CANCELLED, "run cancellation requested"),
    ),
    Case(
        "verdict/running, lease expired, cancel requested",
        verdict(lapsed(cancel_requested=True)),
        Rejection(RejectReason.CANCELLED, "run cancellation requested"),
    ),
    Case(
        "verdict/retrying not due, cancel requested: cancel first",
        verdict(replace(NOT_DUE_RETRY, cancel_requested=True)),
        Rejection(RejectReason.CANCELLED, "run cancellation requested"),
    ),
    Case(
        "verdict/succeeded, cancel requested: finished first",
        verdict(state(RunStatus.SUCCEEDED, cancel_requested=True)),
        Rejection(RejectReason.FINISHED, "run is SUCCEEDED"),
    ),
    # --- decide_leases: one LeaseRuns call ---------------------------------------------
    Case("lease/grant", leases([REF], [state(RunStatus.QUEUED)]), [Grant(REF)]),
    Case(
        "lease/idempotent regrant to the holder",
        leases([REF], [live(executor=ME)], running={TENANT: 1}),
        [Grant(REF, regrant=True)],
    ),
    Case(
        "lease/leased elsewhere",
        leases([REF], [live(executor=OTHER)], running={TENANT: 1}),
        [LEASED],
    ),
    Case(
        "lease/the holder's executor id under another credential is not re-granted",
        leases([REF], [live(executor=ME)], running={TENANT: 1}, token_id=OTHER_TOKEN),
        [LEASED],
    ),
    Case(
        "lease/a lease from before credentials were recorded is not re-granted",
        leases([REF], [live(executor=ME, lease_token_id=None)], running={TENANT: 1}),
        [LEASED],
    ),
    Case(
        "lease/missing run",
        leases([REF, REF2], [state(RunStatus.QUEUED, REF2)]),
        [Rejection(RejectReason.NOT_FOUND, "no such run"), Grant(REF2)],
    ),
    Case(
        "lease/duplicate ref in one call",
        leases([REF, REF], [state(RunStatus.QUEUED)]),
        [Grant(REF), Rejection(RejectReason.LEASED_ELSEWHERE, "duplicate")],
    ),
    Case(
        "lease/duplicate regrant in one call",
        leases([REF, REF], [live(executor=ME)], running={TENANT: 1}),
        [Grant(REF, regrant=True), Rejection(RejectReason.LEASED_ELSEWHERE, "duplicate")],
    ),
    Case(
        "lease/a rejected ref asked twice is rejected twice",
        leases([REF, REF], [state(RunStatus.DEAD)]),
        [Rejection(RejectReason.FINISHED, "run is DEAD")] * 2,
    ),
    Case(
        "lease/not due retry passes its wait on",
        leases([REF], [NOT_DUE_RETRY]),
        [Rejection(RejectReason.NOT_DUE, "retry not due yet", timedelta(seconds=90))],
    ),
    Case(
        "lease/tenant capacity counts grants within the call",
        leases(
            [REF, REF2, REF3],
            [state(RunStatus.QUEUED), state(RunStatus.QUEUED, REF2), state(RunStatus.QUEUED, REF3)],
            running={TENANT: 1},
        ),
        [Grant(REF), AT_CAPACITY_2, AT_CAPACITY_2],
    ),
    Case(
        "lease/tenant capacity is per tenant",
        leases(
            [REF, REF2],
            [state(RunStatus.QUEUED), state(RunStatus.QUEUED, REF2, tenant_id="other")],
            running={TENANT: 2},
        ),
        [AT_CAPACITY_2, Grant(REF2)],
    ),
    Case(
        "lease/rejections count no capacity",
        leases(
            [REF, REF2],
            [state(RunStatus.SUCCEEDED), state(RunStatus.QUEUED, REF2, max_concurrent_runs=1)],
        ),
        [Rejection(RejectReason.FINISHED, "run is SUCCEEDED"), Grant(REF2)],
    ),
    Case(
        "lease/a regrant is not counted against capacity",
        leases(
            [REF, REF2, REF3],
            [live(executor=ME), state(RunStatus.QUEUED, REF2), state(RunStatus.QUEUED, REF3)],
            running={TENANT: 1},  # the re-granted run itself
        ),
        [Grant(REF, regrant=True), Grant(REF2), AT_CAPACITY_2],
    ),
    Case(
        "lease/an expired running run is granted at capacity and not counted",
        leases(
            [REF, REF2],
            [lapsed(max_concurrent_runs=1), state(RunStatus.QUEUED, REF2, max_concurrent_runs=1)],
            running={TENANT: 1},  # the expired run is still RUNNING: counted already
        ),
        [Grant(REF), AT_CAPACITY_1],
    ),
    Case(
        "lease/unknown cap is not enforced",
        leases([REF], [state(RunStatus.QUEUED, max_concurrent_runs=None)], running={TENANT: 10**6}),
        [Grant(REF)],
    ),
    # --- fence: may an outcome for this attempt be written -------------------------------
    Case("fence/not found", fenced(None, 1), FenceReason.NOT_FOUND),
    Case("fence/stale attempt", fenced(live(attempt=2), 1), FenceReason.STALE_ATTEMPT),
    Case(
        "fence/stale attempt of an ended run: stale first",
        fenced(state(RunStatus.SUCCEEDED, attempt=2), 1),
        FenceReason.STALE_ATTEMPT,
    ),
    Case(
        "fence/not running",
        fenced(state(RunStatus.RETRYING, attempt=2), 2),
        FenceReason.NOT_RUNNING,
    ),
    Case("fence/accepted", fenced(live(attempt=2), 2), None),
    Case(
        "fence/accepted on an expired lease from its holder",
        fenced(lapsed(attempt=2), 2, OTHER, OTHER_LEASE_ID),
        None,
    ),
    Case(
        "fence/another executor is not the holder",
        fenced(live(attempt=2), 2, OTHER, LEASE_ID),
        FenceReason.NOT_HOLDER,
    ),
    Case(
        "fence/the holder's id with another lease id is not the holder",
        fenced(live(attempt=2), 2, ME, OTHER_LEASE_ID),
        FenceReason.NOT_HOLDER,
    ),
    Case(
        "fence/no lease id is not the holder",
        fenced(live(attempt=2), 2, ME, ""),
        FenceReason.NOT_HOLDER,
    ),
    Case(
        "fence/a row leased before lease ids: the holder reports none",
        fenced(live(attempt=2, lease_id=None), 2, ME, ""),
        None,
    ),
    Case(
        "fence/a row leased before lease ids: another executor is not the holder",
        fenced(live(attempt=2, lease_id=None), 2, OTHER, ""),
        FenceReason.NOT_HOLDER,
    ),
    # --- complete: the attempt ended ------------------------------------------------
    Case(
        "complete/succeeded",
        completes(live(), Outcome(OutcomeStatus.SUCCEEDED, http_status=200)),
        ended(RunStatus.SUCCEEDED, None, http_status=200),
    ),
    Case(
        "complete/succeeded wins over a cancel request",
        completes(live(cancel_requested=True), Outcome(OutcomeStatus.SUCCEEDED, grpc_code=0)),
        ended(RunStatus.SUCCEEDED, None, grpc_code=0),
    ),
    Case(
        "complete/cancelled",
        completes(live(), Outcome(OutcomeStatus.CANCELLED, error="stopped")),
        ended(RunStatus.CANCELLED, ErrorClass.CANCELLED, last_error="stopped"),
    ),
    Case(
        "complete/failed_retryable with cancel requested -> cancelled",
        completes(live(cancel_requested=True), failed()),
        ended(
            RunStatus.CANCELLED,
            ErrorClass.CANCELLED,
            last_error="503 Service Unavailable",
            http_status=503,
        ),
    ),
    Case(
        "complete/failed_final with cancel requested -> cancelled",
        completes(live(cancel_requested=True), Outcome(OutcomeStatus.FAILED_FINAL, error="400")),
        ended(RunStatus.CANCELLED, ErrorClass.CANCELLED, last_error="400"),
    ),
    Case(
        "complete/retryable, attempts left: backoff over base * 2^1",
        completes(live(attempt=1), failed()),
        retrying(jittered(timedelta(seconds=20))),
        retry_cap=timedelta(seconds=20),
    ),
    Case(
        "complete/retryable, second failure: backoff over base * 2^2",
        completes(live(attempt=2), failed(error_class=ErrorClass.CONNECTION)),
        retrying(jittered(timedelta(seconds=40)), ErrorClass.CONNECTION),
        retry_cap=timedelta(seconds=40),
    ),
    Case(
        "complete/retryable, backoff capped at max_delay",
        completes(live(attempt=4, retry=LONG_RETRY), failed()),
        retrying(jittered(timedelta(seconds=60))),
        retry_cap=timedelta(seconds=60),
    ),
    Case(
        "complete/retry_after longer than the backoff wins",
        completes(live(attempt=1), failed(retry_after=timedelta(minutes=10))),
        retrying(timedelta(minutes=10)),
        retry_cap=timedelta(minutes=10),
    ),
    Case(
        "complete/retry_after shorter than the backoff loses",
        completes(live(attempt=1), failed(retry_after=timedelta(0))),
        retrying(jittered(timedelta(seconds=20))),
        retry_cap=timedelta(seconds=20),
    ),
    Case(
        "complete/retry_after capped at MAX_RETRY_AFTER",
        completes(live(attempt=1), failed(retry_after=timedelta(hours=48))),
        retrying(MAX_RETRY_AFTER),
        retry_cap=timedelta(hours=24),
    ),
    Case(
        "complete/timed_out, attempts left -> retrying, TIMEOUT",
        completes(
            live(attempt=1),
            Outcome(OutcomeStatus.TIMED_OUT, error="deadline", error_class=ErrorClass.RETRYABLE),
        ),
        retrying(
            jittered(timedelta(seconds=20)),
            ErrorClass.TIMEOUT,
            last_error="deadline",
            http_status=None,
        ),
        retry_cap=timedelta(seconds=20),
    ),
    Case(
        "complete/timed_out on the last attempt -> dead, TIMEOUT",
        completes(live(attempt=3), Outcome(OutcomeStatus.TIMED_OUT, error="deadline")),
        ended(RunStatus.DEAD, ErrorClass.TIMEOUT, last_error="deadline"),
    ),
    Case(
        "complete/retryable on the last attempt -> dead at dead_letter_at",
        completes(live(attempt=3), failed()),
        ended(
            RunStatus.DEAD, ErrorClass.FINAL, last_error="503 Service Unavailable", http_status=503
        ),
    ),
    Case(
        "complete/retryable on the last attempt keeps the executor's class",
        completes(live(attempt=3), failed(error_class=ErrorClass.CONNECTION)),
        ended(
            RunStatus.DEAD,
            ErrorClass.CONNECTION,
            last_error="503 Service Unavailable",
            http_status=503,
        ),
    ),
    Case(
        "complete/failed_final -> dead",
        completes(
            live(attempt=1), Outcome(OutcomeStatus.FAILED_FINAL, error="404", http_status=404)
        ),
        ended(RunStatus.DEAD, ErrorClass.FINAL, last_error="404", http_status=404),
    ),
    Case(
        "complete/failed_final keeps the executor's class",
        completes(
            live(attempt=1),
            Outcome(OutcomeStatus.FAILED_FINAL, error="refused", error_class=ErrorClass.REFUSED),
        ),
        ended(RunStatus.DEAD, ErrorClass.REFUSED, last_error="refused"),
    ),
    Case(
        "complete/after a replay the budget starts again",
        completes(live(attempt=4, attempt_base=3), failed()),
        retrying(jittered(timedelta(seconds=20))),
        retry_cap=timedelta(seconds=20),
    ),
    Case(
        "complete/after a replay the last attempt is counted from the replay",
        completes(live(attempt=6, attempt_base=3), failed()),
        ended(
            RunStatus.DEAD, ErrorClass.FINAL, last_error="503 Service Unavailable", http_status=503
        ),
    ),
    Case(
        "complete/error text cut to MAX_ERROR_BYTES on a character boundary",
        completes(live(), Outcome(OutcomeStatus.FAILED_FINAL, error=LONG_ERROR)),
        ended(RunStatus.DEAD, ErrorClass.FINAL, last_error="a" + "é" * 2047),
    ),
    Case(
        "complete/http_status 0 and empty error are absent, grpc_code 0 is kept",
        completes(
            live(),
            Outcome(OutcomeStatus.FAILED_FINAL, error="", http_status=0, grpc_code=0),
        ),
        ended(RunStatus.DEAD, ErrorClass.FINAL, last_error=None, http_status=None, grpc_code=0),
    ),
    # --- lease_expiry: the sweeper found the lease lapsed ----------------------------------
    Case(
        "expiry/cancel requested -> cancelled",
        lambda: lease_expiry(lapsed(cancel_requested=True), NOW),
        Transition(
            REF,
            RunStatus.CANCELLED,
            check_at=None,
            finished_at=NOW,
            error_class=ErrorClass.CANCELLED,
            last_error="cancelled; the lease expired before the executor confirmed",
        ),
    ),
    Case(
        "expiry/cancel requested on the last attempt -> cancelled",
        lambda: lease_expiry(lapsed(attempt=3, cancel_requested=True), NOW),
        Transition(
            REF,
            RunStatus.CANCELLED,
            check_at=None,
            finished_at=NOW,
            error_class=ErrorClass.CANCELLED,
            last_error="cancelled; the lease expired before the executor confirmed",
        ),
    ),
    Case(
        "expiry/last attempt -> dead, its dead letter due now",
        lambda: lease_expiry(lapsed(attempt=3), NOW),
        Transition(
            REF,
            RunStatus.DEAD,
            check_at=NOW,
            finished_at=NOW,
            error_class=ErrorClass.LEASE_EXPIRED,
            last_error="lease expired on the last attempt: the executor stopped heartbeating",
        ),
    ),
    Case(
        "expiry/attempts left -> queued and republished",
        lambda: lease_expiry(lapsed(attempt=2), NOW),
        Transition(
            REF,
            RunStatus.QUEUED,
            check_at=None,
            error_class=ErrorClass.LEASE_EXPIRED,
            last_error="lease expired: the executor stopped heartbeating",
            republish=True,
        ),
    ),
    Case(
        "expiry/after a replay -> queued and republished",
        lambda: lease_expiry(lapsed(attempt=3, attempt_base=1), NOW),
        Transition(
            REF,
            RunStatus.QUEUED,
            check_at=None,
            error_class=ErrorClass.LEASE_EXPIRED,
            last_error="lease expired: the executor stopped heartbeating",
            republish=True,
        ),
    ),
    # --- due_check: the sweeper found check_at passed ------------------------------------
    Case(
        "due/queued -> republished",
        lambda: due_check(state(RunStatus.QUEUED), NOW),
        Transition(REF, RunStatus.QUEUED, check_at=None, republish=True),
    ),
    Case(
        "due/retrying -> queued and republished",
        lambda: due_check(state(RunStatus.RETRYING, attempt=1, next_attempt_at=NOW), NOW),
        Transition(REF, RunStatus.QUEUED, check_at=None, republish=True),
    ),
    Case(
        "due/running -> the lease expired",
        lambda: due_check(lapsed(attempt=3), NOW),
        lease_expiry(lapsed(attempt=3), NOW),
    ),
]


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in CASES])
def test_transition(case: Case) -> None:
    answer = case.decide()
    assert answer == case.expect
    if case.retry_cap is not None:
        assert isinstance(answer, Transition)
        assert answer.status is RunStatus.RETRYING
        assert answer.next_attempt_at is not None
        assert NOW <= answer.next_attempt_at <= NOW + case.retry_cap
        assert answer.check_at == answer.next_attempt_at
        assert answer.finished_at is None


def test_case_names_are_unique() -> None:
    names = [c.name for c in CASES]
    assert len(names) == len(set(names))


def test_error_text_cut_keeps_whole_characters() -> None:
    # The case above expects exactly this: one byte short of the limit, no broken "é".
    cut = "a" + "é" * 2047
    assert len(cut.encode()) == MAX_ERROR_BYTES - 1
    assert len(LONG_ERROR.encode()) > MAX_ERROR_BYTES


@settings(max_examples=300, deadline=None, database=None)
@given(
    base_ms=st.integers(min_value=1, max_value=3_600_000),
    max_delay_s=st.integers(min_value=0, max_value=86_400),
    failures=st.integers(min_value=0, max_value=100),  # max_attempts is 1-100 (job.proto)
    seed=st.integers(min_value=0, max_value=2**32 - 1),
)
def test_backoff_is_full_jitter_under_the_cap(
    base_ms: int, max_delay_s: int, failures: int, seed: int
) -> None:
    base = timedelta(milliseconds=base_ms)
    max_delay = timedelta(seconds=max_delay_s)
    retry = RetryPolicy(max_attempts=100, base_delay=base, max_delay=max_delay)
    # The cap in integer milliseconds, so no timedelta overflows at large exponents.
    cap = timedelta(milliseconds=min(max_delay_s * 1000, base_ms * 2**failures))
    delay = backoff(retry, failures, random.Random(seed))
    assert timedelta(0) <= delay <= cap
    # Deterministic for a seed: the ledger's tests and this table depend on it.
    assert backoff(retry, failures, random.Random(seed)) == delay


def test_decide_completions_fences_decides_and_counts_a_run_once() -> None:
    done = Outcome(OutcomeStatus.SUCCEEDED)
    states = {REF: live(attempt=2), REF2: state(RunStatus.SUCCEEDED, REF2, attempt=1)}
    answers = decide_completions(
        [
            Completion(REF, 2, done, LEASE_ID),
            Completion(REF, 2, done, LEASE_ID),  # the same run twice in one call
            Completion(REF2, 1, done),  # already ended
            Completion(REF3, 1, done),  # no such run
            Completion(REF, 1, done),  # an older attempt
            Completion(REF, 2, done, OTHER_LEASE_ID),  # not the holder's lease
        ],
        states,
        NOW,
        executor_id=ME,
        rng=random.Random(0),
        dead_letter_at=NOW,
    )
    first = answers[0]
    assert isinstance(first, Transition)
    assert (first.ref, first.status, first.finished_at) == (REF, RunStatus.SUCCEEDED, NOW)
    # After the first, REF is SUCCEEDED: its next reports are fenced against that.
    assert answers[1:] == [
        Fenced(FenceReason.NOT_RUNNING, RunStatus.SUCCEEDED),
        Fenced(FenceReason.NOT_RUNNING, RunStatus.SUCCEEDED),
        Fenced(FenceReason.NOT_FOUND, None),
        Fenced(FenceReason.STALE_ATTEMPT, RunStatus.SUCCEEDED),
        Fenced(FenceReason.NOT_RUNNING, RunStatus.SUCCEEDED),
    ]
    # Another lease's report on a run still running is NOT_HOLDER.
    [other] = decide_completions(
        [Completion(REF, 2, done, OTHER_LEASE_ID)],
        states,
        NOW,
        executor_id=ME,
        rng=random.Random(0),
        dead_letter_at=NOW,
    )
    assert other == Fenced(FenceReason.NOT_HOLDER, RunStatus.RUNNING)
