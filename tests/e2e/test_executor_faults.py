"""End to end: executor crashes and pauses, gRPC targets, CANCEL_OTHER through the
heartbeat stream. API, scheduler and executors run as real processes.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta

import grpc
import pytest

from sundial.devstack import ServiceProcess, Services, Stack
from sundial.v1 import job_pb2, run_pb2
from tests.e2e.test_executor_runs import SUCCEEDED, every, http_job, once, runs_with
from tests.helpers.cluster import Cluster, shared_services, with_own_executor
from tests.helpers.eventually import assert_eventually
from tests.helpers.grpc_target import GrpcTargetServer
from tests.helpers.target_server import RecordingTarget

pytestmark = [pytest.mark.timeout(150), pytest.mark.slow]

DEAD = run_pb2.RUN_STATUS_DEAD
CANCELLED = run_pb2.RUN_STATUS_CANCELLED


def _calls(target: RecordingTarget, path: str, n: int) -> None:
    assert len(target.calls_to(path)) >= n, len(target.calls_to(path))


@pytest.fixture(scope="module")
def api_and_scheduler(
    stack: Stack, module_database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Services]:
    """The API and the scheduler for the module's tests (each with tenants of its own)."""
    with shared_services(
        stack, module_database_url, tmp_path_factory.mktemp("faults"), executors=0
    ) as services:
        yield services


@pytest.fixture
async def cluster(api_and_scheduler: Services) -> AsyncIterator[Cluster]:
    """The module's API and scheduler with an executor of the test's own: the crash and
    pause tests kill or freeze it (and add another)."""
    async with with_own_executor(api_and_scheduler) as running:
        yield running


async def test_kill_9_of_the_executor_mid_call_another_runs_the_next_attempt(
    cluster: Cluster, target: RecordingTarget
) -> None:
    target.hold("/slow")
    tenant = await cluster.tenant()
    when = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
    job = await tenant.create_job(http_job("slow", f"{target.url}/slow", once(when)))
    await assert_eventually(lambda: _calls(target, "/slow", 1), timeout_s=20)
    first: ServiceProcess = cluster.services.processes["executor"]
    await asyncio.to_thread(cluster.services.add, "executor")
    assert first.process.proc is not None
    first.process.proc.kill()  # SIGKILL while the target holds the request
    first.process.proc.wait(10)
    # The 10 s lease expires, the scheduler takes the run back and republishes it.
    await assert_eventually(lambda: _calls(target, "/slow", 2), timeout_s=40, interval_s=0.2)
    target.release("/slow")
    [run] = await assert_eventually(
        lambda: runs_with(tenant, job.job_id, SUCCEEDED, 1), timeout_s=20, interval_s=0.5
    )
    first_call, second_call = target.calls_to("/slow")
    assert (first_call.attempt, second_call.attempt) == (1, 2)
    assert first_call.key == second_call.key == run.run_key
    assert run.attempt == 2


async def test_a_paused_executors_late_completion_is_fenced_out(
    cluster: Cluster, target: RecordingTarget
) -> None:
    target.hold("/paused")
    tenant = await cluster.tenant()
    when = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
    job = await tenant.create_job(http_job("paused", f"{target.url}/paused", once(when)))
    await assert_eventually(lambda: _calls(target, "/paused", 1), timeout_s=20)
    first: ServiceProcess = cluster.services.processes["executor"]
    await asyncio.to_thread(cluster.services.add, "executor")
    assert first.process.proc is not None
    first.process.proc.send_signal(signal.SIGSTOP)
    try:
        await assert_eventually(lambda: _calls(target, "/paused", 2), timeout_s=40, interval_s=0.2)
        # Both held calls answer 200 now; the paused executor's answer waits in its socket.
        target.release("/paused")
        [run] = await assert_eventually(
            lambda: runs_with(tenant, job.job_id, SUCCEEDED, 1), timeout_s=20, interval_s=0.5
        )
        assert run.attempt == 2
    finally:
        first.process.proc.send_signal(signal.SIGCONT)

    def first_executor_gave_up() -> None:
        text = first.process.log_path.read_text()
        # It either reported attempt 1 and was fenced out, or learnt from its heartbeat
        # that the lease was lost and dropped the run: never an accepted late result.
        assert "outcome fenced out" in text or "lease lost" in text

    await assert_eventually(first_executor_gave_up, timeout_s=20, interval_s=0.2)
    [run] = await runs_with(tenant, job.job_id, SUCCEEDED, 1)
    assert run.attempt == 2
    assert [c.attempt for c in target.calls_to("/paused")] == [1, 2]


def grpc_job(name: str, address: str, schedule: job_pb2.Schedule, **retry: int) -> job_pb2.Job:
    job = job_pb2.Job(
        name=name,
        schedule=schedule,
        target=job_pb2.Target(grpc=job_pb2.GrpcTarget(address=address, plaintext=True)),
        payload=b"grpc-payload",
    )
    if "max_attempts" in retry:
        job.policies.retry.max_attempts = retry["max_attempts"]
        job.policies.retry.base_delay.FromSeconds(1)
        job.policies.retry.max_delay.FromSeconds(2)
    return job


async def test_grpc_target_receives_runs_and_status_codes_are_classified(
    cluster: Cluster,
) -> None:
    tenant = await cluster.tenant()
    when = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
    async with (
        GrpcTargetServer() as ok,
        GrpcTargetServer() as invalid,
        GrpcTargetServer() as unavailable,
    ):
        invalid.answer = (grpc.StatusCode.INVALID_ARGUMENT, "bad customer id", ())
        unavailable.answer = (grpc.StatusCode.UNAVAILABLE, "warming up", (("retry-after", "1"),))
        good = await tenant.create_job(grpc_job("ok", ok.address, once(when)))
        final = await tenant.create_job(grpc_job("final", invalid.address, once(when)))
        retried = await tenant.create_job(
            grpc_job("retried", unavailable.address, once(when), max_attempts=2)
        )
        [done] = await assert_eventually(
            lambda: runs_with(tenant, good.job_id, SUCCEEDED, 1), timeout_s=30, interval_s=0.5
        )
        [call] = ok.calls
        assert call.request.run_key == done.run_key
        assert call.request.idempotency_key == done.run_key
        assert call.request.payload == b"grpc-payload"
        assert call.request.attempt == 1
        assert call.request.tenant_id == tenant.tenant_id
        assert call.metadata["idempotency-key"] == done.run_key
        assert call.metadata["sundial-signature"].startswith("t=")

        [dead] = await assert_eventually(
            lambda: runs_with(tenant, final.job_id, DEAD, 1), timeout_s=30, interval_s=0.5
        )
        assert dead.attempt == 1
        assert dead.error_class == run_pb2.ERROR_CLASS_FINAL
        assert "bad customer id" in dead.last_error
        assert len(invalid.calls) == 1

        [exhausted] = await assert_eventually(
            lambda: runs_with(tenant, retried.job_id, DEAD, 1), timeout_s=40, interval_s=0.5
        )
        assert exhausted.attempt == 2
        assert exhausted.error_class == run_pb2.ERROR_CLASS_RETRYABLE
        assert [c.request.attempt for c in unavailable.calls] == [1, 2]


async def test_cancel_other_cancels_the_running_call_through_the_heartbeat(
    cluster: Cluster, target: RecordingTarget
) -> None:
    target.hold("/long")
    tenant = await cluster.tenant()
    job = await tenant.create_job(
        http_job(
            "long", f"{target.url}/long", every(4), overlap=job_pb2.OVERLAP_POLICY_CANCEL_OTHER
        )
    )
    await assert_eventually(lambda: _calls(target, "/long", 1), timeout_s=20, interval_s=0.2)
    first_key = target.calls_to("/long")[0].key

    async def first_cancelled() -> run_pb2.Run:
        runs = {r.run_key: r for r in await tenant.runs(job.job_id)}
        assert runs[first_key].status == CANCELLED, run_pb2.RunStatus.Name(runs[first_key].status)
        return runs[first_key]

    cancelled = await assert_eventually(first_cancelled, timeout_s=30, interval_s=0.3)
    assert cancelled.error_class == run_pb2.ERROR_CLASS_CANCELLED
    assert cancelled.attempt == 1
    # The next occurrence got its own call.
    await assert_eventually(lambda: _calls(target, "/long", 2), timeout_s=20, interval_s=0.2)
    assert target.calls_to("/long")[1].key != first_key
