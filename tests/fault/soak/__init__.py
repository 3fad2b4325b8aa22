"""A bounded, seeded soak of the whole system under faults (issue 11, item 8).

Real processes on loopback: PostgreSQL, NATS JetStream and etcd from the local stack (or
three-node NATS and etcd clusters), the API, two schedulers and two executors, every
service reaching its dependencies through a TCP proxy, and a recording HTTP target.
Hundreds of jobs firing every 1-3 s give thousands of occurrences while faults run on a
schedule drawn from ``random.Random(seed)``: kill -9 and SIGSTOP of each scheduler and
executor, PostgreSQL ``restart -m immediate``, NATS kill -9 and restart, connections cut
and black-holed at each proxy, and (on clusters) a NATS node or an etcd member lost.
After a bounded drain, the checks of :mod:`._checks` compare what ran with what the
schedules say should have: lost, doubly dispatched, stale writes, re-issued attempts,
duplicate target calls, lateness and time to drain, per fault.

Two sizes from the same code: ``tests/fault/test_soak.py`` (about 90 seconds, in
``make test``) and ``make chaos`` (``python -m tests.fault.soak``: several minutes per
seed, seeds and length from ``SUNDIAL_SOAK_SEEDS`` and ``SUNDIAL_SOAK_SECONDS``).
"""

from tests.fault.soak._checks import (
    Bucket,
    Findings,
    RunRow,
    analyse,
    execution_id,
    stale_writes,
)
from tests.fault.soak._faults import FaultWindow
from tests.fault.soak._harness import (
    SOAK_ENV,
    SoakConfig,
    SoakResult,
    run_soak,
    stack_supports_clusters,
)
from tests.fault.soak._plan import (
    CLUSTER_KINDS,
    FaultKind,
    PlannedFault,
    PlanShape,
    kinds_for,
    plan_faults,
)
from tests.fault.soak._target import SoakTarget, TargetCall, status_for

__all__ = [
    "CLUSTER_KINDS",
    "SOAK_ENV",
    "Bucket",
    "FaultKind",
    "FaultWindow",
    "Findings",
    "PlanShape",
    "PlannedFault",
    "RunRow",
    "SoakConfig",
    "SoakResult",
    "SoakTarget",
    "TargetCall",
    "analyse",
    "execution_id",
    "kinds_for",
    "plan_faults",
    "run_soak",
    "stack_supports_clusters",
    "stale_writes",
    "status_for",
]
