"""A snapshot of the scheduler cluster for AdminService.ClusterStatus.

Membership and partition owners are read from etcd (the keys the schedulers' membership
component writes, docs/design.md section 6); the dispatch lag from PostgreSQL.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import aetcd
import asyncpg

from sundial.core.partition import PARTITION_COUNT

__all__ = ["ClusterSnapshot", "cluster_status"]

# The oldest due next_run_at, one index probe per partition on jobs_due_idx
# (partition_id, next_run_at) WHERE NOT paused, instead of a scan of every job.
_OLDEST_DUE = """
SELECT min(first.next_run_at) AS oldest, now() AS observed_at
  FROM generate_series(0, $1::int - 1) AS p(partition_id)
  CROSS JOIN LATERAL (
        SELECT next_run_at FROM jobs
         WHERE partition_id = p.partition_id AND NOT paused AND next_run_at IS NOT NULL
         ORDER BY next_run_at LIMIT 1) AS first
 WHERE first.next_run_at <= now()
"""


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """What ClusterStatus reports.

    Attributes:
        cluster: The cluster name (etcd prefix ``/sundial/<cluster>/``).
        members: Live scheduler node ids, sorted.
        owners: One entry per partition, in order: the owning node id, or ``""``.
        oldest_due: The oldest ``next_run_at`` among unpaused due jobs, or None.
        dispatch_lag: ``observed_at - oldest_due``; zero when nothing is due.
        observed_at: The database's "now" for this snapshot.
    """

    cluster: str
    members: list[str]
    owners: list[str]
    oldest_due: datetime | None
    dispatch_lag: timedelta
    observed_at: datetime


async def cluster_status(etcd: aetcd.Client, pool: asyncpg.Pool, cluster: str) -> ClusterSnapshot:
    """Read membership and ownership from etcd and the dispatch lag from the database."""
    members_prefix = f"/sundial/{cluster}/members/"
    partitions_prefix = f"/sundial/{cluster}/partitions/"
    members = sorted(
        kv.key.decode().removeprefix(members_prefix)
        for kv in await etcd.get_prefix(members_prefix.encode())
    )
    owners = [""] * PARTITION_COUNT
    for kv in await etcd.get_prefix(partitions_prefix.encode()):
        suffix = kv.key.decode().removeprefix(partitions_prefix)
        if suffix.isdigit() and int(suffix) < PARTITION_COUNT:
            owners[int(suffix)] = kv.value.decode()
    row = await pool.fetchrow(_OLDEST_DUE, PARTITION_COUNT)
    assert row is not None, "an aggregate without GROUP BY returns exactly one row"
    observed_at: datetime = row["observed_at"]
    oldest: datetime | None = row["oldest"]
    lag = max(observed_at - oldest, timedelta(0)) if oldest else timedelta(0)
    return ClusterSnapshot(cluster, members, owners, oldest, lag, observed_at)
