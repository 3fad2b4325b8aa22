"""End to end: an executor that knows every ledger keeps its leases when one freezes.

Two schedulers (two RunLedger replicas) and one executor given both addresses: the
channel balances round robin, so a Heartbeat stream that falls silent is reopened on the
other replica. A scheduler frozen (SIGSTOP) for longer than a lease costs no lease and
no second execution; with a single ledger address the same freeze let leases lapse and
the runs were executed again (issue 11).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from sundial.core.tls import dial
from sundial.devstack import ServiceProcess, Services, Stack
from sundial.v1 import run_pb2
from tests.e2e.test_executor_runs import SUCCEEDED, http_job, once, runs_with
from tests.helpers.cluster import FAST_ENV, Cluster, reset_streams
from tests.helpers.eventually import assert_eventually
from tests.helpers.target_server import RecordingTarget

pytestmark = [pytest.mark.timeout(150), pytest.mark.slow]

LEASE_S = 10
FREEZE_S = LEASE_S + 5
"""Longer than a lease: a lease renewed only through the frozen replica would lapse."""


@contextlib.asynccontextmanager
async def two_ledgers(
    stack: Stack, database_url: str, log_dir: Path
) -> AsyncIterator[tuple[Cluster, list[ServiceProcess]]]:
    await reset_streams(stack)
    services = Services(
        stack,
        log_dir=log_dir,
        extra_env={**FAST_ENV, "SUNDIAL_DATABASE_URL": database_url},
    )
    try:
        await asyncio.to_thread(services.add, "api")
        ledgers = [await asyncio.to_thread(services.add, "scheduler") for _ in range(2)]
        services.extra_env["SUNDIAL_LEDGER_ADDRESS"] = ",".join(s.address for s in ledgers)
        await asyncio.to_thread(services.add, "executor")
        async with dial(services.processes["api"].address, None) as channel:
            yield Cluster(services, channel), ledgers
    finally:
        await asyncio.to_thread(services.stop)


async def freeze(process: ServiceProcess, seconds: float) -> None:
    """SIGSTOP ``process`` for ``seconds`` of wall time, then SIGCONT."""
    proc = process.process.proc
    assert proc is not None
    proc.send_signal(signal.SIGSTOP)
    try:
        await asyncio.sleep(seconds)  # the fault's duration, not a wait for an outcome
    finally:
        proc.send_signal(signal.SIGCONT)


async def test_a_frozen_ledger_costs_no_lease_and_no_second_execution(
    stack: Stack, migrated_database_url: str, tmp_path: Path, target: RecordingTarget
) -> None:
    target.hold("/long")
    async with two_ledgers(stack, migrated_database_url, tmp_path) as (cluster, ledgers):
        tenant = await cluster.tenant()
        when = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
        job = await tenant.create_job(http_job("long", f"{target.url}/long", once(when)))

        def called() -> None:
            assert len(target.calls_to("/long")) >= 1

        await assert_eventually(called, timeout_s=20)
        # Whichever replica carries the heartbeat stream, one of these freezes hits it.
        for ledger in ledgers:
            await freeze(ledger, FREEZE_S)
        target.release("/long")
        [run] = await assert_eventually(
            lambda: runs_with(tenant, job.job_id, SUCCEEDED, 1), timeout_s=30, interval_s=0.5
        )
        calls = target.calls_to("/long")
        assert [c.attempt for c in calls] == [1], "the run was executed again"
        assert run.attempt == 1 and run.status == run_pb2.RUN_STATUS_SUCCEEDED
