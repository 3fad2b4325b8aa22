"""The executor's whole graph (app.build) against real NATS JetStream and a RunLedger
TEST DOUBLE (tests/helpers/ledger_double.py) on a real grpc.aio server.

What is checked here is the executor's side of the protocol: messages acked once their
runs are leased or finished, capacity rejections redelivered later (never dropped),
malformed messages terminated, bounded concurrency, batched completion, heartbeats
(cancel orders, lost leases, reconnect) and graceful shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import nats
import pytest
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from sundial.core.bus import RUNS_STREAM, ensure_streams, runs_subject
from sundial.core.service import Service
from sundial.devstack import Stack
from sundial.executor.app import build
from sundial.executor.completer import Completer
from sundial.executor.config import ExecutorConfig
from sundial.executor.consumer import Consumer
from sundial.executor.heartbeat import Heartbeat
from sundial.v1 import events_pb2, ledger_pb2, run_pb2
from tests.helpers.eventually import assert_eventually
from tests.helpers.ledger_double import LedgerDouble, counts, http_target, ref
from tests.helpers.target_server import RecordingTarget

pytestmark = pytest.mark.timeout(60)

BASE = datetime(2026, 3, 8, 14, 0, tzinfo=UTC)


def job_id(i: int) -> str:
    return f"00000000-0000-4000-8000-{i:012d}"


@pytest.fixture
async def jetstream(stack: Stack) -> AsyncIterator[JetStreamContext]:
    """JetStream with an empty SUNDIAL_RUNS (and no consumers left by other tests)."""
    client = await nats.connect(stack.nats_url)
    js = client.jetstream()
    with contextlib.suppress(NotFoundError):
        await js.delete_stream(RUNS_STREAM)
    await ensure_streams(js)
    yield js
    with contextlib.suppress(NotFoundError):
        await js.delete_stream(RUNS_STREAM)
    await client.drain()


@pytest.fixture
async def ledger() -> AsyncIterator[LedgerDouble]:
    async with LedgerDouble() as double:
        yield double


@pytest.fixture
async def target() -> AsyncIterator[RecordingTarget]:
    async with RecordingTarget() as server:
        yield server


@dataclass
class RunningExecutor:
    service: Service
    task: asyncio.Task[int]
    stop_event: asyncio.Event

    @property
    def heartbeat(self) -> Heartbeat:
        return self.service.components[0]  # type: ignore[return-value]

    @property
    def completer(self) -> Completer:
        return self.service.components[1]  # type: ignore[return-value]

    @property
    def consumer(self) -> Consumer:
        return self.service.components[2]  # type: ignore[return-value]

    async def stop(self) -> int:
        self.stop_event.set()
        return await asyncio.wait_for(asyncio.shield(self.task), 30)


@pytest.fixture
async def start_executor(
    stack: Stack, ledger: LedgerDouble, jetstream: JetStreamContext
) -> AsyncIterator[object]:
    running: list[RunningExecutor] = []

    async def start(**overrides: object) -> RunningExecutor:
        config = ExecutorConfig(
            nats_url=stack.nats_url,
            ledger_address=ledger.address,
            node_id="test-executor",
            allow_loopback_targets=True,
            heartbeat_interval_s=0.2,
            grace_period_s=5.0,
            capacity_retry_s=0.5,
            log_format="text",
        )
        config = replace(config, **overrides)  # type: ignore[arg-type]
        service = await build(config)
        stop_event = asyncio.Event()
        task = asyncio.create_task(
            service.run(install_signal_handlers=False, stop_event=stop_event)
        )
        executor = RunningExecutor(service, task, stop_event)
        running.append(executor)
        await assert_eventually(lambda: _connected(executor), timeout_s=10, what="heartbeat stream")
        return executor

    yield start
    for executor in running:
        if not executor.task.done():
            await executor.stop()


def _connected(executor: RunningExecutor) -> None:
    assert executor.heartbeat.connected.is_set(), "no heartbeat answer yet"
    assert executor.service.server is not None


async def publish(js: JetStreamContext, refs: list[run_pb2.RunRef], *, seq: int = 1) -> None:
    dispatch = events_pb2.RunDispatch(partition=7, dispatch_seq=seq, runs=refs, node_id="test")
    dispatch.dispatched_at.FromDatetime(datetime.now(UTC))
    await js.publish(runs_subject(7), dispatch.SerializeToString())


async def stream_messages(js: JetStreamContext) -> int:
    return int((await js.stream_info(RUNS_STREAM)).state.messages)


def add_jobs(
    ledger: LedgerDouble, target: RecordingTarget, n: int, path: str = "/hook", **kw: object
) -> list[run_pb2.RunRef]:
    refs = []
    for i in range(n):
        ledger.add_job(job_id(i), http_target(f"{target.url}{path}"), **kw)  # type: ignore[arg-type]
        refs.append(ref(job_id(i), BASE + timedelta(minutes=i)))
    return refs


def statuses(ledger: LedgerDouble, refs: list[run_pb2.RunRef]) -> list[str]:
    return [ledger.status(r) for r in refs]


async def test_runs_are_leased_in_one_call_called_reported_and_the_message_acked(
    start_executor, ledger: LedgerDouble, target: RecordingTarget, jetstream: JetStreamContext
) -> None:
    refs = add_jobs(ledger, target, 3, payload=b"body")
    executor = await start_executor()
    await publish(jetstream, refs)

    def all_succeeded() -> None:
        assert statuses(ledger, refs) == ["SUCCEEDED"] * 3

    await assert_eventually(all_succeeded, timeout_s=10)
    assert len(ledger.lease_requests) == 1 and len(ledger.lease_requests[0].runs) == 3
    assert sorted(target.keys()) == sorted(ledger.runs)  # each run key once
    assert all(c.request.body == b"body" for c in target.calls)
    assert all(
        c.request.headers["sundial-signature"].endswith("double-signature") for c in target.calls
    )
    await assert_eventually(lambda: _acked(executor, 1), timeout_s=5)
    assert await stream_messages(jetstream) == 0
    assert counts(ledger.outcomes) == {"OUTCOME_STATUS_SUCCEEDED": 3}


def _acked(executor: RunningExecutor, n: int) -> None:
    assert executor.consumer.stats.acked == n, executor.consumer.stats


async def test_a_redelivered_message_of_finished_runs_is_acked_without_calling(
    start_executor, ledger: LedgerDouble, target: RecordingTarget, jetstream: JetStreamContext
) -> None:
    refs = add_jobs(ledger, target, 2)
    executor = await start_executor()
    await publish(jetstream, refs, seq=1)
    await assert_eventually(lambda: _acked(executor, 1), timeout_s=10)
    await publish(jetstream, refs, seq=2)  # a republish of the same runs
    await assert_eventually(lambda: _acked(executor, 2), timeout_s=10)
    assert len(target.calls) == 2
    assert executor.consumer.stats.rejected == {"REJECT_REASON_FINISHED": 2}


async def test_tenant_at_capacity_is_redelivered_later_and_never_dropped(
    start_executor, ledger: LedgerDouble, target: RecordingTarget, jetstream: JetStreamContext
) -> None:
    ledger.tenant_cap["tenant-1"] = 2
    ledger.capacity_retry_s = 0.2
    target.script("/hook", delay_s=0.3)
    refs = add_jobs(ledger, target, 10)
    executor = await start_executor()
    await publish(jetstream, refs)

    def all_succeeded() -> None:
        assert statuses(ledger, refs) == ["SUCCEEDED"] * 10

    await assert_eventually(all_succeeded, timeout_s=30)
    assert target.max_active <= 2
    assert len(target.calls) == 10
    assert executor.consumer.stats.naked >= 1
    assert executor.consumer.stats.rejected.get("REJECT_REASON_TENANT_AT_CAPACITY", 0) >= 8
    await assert_eventually(lambda: _acked(executor, 1), timeout_s=5)
    assert await stream_messages(jetstream) == 0


async def test_malformed_message_is_terminated_and_the_loop_goes_on(
    start_executor, ledger: LedgerDouble, target: RecordingTarget, jetstream: JetStreamContext
) -> None:
    refs = add_jobs(ledger, target, 1)
    executor = await start_executor()
    await jetstream.publish(runs_subject(3), b"\xff\x00 not protobuf")
    await jetstream.publish(
        runs_subject(3), events_pb2.RunDispatch(partition=3).SerializeToString()
    )
    await publish(jetstream, refs)
    await assert_eventually(lambda: _succeeded(ledger, refs[0]), timeout_s=10)
    await assert_eventually(lambda: _terminated(executor, 2), timeout_s=5)
    await assert_eventually(lambda: _stream_empty(jetstream), timeout_s=5)


def _succeeded(ledger: LedgerDouble, r: run_pb2.RunRef) -> None:
    assert ledger.status(r) == "SUCCEEDED"


def _terminated(executor: RunningExecutor, n: int) -> None:
    assert executor.consumer.stats.terminated == n


async def _stream_empty(js: JetStreamContext) -> None:
    assert await stream_messages(js) == 0


async def test_concurrent_target_calls_are_bounded_by_max_in_flight(
    start_executor, ledger: LedgerDouble, target: RecordingTarget, jetstream: JetStreamContext
) -> None:
    target.script("/hook", delay_s=0.2)
    refs = add_jobs(ledger, target, 8)
    await start_executor(max_in_flight=2)
    await publish(jetstream, refs[:5])
    await publish(jetstream, refs[5:], seq=2)

    def all_succeeded() -> None:
        assert statuses(ledger, refs) == ["SUCCEEDED"] * 8

    await assert_eventually(all_succeeded, timeout_s=20)
    assert target.max_active == 2
    # Runs were leased only as slots freed up, never more than two at once.
    assert max(len(r.runs) for r in ledger.lease_requests) <= 2


async def test_outcomes_are_batched_into_few_complete_calls(
    start_executor, ledger: LedgerDouble, target: RecordingTarget, jetstream: JetStreamContext
) -> None:
    refs = add_jobs(ledger, target, 60)
    await start_executor(complete_flush_ms=20.0)
    await publish(jetstream, refs)

    def all_succeeded() -> None:
        assert statuses(ledger, refs) == ["SUCCEEDED"] * 60

    await assert_eventually(all_succeeded, timeout_s=20)
    assert len(ledger.complete_requests) < 30


async def test_lease_calls_are_retried_while_the_ledger_is_unavailable(
    start_executor, ledger: LedgerDouble, target: RecordingTarget, jetstream: JetStreamContext
) -> None:
    refs = add_jobs(ledger, target, 1)
    ledger.fail_lease_calls = 2
    await start_executor()
    await publish(jetstream, refs)
    await assert_eventually(lambda: _succeeded(ledger, refs[0]), timeout_s=10)
    assert len(ledger.lease_requests) == 3


async def test_cancel_order_stops_the_call_and_reports_cancelled(
    start_executor, ledger: LedgerDouble, target: RecordingTarget, jetstream: JetStreamContext
) -> None:
    target.hold("/hook")
    refs = add_jobs(ledger, target, 1)
    await start_executor()
    await publish(jetstream, refs)
    await assert_eventually(lambda: _called(target, 1), timeout_s=10)
    ledger.cancel(refs[0], reason="overlap policy CANCEL_OTHER")
    await assert_eventually(lambda: _status(ledger, refs[0], "CANCELLED"), timeout_s=5)
    [outcome] = ledger.outcomes
    assert outcome.status == ledger_pb2.OUTCOME_STATUS_CANCELLED
    assert "CANCEL_OTHER" in outcome.error


def _called(target: RecordingTarget, n: int) -> None:
    assert len(target.calls) == n, len(target.calls)


def _status(ledger: LedgerDouble, r: run_pb2.RunRef, status: str) -> None:
    assert ledger.status(r) == status


async def test_lost_lease_abandons_the_run_without_reporting(
    start_executor, ledger: LedgerDouble, target: RecordingTarget, jetstream: JetStreamContext
) -> None:
    target.hold("/hook")
    refs = add_jobs(ledger, target, 1)
    executor = await start_executor()
    await publish(jetstream, refs)
    await assert_eventually(lambda: _called(target, 1), timeout_s=10)
    ledger.expire(refs[0])  # as if the lease ran out and the run went back to the queue
    await assert_eventually(lambda: _holds(executor, 0), timeout_s=5)
    assert ledger.outcomes == [] and ledger.complete_requests == []


def _holds(executor: RunningExecutor, n: int) -> None:
    # The registry is reached through the heartbeat, which lists what is held.
    assert len(executor.heartbeat._inflight) == n


async def test_heartbeats_extend_leases_and_reconnect_after_a_ledger_restart(
    start_executor, ledger: LedgerDouble, target: RecordingTarget, jetstream: JetStreamContext
) -> None:
    target.hold("/hook")
    refs = add_jobs(ledger, target, 1)
    executor = await start_executor()
    await publish(jetstream, refs)
    await assert_eventually(lambda: _called(target, 1), timeout_s=10)
    await assert_eventually(lambda: _beat_with_run(ledger), timeout_s=5)
    await ledger.stop()
    executor.heartbeat.connected.clear()
    await ledger.start()  # same port: a restarted scheduler
    seen = len(ledger.heartbeats)
    await assert_eventually(lambda: _connected(executor), timeout_s=15)
    await assert_eventually(lambda: _more_beats(ledger, seen), timeout_s=5)
    target.release("/hook")
    await assert_eventually(lambda: _succeeded(ledger, refs[0]), timeout_s=10)


def _beat_with_run(ledger: LedgerDouble) -> None:
    assert any(len(b.runs) == 1 for b in ledger.heartbeats)


def _more_beats(ledger: LedgerDouble, seen: int) -> None:
    assert len(ledger.heartbeats) > seen and ledger.heartbeats[-1].runs


async def test_shutdown_lets_in_flight_runs_finish_and_reports_them(
    start_executor, ledger: LedgerDouble, target: RecordingTarget, jetstream: JetStreamContext
) -> None:
    target.script("/hook", delay_s=1.0)
    refs = add_jobs(ledger, target, 2)
    executor = await start_executor(grace_period_s=5.0)
    await publish(jetstream, refs)
    await assert_eventually(lambda: _called(target, 2), timeout_s=10)
    assert await executor.stop() == 0
    assert statuses(ledger, refs) == ["SUCCEEDED", "SUCCEEDED"]
    assert any(b.draining for b in ledger.heartbeats)


async def test_shutdown_past_the_grace_period_never_reports_a_failure(
    start_executor, ledger: LedgerDouble, target: RecordingTarget, jetstream: JetStreamContext
) -> None:
    target.hold("/hook")
    refs = add_jobs(ledger, target, 1)
    executor = await start_executor(grace_period_s=0.5)
    await publish(jetstream, refs)
    await assert_eventually(lambda: _called(target, 1), timeout_s=10)
    began = time.monotonic()
    await executor.stop()
    assert time.monotonic() - began < 5
    assert ledger.outcomes == [] and ledger.complete_requests == []
    assert ledger.status(refs[0]) == "RUNNING"  # the lease will expire; the ledger retries
