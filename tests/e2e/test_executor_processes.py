"""An executor of several worker processes (SUNDIAL_EXECUTOR_PROCESSES=2) as a real
process tree: the workers run the runs, a killed worker is replaced, SIGTERM drains
every worker before the supervisor exits."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from sundial.devstack import Services, Stack, health_status
from sundial.devstack._process import tail
from sundial.v1 import job_pb2, run_pb2
from tests.helpers.cluster import Cluster, Tenant, shared_services, with_own_executor
from tests.helpers.eventually import assert_eventually
from tests.helpers.target_server import RecordingTarget

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

WORKERS = 2


@pytest.fixture(scope="module")
def api_and_scheduler(
    stack: Stack, module_database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Services]:
    """The API and the scheduler for the module's tests; each test starts an executor of
    its own, since each kills or stops it."""
    with shared_services(
        stack,
        module_database_url,
        tmp_path_factory.mktemp("processes"),
        executors=0,
        SUNDIAL_EXECUTOR_PROCESSES=str(WORKERS),
        # Room for a draining worker to wait for its held call however slow the host
        # (only a stop that goes wrong waits this long).
        SUNDIAL_GRACE_PERIOD_S="30",
    ) as services:
        yield services


@pytest.fixture
async def cluster(api_and_scheduler: Services) -> AsyncIterator[Cluster]:
    """The module's API and scheduler with a new executor (``processes["executor"]``)."""
    async with with_own_executor(api_and_scheduler) as running:
        yield running


def children(pid: int) -> set[int]:
    """The live child processes of ``pid``."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.add(int(entry))
    return found


def supervisor(cluster: Cluster) -> subprocess.Popen[bytes]:
    proc = cluster.services.processes["executor"].process.proc
    assert proc is not None
    return proc


async def workers_of(pid: int, *, not_in: frozenset[int] = frozenset()) -> set[int]:
    def check() -> set[int]:
        found = children(pid)
        assert len(found) == WORKERS, f"workers {found}"
        assert not found & not_in, f"still {found & not_in}"
        return found

    return await assert_eventually(check, timeout_s=30)


async def one_time_jobs(tenant: Tenant, url: str, count: int, *, in_s: int = 2) -> list[str]:
    when = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=in_s)
    ids = []
    for i in range(count):
        schedule = job_pb2.Schedule()
        schedule.once.FromDatetime(when)
        job = job_pb2.Job(
            name=f"job-{i}-{when.timestamp():.0f}",
            schedule=schedule,
            target=job_pb2.Target(http=job_pb2.HttpTarget(url=url)),
        )
        ids.append((await tenant.create_job(job)).job_id)  # type: ignore[attr-defined]
    return ids


async def succeeded(tenant: Tenant, job_ids: list[str]) -> list[run_pb2.Run]:
    runs = []
    for job_id in job_ids:
        done = [r for r in await tenant.runs(job_id) if r.status == run_pb2.RUN_STATUS_SUCCEEDED]
        assert done, f"job {job_id} has no succeeded run yet"
        runs.extend(done)
    return runs


async def test_the_workers_run_the_runs_and_a_killed_worker_is_replaced(
    cluster: Cluster, target: RecordingTarget
) -> None:
    pid = supervisor(cluster).pid
    first = await workers_of(pid)
    tenant = await cluster.tenant()
    jobs = await one_time_jobs(tenant, f"{target.url}/a", 20)
    runs = await assert_eventually(lambda: succeeded(tenant, jobs), timeout_s=40, interval_s=0.5)
    node = f"{cluster.services.processes['executor'].address.rsplit(':', 1)[1]}"
    for run in runs:
        # The workers' node ids: the executor's own, with the worker's index.
        assert any(f"-{node}-{i}/" in run.executor_id for i in range(WORKERS)), run.executor_id
    assert sorted(target.keys("/a")) == sorted(r.run_key for r in runs)

    killed = min(first)
    os.kill(killed, signal.SIGKILL)
    replaced = await workers_of(pid, not_in=frozenset({killed}))
    assert len(replaced & first) == WORKERS - 1
    address = cluster.services.processes["executor"].address

    def serving() -> None:
        assert health_status(address) == "SERVING"

    await assert_eventually(serving, timeout_s=30)
    later = await one_time_jobs(tenant, f"{target.url}/b", 10)
    await assert_eventually(lambda: succeeded(tenant, later), timeout_s=40, interval_s=0.5)


async def test_sigterm_drains_every_worker_then_the_supervisor_exits_0(
    cluster: Cluster, target: RecordingTarget
) -> None:
    proc = supervisor(cluster)
    workers = await workers_of(proc.pid)
    target.hold("/slow")
    tenant = await cluster.tenant()
    [job_id] = await one_time_jobs(tenant, f"{target.url}/slow", 1, in_s=1)

    await assert_eventually(lambda: slow_called(cluster, target, tenant, job_id), timeout_s=30)
    proc.send_signal(signal.SIGTERM)
    # Draining: the held call is let finish within the grace period and reported.
    await assert_eventually(lambda: _not_serving(cluster), timeout_s=10)
    target.release("/slow")
    code = await asyncio.to_thread(proc.wait, 20)
    assert code == 0
    assert all(_gone(w) for w in workers)
    [run] = await succeeded(tenant, [job_id])
    assert run.attempt == 1


async def slow_called(
    cluster: Cluster, target: RecordingTarget, tenant: Tenant, job_id: str
) -> None:
    """Passes once the target was called at ``/slow``; until then says where the run is
    (none, its status and attempt) and what the executor logged last."""
    if target.calls_to("/slow"):
        return
    runs = [(run_pb2.RunStatus.Name(r.status), r.attempt) for r in await tenant.runs(job_id)]
    log = tail(cluster.services.processes["executor"].process.log_path, 20)
    raise AssertionError(f"not called yet; runs {runs}; the executor logged last:\n{log}")


def _not_serving(cluster: Cluster) -> None:
    address = cluster.services.processes["executor"].address
    assert health_status(address) != "SERVING"


def _gone(pid: int) -> bool:
    """Exited (a zombie until reaped, or reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


async def test_workers_do_not_outlive_a_killed_supervisor(
    cluster: Cluster, target: RecordingTarget
) -> None:
    proc = supervisor(cluster)
    workers = await workers_of(proc.pid)
    target.hold("/slow")
    tenant = await cluster.tenant()
    [job_id] = await one_time_jobs(tenant, f"{target.url}/slow", 1, in_s=1)

    await assert_eventually(lambda: slow_called(cluster, target, tenant, job_id), timeout_s=30)
    proc.kill()
    await asyncio.to_thread(proc.wait, 10)

    # Each worker gets one SIGTERM and drains as on an operator's SIGTERM: the idle one
    # exits, the one holding the call waits for it (a worker that took the death for
    # "stop now" would exit too, abandoning the run to its lease's expiry and a retry).
    def only_the_busy_one_left() -> None:
        alive = [w for w in workers if not _gone(w)]
        assert len(alive) == 1, f"workers still running: {alive}"

    await assert_eventually(only_the_busy_one_left, timeout_s=20)
    target.release("/slow")

    def all_gone() -> None:
        assert all(_gone(w) for w in workers), "a worker is still running"

    await assert_eventually(all_gone, timeout_s=20)
    [run] = await succeeded(tenant, [job_id])
    assert run.attempt == 1
