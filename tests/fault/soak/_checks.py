"""What the soak checks, computed from the schedules, the run rows and the target's calls.

Pure: the harness reads the rows and hands over the calls; nothing here does I/O.

Every expected occurrence (from each job's stored schedule between the soak's start and
the end of the fault phase) is attributed to the fault whose window holds its nominal
time, else to ``none``; the figures are per fault kind:

- **lost**: an expected occurrence without a run row, or whose row is not ``succeeded``
  at the end of the drain (guarantee 1: every occurrence the policies say should run
  gets a row; guarantee 2: executed until it succeeds; the target always succeeds).
- **double** (doubly dispatched): a run key with two rows, a row at an instant that is
  not an occurrence of its job's schedule (a second key for one occurrence), or two
  target calls carrying one ``Sundial-Execution-Id`` (one attempt under one lease
  executed twice).
- **stale** (stale writes), see :func:`stale_writes`.
- **reissued**: one attempt number granted under two lease ids (two execution ids with
  the same ``Sundial-Attempt`` for one run key): design.md section 10 says a restarted
  primary never hands an attempt out twice, since grants commit synchronously.
- **dup calls**: calls beyond the first per ``Idempotency-Key``: allowed by at least
  once after a crash, reported.
- **lateness**: the first call's receipt minus the nominal time.
- **drain**: per fault window, the last ``finished_at`` of the occurrences it holds
  minus the window's end (how long after the fault its runs were all done).
"""

from __future__ import annotations

import math
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from tests.fault.soak._faults import FaultWindow
from tests.fault.soak._plan import FaultKind
from tests.fault.soak._target import TargetCall

NO_FAULT = "none"
TOTAL = "total"

EXECUTION_IDS = uuid.UUID("6f1d3c1e-5a57-4e0b-9d3c-1b2a0e7c5f41")
"""The uuid5 namespace the executor derives ``Sundial-Execution-Id`` from a lease id in
(``sundial.executor.model``); pinned here so the check does not import the executor."""

CLOCK_TOLERANCE_S = 0.25
"""How far the target's clock (this process) and the ledger's (PostgreSQL's, through the
schedulers' offset clock) may disagree: one machine's clock, read on two paths."""


def execution_id(lease_id: str) -> str:
    """The ``Sundial-Execution-Id`` a target sees for a lease."""
    return str(uuid.uuid5(EXECUTION_IDS, lease_id))


@dataclass(frozen=True, slots=True)
class RunRow:
    """The columns of a ``job_runs`` row the checks read."""

    key: str
    nominal: float
    """scheduled_at, Unix seconds."""
    status: str
    attempt: int
    lease_id: str | None
    finished_at: float | None
    last_http_status: int | None


@dataclass
class Bucket:
    """The figures of one fault kind (or of ``none``, or the total)."""

    name: str
    windows: int = 0
    expected: int = 0
    lost: int = 0
    double: int = 0
    stale: int = 0
    reissued: int = 0
    dup_calls: int = 0
    lateness_s: list[float] = field(default_factory=list)
    drain_s: list[float] = field(default_factory=list)

    @property
    def max_lateness_s(self) -> float:
        return max(self.lateness_s, default=math.nan)

    @property
    def p99_lateness_s(self) -> float:
        return quantile(self.lateness_s, 0.99)

    @property
    def max_drain_s(self) -> float:
        return max(self.drain_s, default=math.nan)

    @property
    def violations(self) -> int:
        return self.lost + self.double + self.stale + self.reissued


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (nearest rank); NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


@dataclass
class Findings:
    """Every check's result; ``examples`` holds evidence for the report."""

    buckets: dict[str, Bucket]
    windows: list[tuple[FaultWindow, int, float, float]]
    """Each fault window with its occurrences, max lateness and drain time."""
    examples: dict[str, list[str]]
    occurrences: int
    calls: int

    @property
    def total(self) -> Bucket:
        return self.buckets[TOTAL]


def stale_writes(rows: Iterable[RunRow], calls: Sequence[TargetCall]) -> dict[str, str]:
    """Succeeded rows whose result was written by a lease that did not hold the run.

    A row records the lease that held it last (``attempt``, ``lease_id``) and the result
    the ledger accepted (``last_http_status``, ``finished_at``). The target answers each
    execution with a status of its own (``status_for(execution id)``), so a row was
    written by its own holder only if there is a call under that very lease, identified
    by ``Sundial-Attempt == attempt`` and ``Sundial-Execution-Id == uuid5(lease_id)``,
    such that:

    1. the call exists: a success recorded for a lease that never called the target
       was written by someone else (an earlier holder, or no holder at all);
    2. its answer is the recorded status: a different status is another execution's
       result (a late report of an earlier attempt overwriting the current lease);
    3. it was received before ``finished_at`` (within the clock tolerance): a result
       recorded before its holder's call began cannot be that call's;
    4. no call of the run carries a higher attempt: a newer grant existed, yet the row
       ends at an older attempt's result (the fencing token went back).

    An executor that wakes from SIGSTOP after its lease lapsed and reports its (2xx)
    result breaks 1, 2 or 3 if the ledger accepts it over the new holder's lease; the
    chance that all three miss one such write is below 1/7 (two executions answered the
    same status, and the new call began before the stale report), and the soak has many.

    Returns:
        Run key -> what was wrong, for each stale write.
    """
    by_lease: dict[tuple[str, int, str], list[TargetCall]] = defaultdict(list)
    top_attempt: dict[str, int] = {}
    for call in calls:
        by_lease[(call.key, call.attempt, call.execution_id)].append(call)
        top_attempt[call.key] = max(top_attempt.get(call.key, 0), call.attempt)
    found: dict[str, str] = {}
    for row in rows:
        if row.status != "succeeded":
            continue
        if not row.lease_id:
            found[row.key] = "succeeded without a lease id"
            continue
        holder = by_lease.get((row.key, row.attempt, execution_id(row.lease_id)), [])
        newer = top_attempt.get(row.key, 0)
        if not holder:
            found[row.key] = f"no call under its lease (attempt {row.attempt})"
        elif row.last_http_status not in {c.status for c in holder}:
            found[row.key] = (
                f"recorded status {row.last_http_status}, its lease's call answered "
                f"{sorted({c.status for c in holder})} (attempt {row.attempt})"
            )
        elif row.finished_at is not None and all(
            c.received_at > row.finished_at + CLOCK_TOLERANCE_S for c in holder
        ):
            first = min(c.received_at for c in holder)
            found[row.key] = f"result recorded {first - row.finished_at:.2f} s before its call"
        elif newer > row.attempt:
            found[row.key] = f"attempt {row.attempt} recorded, attempt {newer} was called"
    return found


def analyse(
    expected: Mapping[str, float],
    rows: Sequence[RunRow],
    final_rows: Sequence[RunRow],
    calls: Sequence[TargetCall],
    windows: Sequence[FaultWindow],
) -> Findings:
    """Every check over one soak.

    Args:
        expected: Run key -> nominal time (Unix seconds) of every expected occurrence.
        rows: The run rows at the end of the drain (what "lost" looks at).
        final_rows: The run rows once the services stopped (every other check).
        calls: Every call the target received, in arrival order.
        windows: The faults as they happened.
    """

    def bucket_of(nominal: float) -> str:
        for window in windows:
            if window.holds(nominal):
                return window.kind.value
        return NO_FAULT

    names = [k.value for k in FaultKind if any(w.kind is k for w in windows)]
    buckets = {name: Bucket(name) for name in [*names, NO_FAULT, TOTAL]}
    for window in windows:
        buckets[window.kind.value].windows += 1
    examples: dict[str, list[str]] = defaultdict(list)

    shown: Counter[tuple[str, str]] = Counter()

    def example(what: str, bucket: str, line: str) -> None:
        # A few per fault kind, so each kind's evidence shows.
        if shown[(what, bucket)] < 3 and len(examples[what]) < 15:
            shown[(what, bucket)] += 1
            examples[what].append(f"[{bucket}] {line}")

    def count(key: str, nominal: float, what: str, evidence: str) -> None:
        bucket = bucket_of(nominal)
        for name in (bucket, TOTAL):
            setattr(buckets[name], what, getattr(buckets[name], what) + 1)
        example(what, bucket, f"{key}: {evidence}")

    nominal_of = dict(expected)
    for row in final_rows:
        nominal_of.setdefault(row.key, row.nominal)
    for nominal in expected.values():
        for name in (bucket_of(nominal), TOTAL):
            buckets[name].expected += 1

    # lost
    status_at_drain = {row.key: row for row in rows}
    for key, nominal in expected.items():
        at_drain = status_at_drain.get(key)
        if at_drain is None:
            count(key, nominal, "lost", "no run row")
        elif at_drain.status != "succeeded":
            count(
                key,
                nominal,
                "lost",
                f"{at_drain.status} at attempt {at_drain.attempt} after the drain",
            )

    # doubly dispatched: rows
    for key, n in Counter(row.key for row in final_rows).items():
        if n > 1:
            count(key, nominal_of[key], "double", f"{n} rows")
    for row in final_rows:
        if row.key not in expected:
            count(row.key, row.nominal, "double", f"a row off the schedule ({row.status})")
    # doubly dispatched: one execution id, two calls
    by_execution: dict[str, list[TargetCall]] = defaultdict(list)
    for call in calls:
        by_execution[call.execution_id].append(call)
    for execution, same in by_execution.items():
        if len(same) > 1:
            key = same[0].key
            count(
                key,
                nominal_of.get(key, math.nan),
                "double",
                f"execution {execution} called "
                f"{len(same)} times (attempts {[c.attempt for c in same]})",
            )

    # stale writes
    for key, evidence in stale_writes(final_rows, calls).items():
        count(key, nominal_of[key], "stale", evidence)

    # one attempt granted twice
    executions: dict[tuple[str, int], set[str]] = defaultdict(set)
    for call in calls:
        executions[(call.key, call.attempt)].add(call.execution_id)
    for (key, attempt), ids in executions.items():
        if len(ids) > 1:
            count(
                key,
                nominal_of.get(key, math.nan),
                "reissued",
                f"attempt {attempt} under {len(ids)} lease ids",
            )

    # duplicate calls and lateness
    first_call: dict[str, float] = {}
    per_key = Counter(call.key for call in calls)
    for call in calls:
        first_call[call.key] = min(first_call.get(call.key, math.inf), call.received_at)
    attempts_of: dict[str, list[int]] = defaultdict(list)
    for call in calls:
        attempts_of[call.key].append(call.attempt)
    for key, n in per_key.items():
        if n > 1:
            bucket = bucket_of(nominal_of.get(key, math.nan))
            for name in (bucket, TOTAL):
                buckets[name].dup_calls += n - 1
            example("dup calls", bucket, f"{key}: {n} calls, attempts {attempts_of[key]}")
    for key, nominal in expected.items():
        if key in first_call:
            late = first_call[key] - nominal
            for name in (bucket_of(nominal), TOTAL):
                buckets[name].lateness_s.append(late)

    # per window: occurrences, max lateness, time to drain
    finished = {row.key: row.finished_at for row in final_rows}
    per_window = []
    for window in windows:
        keys = [k for k, nominal in expected.items() if window.holds(nominal)]
        lateness = [first_call[k] - expected[k] for k in keys if k in first_call]
        done = [f for k in keys if (f := finished.get(k)) is not None]
        drain = max(0.0, max(done) - window.end) if done else math.nan
        per_window.append((window, len(keys), max(lateness, default=math.nan), drain))
        if not math.isnan(drain):
            buckets[window.kind.value].drain_s.append(drain)
            buckets[TOTAL].drain_s.append(drain)
    return Findings(buckets, per_window, dict(examples), len(expected), len(calls))
