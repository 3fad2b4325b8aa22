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
import time
from collections.abc import AsyncIterator, Callable
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
PROBE_S = 6.0
"""How long a frozen replica is given to turn out to carry the heartbeat stream: the
executor finds a stream silent an interval (1 s) plus a 2 s margin after an unanswered
beat, and logs it; a replica that stays unnoticed this long does not carry it."""
SILENT = "heartbeat stream silent"


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
        # Side by side; the executor is given both schedulers' addresses.
        await asyncio.to_thread(services.start, 2, executors=1)
        ledgers = [p for p in services.processes.values() if p.name == "scheduler"]
        async with dial(services.processes["api"].address, None) as channel:
            yield Cluster(services, channel), ledgers
    finally:
        await asyncio.to_thread(services.stop)


async def freeze_the_carrier(ledgers: list[ServiceProcess], executor: ServiceProcess) -> None:
    """SIGSTOP each replica in turn until one turns out to carry the executor's heartbeat
    stream (the executor logs the stream silent); keep that one frozen for ``FREEZE_S``
    of wall time, then SIGCONT. Fails when no replica carried it."""

    def silences() -> int:
        return executor.process.log_path.read_text().count(SILENT)

    def more_silences_than(count: int) -> Callable[[], bool]:
        return lambda: silences() > count

    for ledger in ledgers:
        proc = ledger.process.proc
        assert proc is not None
        stream_left = more_silences_than(silences())
        frozen_at = time.monotonic()
        proc.send_signal(signal.SIGSTOP)
        try:
            try:
                await assert_eventually(
                    stream_left,
                    timeout_s=PROBE_S,
                    interval_s=0.1,
                    what="the executor finding its heartbeat stream silent",
                )
            except AssertionError:
                continue  # not the carrier: resume it, freeze the next
            # The fault's duration, not a wait for an outcome.
            await asyncio.sleep(FREEZE_S - (time.monotonic() - frozen_at))
            return
        finally:
            proc.send_signal(signal.SIGCONT)
    raise AssertionError("no frozen replica carried the executor's heartbeat stream")


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
        await freeze_the_carrier(ledgers, cluster.services.processes["executor"])
        target.release("/long")
        [run] = await assert_eventually(
            lambda: runs_with(tenant, job.job_id, SUCCEEDED, 1), timeout_s=30, interval_s=0.5
        )
        calls = target.calls_to("/long")
        assert [c.attempt for c in calls] == [1], "the run was executed again"
        assert run.attempt == 1 and run.status == run_pb2.RUN_STATUS_SUCCEEDED
