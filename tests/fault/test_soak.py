"""The short soak: about a minute and a half of the whole system under every non-cluster
fault.

One fixed seed; each fault kind once (kill -9 and SIGSTOP of a scheduler and of an
executor, PostgreSQL restart, NATS kill -9 and restart, and cuts and black holes of
PostgreSQL, NATS and etcd at their proxies). Fails when any occurrence was lost, doubly
dispatched, or had a stale result written (tests/fault/soak/_checks.py). The long
version is ``make chaos``.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.fault.soak import (
    CLUSTER_KINDS,
    FaultKind,
    FaultWindow,
    RunRow,
    SoakConfig,
    TargetCall,
    analyse,
    execution_id,
    run_soak,
    stale_writes,
    status_for,
)

SEED = 11

SHORT_DURATIONS_S = {
    FaultKind.KILL_SCHEDULER: (1.0, 2.0),
    FaultKind.KILL_EXECUTOR: (1.0, 2.0),
    # Past the schedulers' 3 s etcd lease: its partitions move, then come back.
    FaultKind.STOP_SCHEDULER: (4.0, 4.5),
    # Past the 10 s run lease: its runs go to the other executor, and its late reports
    # must be fenced out (the stale-write check).
    FaultKind.STOP_EXECUTOR: (12.0, 12.0),
    FaultKind.RESTART_POSTGRES: (1.0, 2.0),
    FaultKind.RESTART_NATS: (1.0, 2.0),
    # Connections hang for a couple of heartbeats and polls; the long soak holds them
    # for up to 20 s.
    FaultKind.BLACKHOLE_POSTGRES: (2.0, 3.0),
    FaultKind.BLACKHOLE_NATS: (2.0, 3.0),
    FaultKind.BLACKHOLE_ETCD: (2.0, 3.0),
}
"""Each kind once, as short as still shows its effect: the plan of seed 11 ends about 57 s
into the 65 s phase, leaving room for restarts slower than planned on a loaded machine
(a fault that no longer fits is skipped, and a kind never injected fails the test)."""


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_the_short_soak_loses_doubles_and_overwrites_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_soak(
        SoakConfig(
            seed=SEED,
            fault_seconds=65,
            jobs=200,
            work_dir=tmp_path,
            lead_s=4,
            warmup_s=3,
            tail_s=2,
            gap_s=(0.5, 1.0),
            every_victim=False,
            fill=False,
            durations_s=SHORT_DURATIONS_S,
            report_path=tmp_path / f"soak-{SEED}.txt",
            title=f"short soak: seed {SEED}",
        )
    )
    with capsys.disabled():
        print(f"\n{result.report}")
    assert not result.failures, result.report
    missing = {k for k in FaultKind if k not in CLUSTER_KINDS} - result.kinds_injected
    assert not missing, f"never injected: {sorted(missing)}\n{result.report}"
    assert result.findings.occurrences >= 5000, result.report
    assert result.findings.total.lost == 0


def _call(key: str, attempt: int, lease: str, at: float) -> TargetCall:
    execution = execution_id(lease)
    return TargetCall(key, attempt, execution, at, status_for(execution), at + 0.1)


def _row(key: str, attempt: int, lease: str, finished: float, status: int | None = None) -> RunRow:
    recorded = status_for(execution_id(lease)) if status is None else status
    return RunRow(key, T0, "succeeded", attempt, lease, finished, recorded)


T0 = 1_900_000_000.0


def _two_leases(seed: int) -> tuple[str, str]:
    """Two lease ids whose executions the target answers with different statuses."""
    ids = [str(uuid.UUID(int=seed * 1000 + n)) for n in range(50)]
    first = ids[0]
    second = next(i for i in ids if status_for(execution_id(i)) != status_for(execution_id(first)))
    return first, second


@pytest.mark.timeout(10)
def test_the_checks_count_what_they_claim_to() -> None:
    """Each check fails on the evidence it is about (no servers: the checks are pure)."""
    keys = {
        name: f"{uuid.UUID(int=i)}@2030-03-01T00:00:00Z"
        for i, name in enumerate(
            ["clean", "lost", "stale_status", "stale_early", "stale_older", "twice", "reissued"]
        )
    }
    leases = {name: _two_leases(i) for i, name in enumerate(keys)}
    expected = {key: T0 for key in keys.values()}

    def call(name: str, attempt: int, which: int, at: float) -> TargetCall:
        return _call(keys[name], attempt, leases[name][which], at)

    def row(name: str, attempt: int, which: int, finished: float, answered_by: int = -1) -> RunRow:
        status = None if answered_by < 0 else status_for(execution_id(leases[name][answered_by]))
        return _row(keys[name], attempt, leases[name][which], finished, status)

    calls = [
        call("clean", 1, 0, T0 + 0.1),
        # Attempt 1 froze, attempt 2 ran; the row holds lease 2 but attempt 1's result.
        call("stale_status", 1, 0, T0 + 0.1),
        call("stale_status", 2, 1, T0 + 12),
        # A success recorded before the holder's call began.
        call("stale_early", 2, 1, T0 + 12),
        # Attempt 2 was called, yet the row ends at attempt 1.
        call("stale_older", 1, 0, T0 + 0.1),
        call("stale_older", 2, 1, T0 + 12),
        # One execution id called twice.
        call("twice", 1, 0, T0 + 0.1),
        call("twice", 1, 0, T0 + 0.2),
        # Attempt 1 granted under two lease ids.
        call("reissued", 1, 0, T0 + 0.1),
        call("reissued", 1, 1, T0 + 5),
    ]
    rows = [
        row("clean", 1, 0, T0 + 0.3),
        row("stale_status", 2, 1, T0 + 12.5, answered_by=0),
        row("stale_early", 2, 1, T0 + 1),
        row("stale_older", 1, 0, T0 + 13),
        row("twice", 1, 0, T0 + 0.3),
        row("reissued", 1, 1, T0 + 5.3),
    ]
    window = FaultWindow(FaultKind.STOP_EXECUTOR, "executor-1", T0 - 1, T0 + 1, 2.0)
    stale = stale_writes(rows, calls)
    assert set(stale) == {keys["stale_status"], keys["stale_early"], keys["stale_older"]}
    findings = analyse(expected, rows, rows, calls, [window])
    bucket = findings.buckets[FaultKind.STOP_EXECUTOR.value]
    assert (bucket.expected, bucket.lost, bucket.stale) == (7, 1, 3)
    assert (bucket.double, bucket.reissued, bucket.dup_calls) == (1, 1, 4)
    assert findings.total.violations == 6
    assert findings.buckets["none"].expected == 0
