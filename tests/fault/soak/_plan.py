"""The fault schedule: which fault, on which process, when and for how long (pure).

A plan is drawn from ``random.Random(seed)`` alone, so a seed names one run of the soak:
the same seed gives the same faults in the same order with the same lengths (where they
land in time still depends on how long restarts take, which the harness records).
Faults do not overlap: each one's window ends before the next begins, so an occurrence
can be blamed on one fault, the one whose window holds its nominal time.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Mapping
from dataclasses import dataclass


class FaultKind(enum.StrEnum):
    """Every fault the soak injects; the value is the report's name for it."""

    KILL_SCHEDULER = "kill -9 scheduler"
    STOP_SCHEDULER = "SIGSTOP scheduler"
    KILL_EXECUTOR = "kill -9 executor"
    STOP_EXECUTOR = "SIGSTOP executor"
    RESTART_POSTGRES = "postgres restart -m immediate"
    RESTART_NATS = "nats kill -9 + restart"
    CUT_POSTGRES = "cut postgres"
    CUT_NATS = "cut nats"
    CUT_ETCD = "cut etcd"
    BLACKHOLE_POSTGRES = "blackhole postgres"
    BLACKHOLE_NATS = "blackhole nats"
    BLACKHOLE_ETCD = "blackhole etcd"
    LOSE_NATS_NODE = "nats node lost"
    LOSE_ETCD_MEMBER = "etcd member lost"


CLUSTER_KINDS = frozenset({FaultKind.LOSE_NATS_NODE, FaultKind.LOSE_ETCD_MEMBER})
"""Faults that need three-node clusters (``Stack(cluster_size=3)``)."""

SCHEDULER_KINDS = frozenset({FaultKind.KILL_SCHEDULER, FaultKind.STOP_SCHEDULER})
EXECUTOR_KINDS = frozenset({FaultKind.KILL_EXECUTOR, FaultKind.STOP_EXECUTOR})

LONG_DURATIONS_S: Mapping[FaultKind, tuple[float, float]] = {
    # kill -9: how long the process stays dead before it is started again.
    FaultKind.KILL_SCHEDULER: (1.0, 6.0),
    FaultKind.KILL_EXECUTOR: (1.0, 6.0),
    # SIGSTOP: from under the etcd lease (3 s) to past a run lease (10 s).
    FaultKind.STOP_SCHEDULER: (2.0, 15.0),
    FaultKind.STOP_EXECUTOR: (3.0, 15.0),
    # Down time between the crash and the start again (at least a second, so the window
    # holds an occurrence: they fall on whole seconds).
    FaultKind.RESTART_POSTGRES: (1.0, 4.0),
    FaultKind.RESTART_NATS: (1.0, 5.0),
    # A cut is instantaneous; its window covers the reconnections.
    FaultKind.CUT_POSTGRES: (2.0, 2.0),
    FaultKind.CUT_NATS: (2.0, 2.0),
    FaultKind.CUT_ETCD: (2.0, 2.0),
    FaultKind.BLACKHOLE_POSTGRES: (3.0, 15.0),
    FaultKind.BLACKHOLE_NATS: (3.0, 15.0),
    FaultKind.BLACKHOLE_ETCD: (3.0, 20.0),
    FaultKind.LOSE_NATS_NODE: (5.0, 20.0),
    FaultKind.LOSE_ETCD_MEMBER: (5.0, 20.0),
}
"""(shortest, longest) length of each fault in the long soak, seconds."""

RESTART_ALLOWANCE_S: Mapping[FaultKind, float] = {
    FaultKind.KILL_SCHEDULER: 4.0,
    FaultKind.KILL_EXECUTOR: 3.0,
    FaultKind.RESTART_POSTGRES: 2.0,
    FaultKind.RESTART_NATS: 1.5,
    FaultKind.LOSE_NATS_NODE: 1.5,
    FaultKind.LOSE_ETCD_MEMBER: 2.0,
}
"""What a restart adds to a window beyond its planned length (laying out the plan)."""


@dataclass(frozen=True, slots=True)
class PlannedFault:
    """One fault of the plan."""

    kind: FaultKind
    at_s: float
    """Planned start, seconds after the fault phase began."""
    duration_s: float
    """How long it lasts (a kill: the time dead; SIGSTOP: the time frozen)."""
    victim: int = 0
    """Which scheduler, executor, NATS node or etcd member (an index)."""


@dataclass(frozen=True, slots=True)
class PlanShape:
    """What a plan is drawn for."""

    seconds: float
    """Length of the fault phase."""
    schedulers: int = 2
    executors: int = 2
    cluster_nodes: int = 1
    """NATS nodes (and etcd members) of the stack: cluster faults need 3."""
    warmup_s: float = 5.0
    """Quiet time before the first fault."""
    tail_s: float = 3.0
    """Quiet time after the last fault's window, before the fault phase ends."""
    gap_s: tuple[float, float] = (1.0, 3.0)
    """Quiet time between two windows."""
    every_victim: bool = True
    """Process faults hit each scheduler and each executor at least once (else one of
    them, drawn at random); cluster faults each node once."""
    fill: bool = True
    """After every fault kind has had its turn, draw more until the phase is full."""
    durations_s: Mapping[FaultKind, tuple[float, float]] | None = None
    """Override of :data:`LONG_DURATIONS_S` per kind."""


def kinds_for(shape: PlanShape) -> list[FaultKind]:
    """The fault kinds this stack can take (cluster faults only on three nodes)."""
    return [k for k in FaultKind if k not in CLUSTER_KINDS or shape.cluster_nodes == 3]


def _victims(kind: FaultKind, shape: PlanShape) -> int:
    if kind in SCHEDULER_KINDS:
        return shape.schedulers
    if kind in EXECUTOR_KINDS:
        return shape.executors
    if kind in CLUSTER_KINDS:
        return shape.cluster_nodes
    return 1


def plan_faults(seed: int, shape: PlanShape) -> list[PlannedFault]:
    """The faults of seed ``seed``, laid out one after another over ``shape.seconds``.

    Every kind the stack can take comes first, in a shuffled order (each process and
    node when ``every_victim``); then, with ``fill``, kinds drawn at random while they fit.

    Raises:
        ValueError: The mandatory faults do not fit in the phase.
    """
    rng = random.Random(seed)
    durations = {**LONG_DURATIONS_S, **(shape.durations_s or {})}
    mandatory: list[tuple[FaultKind, int]] = []
    for kind in kinds_for(shape):
        count = _victims(kind, shape)
        if shape.every_victim:
            mandatory.extend((kind, victim) for victim in range(count))
        else:
            mandatory.append((kind, rng.randrange(count)))
    rng.shuffle(mandatory)
    end = shape.seconds - shape.tail_s
    plan: list[PlannedFault] = []
    # Occurrences fall on whole seconds: start off them, so runs are in flight.
    at = shape.warmup_s + rng.uniform(0.1, 0.9)

    def lay(kind: FaultKind, victim: int) -> bool:
        nonlocal at
        low, high = durations[kind]
        duration = round(rng.uniform(low, high), 1)
        finish = at + duration + RESTART_ALLOWANCE_S.get(kind, 0.0)
        if finish > end:
            return False
        plan.append(PlannedFault(kind, round(at, 1), duration, victim))
        at = finish + rng.uniform(*shape.gap_s)
        return True

    for kind, victim in mandatory:
        if not lay(kind, victim):
            raise ValueError(
                f"seed {seed}: {len(mandatory)} faults do not fit in {shape.seconds:.0f} s "
                f"(placed {len(plan)}); lengthen the phase or shorten the faults"
            )
    kinds = kinds_for(shape)
    while shape.fill:
        kind = rng.choice(kinds)
        if not lay(kind, rng.randrange(_victims(kind, shape))):
            break
    return plan
