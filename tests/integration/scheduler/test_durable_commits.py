"""The ledger's grants and outcomes commit synchronously, whatever the server's default
(docs/design.md section 10, "Commits that hand out attempts").

The test database's default is set to ``synchronous_commit=off`` (what the fast local
stack runs with), and the setting is read inside the real LeaseRuns and CompleteRuns
transactions through a real gRPC server.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import AsyncIterator

import asyncpg
import pytest

from sundial.core.bus import Bus
from sundial.core.clock import ManualClock
from sundial.core.config import DatabaseConfig
from sundial.core.db import close_pool, create_pool
from sundial.devstack import Stack
from sundial.internal.v1 import ledger_pb2
from sundial.scheduler.ledger import RunLedgerServiceServicer
from sundial.scheduler.store import SchedulerStore
from sundial.scheduler.store._tx import Transaction
from tests.integration.scheduler.conftest import scheduler_config
from tests.integration.scheduler.support import add_tenant, insert_jobs, insert_queued_runs
from tests.integration.scheduler.test_ledger import DAILY, T0, complete, lease, ref, serve

pytestmark = pytest.mark.timeout(60)


class SettingSpy(SchedulerStore):
    """The real store, noting ``synchronous_commit`` as each transaction sees it."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        super().__init__(pool)
        self.seen: list[str] = []

    @contextlib.asynccontextmanager
    async def transaction(self, *, durable: bool = False) -> AsyncIterator[Transaction]:
        async with super().transaction(durable=durable) as tx:
            self.seen.append(await tx._conn.fetchval("SHOW synchronous_commit"))
            yield tx


async def pool_with_default(database_url: str, setting: str) -> asyncpg.Pool:
    """A pool on ``database_url`` whose sessions start with ``synchronous_commit`` =
    ``setting`` (a database default, as a server default would be)."""
    conn = await asyncpg.connect(database_url)
    try:
        database = await conn.fetchval("SELECT current_database()")
        await conn.execute(f'ALTER DATABASE "{database}" SET synchronous_commit = {setting}')
    finally:
        await conn.close()
    config = DatabaseConfig(database_url=database_url, pool_max_size=4)
    return await create_pool(config, application_name="test-durable")


@pytest.fixture
async def pool(migrated_database_url: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await pool_with_default(migrated_database_url, "off")
    await add_tenant(pool)
    yield pool
    await close_pool(pool, 5.0)


async def test_lease_and_completion_commit_synchronously_under_a_default_of_off(
    pool: asyncpg.Pool, bus: Bus, stack: Stack, migrated_database_url: str
) -> None:
    store = SettingSpy(pool)
    async with store.transaction():
        pass
    assert store.seen == ["off"], "the database default must be off for this test to mean much"
    [job] = await insert_jobs(pool, DAILY, first_due=T0)
    await insert_queued_runs(pool, job, [T0])
    servicer = RunLedgerServiceServicer(
        store,
        bus.jetstream,
        scheduler_config(migrated_database_url, stack),
        ManualClock(T0),
        random.Random(7),
    )
    async with serve(servicer, pool) as ledger:
        store.seen.clear()
        [granted] = await lease(ledger, [ref(job, T0)])
        assert granted.grant.attempt == 1
        assert store.seen == ["on"]  # the grant transaction
        done = await complete(ledger, ref(job, T0), 1, ledger_pb2.OUTCOME_STATUS_SUCCEEDED)
        assert done.accepted
        assert store.seen == ["on", "on"]  # and the outcome's
    # Only for those transactions (SET LOCAL): the pool's sessions keep the default.
    assert await pool.fetchval("SHOW synchronous_commit") == "off"


@pytest.mark.parametrize(
    ("default", "inside"),
    [("off", "on"), ("local", "on"), ("remote_write", "on"), ("remote_apply", "remote_apply")],
)
async def test_a_durable_transaction_raises_the_setting_and_never_lowers_it(
    migrated_database_url: str, default: str, inside: str
) -> None:
    pool = await pool_with_default(migrated_database_url, default)
    try:
        store = SettingSpy(pool)
        async with store.transaction(durable=True):
            pass
        async with store.transaction():
            pass
        assert store.seen == [inside, default]
    finally:
        await close_pool(pool, 5.0)
