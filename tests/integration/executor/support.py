"""Shared pieces of the executor-graph tests (test_executor*.py): the running executor,
publishing RunDispatch messages, the jobs in the ledger double and what tests wait for."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from nats.js import JetStreamContext

from sundial.core.bus import RUNS_STREAM, runs_subject
from sundial.core.service import Service
from sundial.executor.completer import Completer
from sundial.executor.consumer import Consumer
from sundial.executor.heartbeat import Heartbeat
from sundial.internal.v1 import events_pb2
from sundial.run import run_key
from sundial.v1 import run_pb2
from tests.helpers.ledger_double import LedgerDouble, http_target, ref
from tests.helpers.target_server import RecordingTarget

BASE = datetime(2026, 3, 8, 14, 0, tzinfo=UTC)


def job_id(i: int) -> str:
    return f"00000000-0000-4000-8000-{i:012d}"


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


def connected(executor: RunningExecutor) -> None:
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


def key_of(r: run_pb2.RunRef) -> str:
    return run_key(r.job_id, r.scheduled_at.ToDatetime(tzinfo=UTC))


# --- conditions tests wait for (assert_eventually) ------------------------------------


def acked(executor: RunningExecutor, n: int) -> None:
    assert executor.consumer.stats.acked == n, executor.consumer.stats


def succeeded(ledger: LedgerDouble, r: run_pb2.RunRef) -> None:
    assert ledger.status(r) == "SUCCEEDED"


def status_is(ledger: LedgerDouble, r: run_pb2.RunRef, status: str) -> None:
    assert ledger.status(r) == status


def all_status(ledger: LedgerDouble, refs: list[run_pb2.RunRef], status: str) -> None:
    assert statuses(ledger, refs) == [status] * len(refs)


def called(target: RecordingTarget, n: int) -> None:
    assert len(target.calls) == n, len(target.calls)


def holds(executor: RunningExecutor, n: int) -> None:
    # The registry is reached through the heartbeat, which lists what is held.
    assert len(executor.heartbeat._inflight) == n


def free_slots(executor: RunningExecutor) -> int:
    return executor.heartbeat._inflight.free_slots


def more_beats(ledger: LedgerDouble, seen: int) -> None:
    assert len(ledger.heartbeats) > seen and ledger.heartbeats[-1].runs


async def stream_empty(js: JetStreamContext) -> None:
    assert await stream_messages(js) == 0
