"""Two real scheduler processes share a herd of 10,000 jobs due at one instant."""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aetcd
import asyncpg
import pytest

from sundial.core.bus import RUNS_STREAM, Bus
from sundial.core.coord import connect_etcd
from sundial.core.partition import PARTITION_COUNT
from sundial.core.wire import timestamp_in
from sundial.devstack import Stack, _services
from sundial.devstack._services import Services
from sundial.run import run_key
from sundial.schedule import CronSpec, Schedule
from tests.helpers.eventually import assert_eventually
from tests.integration.scheduler.support import (
    insert_jobs,
    partition_owners,
    process_env,
    read_dispatches,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

HERD = 10_000


@pytest.fixture
def cluster_name() -> str:
    return f"p{uuid.uuid4().hex[:10]}"


@pytest.fixture
def services(
    stack: Stack, tmp_path: Path, migrated_database_url: str, cluster_name: str
) -> Iterator[Services]:
    # No executor here: the whole herd is published at once (process_env turns fair
    # sharing off).
    env = process_env(migrated_database_url, cluster_name, SUNDIAL_PUBLISH_CONFIRM_S="30")
    running = Services(stack, tmp_path, env)
    yield running
    running.stop()


def test_a_service_whose_picked_port_was_taken_starts_on_another(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A port free_port picked is free only a moment: another test's server took one
    # before the API bound it ("Address already in use"), and the stack failed to start.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        picks = iter([port])
        fresh = _services.free_port
        monkeypatch.setattr(_services, "free_port", lambda: next(picks, 0) or fresh())
        scheduler = services.add("scheduler")
        assert scheduler.address != f"127.0.0.1:{port}"
    assert list(services.processes) == ["scheduler"]


@pytest.fixture
async def etcd(stack: Stack) -> AsyncIterator[aetcd.Client]:
    client = await connect_etcd(stack.etcd_config())
    yield client
    await client.close()


async def test_two_schedulers_dispatch_a_herd_once(
    services: Services,
    etcd: aetcd.Client,
    pool: asyncpg.Pool,
    bus: Bus,
    cluster_name: str,
) -> None:
    first = await asyncio.to_thread(services.add, "scheduler")
    second = await asyncio.to_thread(services.add, "scheduler")
    nodes = {f"scheduler-{p.address.rsplit(':', 1)[1]}" for p in (first, second)}

    async def covered() -> None:
        owners = await partition_owners(etcd, cluster_name)
        assert len(owners) == PARTITION_COUNT and set(owners.values()) == nodes

    await assert_eventually(covered, timeout_s=15, what="two owners")
    start_seq = (await bus.jetstream.stream_info(RUNS_STREAM)).state.last_seq + 1
    due = await pool.fetchval("SELECT date_trunc('second', now())")
    jobs = await insert_jobs(pool, Schedule(CronSpec("0 0 * * *")), first_due=due, count=HERD)
    wanted = {run_key(job, due) for job in jobs}

    seen: Counter[str] = Counter()
    publishers: set[str] = set()
    cursor = [start_seq]

    async def all_published() -> None:
        dispatches, cursor[0] = await read_dispatches(bus.jetstream, cursor[0])
        for dispatch in dispatches:
            for ref in dispatch.runs:
                key = run_key(ref.job_id, timestamp_in(ref.scheduled_at, "scheduled_at"))
                if key in wanted:
                    seen[key] += 1
                    publishers.add(dispatch.node_id)
        assert len(seen) == HERD, f"{HERD - len(seen)} run keys not published yet"

    await assert_eventually(all_published, timeout_s=60, interval_s=0.2, what="publish")
    assert max(seen.values()) == 1, "a run key was published twice"
    assert publishers == nodes  # both schedulers took part
    rows = await pool.fetchrow(
        "SELECT count(*) AS runs, count(DISTINCT job_id) AS jobs FROM job_runs"
    )
    assert (rows["runs"], rows["jobs"]) == (HERD, HERD)
    advanced = await pool.fetchval("SELECT count(*) FROM jobs WHERE next_run_at > $1", due)
    assert advanced == HERD
