"""The long soak (``make chaos``): every seed of ``SUNDIAL_SOAK_SEEDS`` in turn.

Environment (all optional):

- ``SUNDIAL_SOAK_SEEDS``: comma-separated seeds (default ``1,2``);
- ``SUNDIAL_SOAK_SECONDS``: length of each fault phase (default 300: every fault, each
  process and node, fits in it for any seed tried);
- ``SUNDIAL_SOAK_JOBS``: jobs (default 200: about 120 occurrences a second);
- ``SUNDIAL_SOAK_CLUSTER``: 3 for three-node NATS and etcd clusters, 1 for single
  servers (default 3 when the local stack can start clusters).

Each seed's report is printed and written to ``bench/results/chaos-<seed>.txt``; the
exit status is 1 when any seed broke a guarantee.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from tests.fault.soak._harness import SoakConfig, run_soak, stack_supports_clusters

RESULTS = Path(__file__).resolve().parents[3] / "bench" / "results"
LONG_DRAIN_S = 120.0
"""Longer than the short soak's: a long fault phase can leave a deeper backlog."""


def main() -> int:
    seeds = [int(s) for s in os.environ.get("SUNDIAL_SOAK_SEEDS", "1,2").split(",") if s.strip()]
    seconds = float(os.environ.get("SUNDIAL_SOAK_SECONDS", "300"))
    jobs = int(os.environ.get("SUNDIAL_SOAK_JOBS", "200"))
    cluster = int(os.environ.get("SUNDIAL_SOAK_CLUSTER", "3" if stack_supports_clusters() else "1"))
    failed = []
    for seed in seeds:
        work_dir = Path(tempfile.mkdtemp(prefix=f"chaos-{seed}-"))
        result = run_soak(
            SoakConfig(
                seed=seed,
                fault_seconds=seconds,
                jobs=jobs,
                cluster_size=cluster,
                drain_s=LONG_DRAIN_S,
                work_dir=work_dir,
                report_path=RESULTS / f"chaos-{seed}.txt",
                title=f"make chaos: seed {seed}, {seconds:.0f} s of faults",
            )
        )
        print(result.report, flush=True)
        if result.failures:
            failed.append(seed)
        else:
            shutil.rmtree(work_dir, ignore_errors=True)
    if failed:
        print(f"guarantees broken with seeds {failed}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
