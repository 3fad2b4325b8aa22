"""Scheduler processes crashing (kill -9) and freezing (SIGSTOP) keep docs/design.md section 1.

Each test runs real ``sundial-scheduler`` processes against the session's PostgreSQL,
NATS and etcd, with a 3 s etcd lease, and jobs firing every second so that occurrences
fall inside the fault window. Afterwards every job must have exactly one run per
occurrence: none lost, none twice.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timedelta
from pathlib import Path

import aetcd
import asyncpg
import pytest

from sundial.core.config import DatabaseConfig
from sundial.core.coord import connect_etcd
from sundial.core.db import close_pool, create_pool
from sundial.core.partition import PARTITION_COUNT
from sundial.devstack import Stack
from sundial.devstack._services import ServiceProcess, Services
from sundial.schedule import IntervalSpec, Schedule
from tests.helpers.eventually import assert_eventually
from tests.integration.scheduler.support import (
    add_tenant,
    assert_contiguous_runs,
    insert_jobs,
    partition_owners,
    process_env,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

EVERY = timedelta(seconds=1)
LEASE_TTL_S = 3
MEMBERSHIP_POLL_S = 0.5


@pytest.fixture
def cluster_name() -> str:
    return f"f{uuid.uuid4().hex[:10]}"


@pytest.fixture
def services(
    stack: Stack, tmp_path: Path, migrated_database_url: str, cluster_name: str
) -> Iterator[Services]:
    running = Services(stack, tmp_path, process_env(migrated_database_url, cluster_name))
    yield running
    for process in running.processes.values():
        if process.process.pid and process.process.alive():
            os.kill(process.process.pid, signal.SIGCONT)  # a frozen one must hear SIGTERM
    running.stop()


@pytest.fixture
async def etcd(stack: Stack) -> AsyncIterator[aetcd.Client]:
    client = await connect_etcd(stack.etcd_config())
    yield client
    await client.close()


@pytest.fixture
async def fault_pool(migrated_database_url: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await create_pool(DatabaseConfig(database_url=migrated_database_url, pool_max_size=2))
    await add_tenant(pool)
    yield pool
    await close_pool(pool, 5.0)


def node_of(process: ServiceProcess) -> str:
    return f"scheduler-{process.address.rsplit(':', 1)[1]}"


async def start(services: Services, count: int) -> list[ServiceProcess]:
    return [await asyncio.to_thread(services.add, "scheduler") for _ in range(count)]


async def covered_by(etcd: aetcd.Client, cluster: str, nodes: set[str]) -> dict[int, str]:
    owners = await partition_owners(etcd, cluster)
    assert len(owners) == PARTITION_COUNT, f"{PARTITION_COUNT - len(owners)} unowned"
    assert set(owners.values()) == nodes, set(owners.values())
    return owners


async def db_now(pool: asyncpg.Pool) -> datetime:
    """PostgreSQL's clock, the one ``next_run_at`` and the schedulers' claims use."""
    return await pool.fetchval("SELECT now()")  # type: ignore[no-any-return]


async def dispatched_through(pool: asyncpg.Pool, at: datetime) -> None:
    """Every job's occurrences up to ``at`` were dispatched (its ``next_run_at`` moved
    past ``at`` in the transaction that inserted their runs)."""
    behind = await pool.fetchval("SELECT count(*) FROM jobs WHERE next_run_at <= $1", at)
    assert behind == 0, f"{behind} jobs not dispatched through {at}"


async def make_jobs(pool: asyncpg.Pool, count: int) -> datetime:
    first_due: datetime = await pool.fetchval("SELECT date_trunc('second', now())")
    first_due += timedelta(seconds=2)
    await insert_jobs(pool, Schedule(IntervalSpec(EVERY)), first_due=first_due, count=count)
    return first_due


async def test_kill_9_partitions_move_within_ttl_and_nothing_is_lost_or_doubled(
    services: Services, etcd: aetcd.Client, fault_pool: asyncpg.Pool, cluster_name: str
) -> None:
    first_due = await make_jobs(fault_pool, 200)
    processes = await start(services, 3)
    nodes = {node_of(p) for p in processes}
    await assert_eventually(
        lambda: covered_by(etcd, cluster_name, nodes), timeout_s=15, what="three owners"
    )
    # Several occurrences dispatched normally first.
    await assert_eventually(
        lambda: dispatched_through(fault_pool, first_due + EVERY),
        timeout_s=15,
        what="two occurrences before the kill",
    )
    victim, *rest = processes
    assert victim.process.pid is not None
    os.kill(victim.process.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    await assert_eventually(
        lambda: covered_by(etcd, cluster_name, {node_of(p) for p in rest}),
        timeout_s=LEASE_TTL_S + MEMBERSHIP_POLL_S + 5,
        interval_s=0.1,
        what="takeover after kill -9",
    )
    moved_after = time.monotonic() - killed_at
    assert moved_after <= LEASE_TTL_S + MEMBERSHIP_POLL_S + 1.5, moved_after
    # Occurrences due after the takeover, dispatched by the survivors.
    taken_over = await db_now(fault_pool)
    await assert_eventually(
        lambda: dispatched_through(fault_pool, taken_over + 2 * EVERY),
        timeout_s=15,
        what="two occurrences after the takeover",
    )
    for process in rest:
        await asyncio.to_thread(process.stop)
    total = await assert_contiguous_runs(fault_pool, EVERY, first_due)
    assert total >= 200 * 5
    # Runs the victim committed but never published were republished by the new owners.
    unpublished = await fault_pool.fetchval(
        "SELECT count(*) FROM job_runs WHERE status = 'queued' AND dispatch_seq = 0"
    )
    assert unpublished == 0


async def test_sigstop_past_the_lease_gives_up_partitions_and_duplicates_nothing(
    services: Services,
    etcd: aetcd.Client,
    fault_pool: asyncpg.Pool,
    cluster_name: str,
    tmp_path: Path,
) -> None:
    first_due = await make_jobs(fault_pool, 200)
    frozen, other = await start(services, 2)
    both = {node_of(frozen), node_of(other)}
    await assert_eventually(lambda: covered_by(etcd, cluster_name, both), timeout_s=15)
    await assert_eventually(
        lambda: dispatched_through(fault_pool, first_due),
        timeout_s=15,
        what="an occurrence before the freeze",
    )
    assert frozen.process.pid is not None
    os.kill(frozen.process.pid, signal.SIGSTOP)
    try:
        await assert_eventually(
            lambda: covered_by(etcd, cluster_name, {node_of(other)}),
            timeout_s=LEASE_TTL_S + 6,
            what="the live scheduler owns everything",
        )
        # While the frozen one still thinks it owns its partitions, the live one
        # dispatches their jobs' next occurrence.
        taken_over = await db_now(fault_pool)
        await assert_eventually(
            lambda: dispatched_through(fault_pool, taken_over + EVERY),
            timeout_s=15,
            what="an occurrence after the takeover",
        )
    finally:
        os.kill(frozen.process.pid, signal.SIGCONT)
    log_file = frozen.process.log_path

    def gave_up() -> None:
        text = log_file.read_text()
        assert "lease lost" in text or "member key missing" in text, "no lease-loss log line"

    await assert_eventually(gave_up, timeout_s=10, what="resumed scheduler gives up")
    # It rejoins with a new lease and takes its share back without a double owner.
    await assert_eventually(lambda: covered_by(etcd, cluster_name, both), timeout_s=15)
    rejoined = await db_now(fault_pool)
    await assert_eventually(
        lambda: dispatched_through(fault_pool, rejoined + 2 * EVERY),
        timeout_s=15,
        what="two occurrences after the rejoin",
    )
    for process in (frozen, other):
        await asyncio.to_thread(process.stop)
    await assert_contiguous_runs(fault_pool, EVERY, first_due)
