"""The executor's whole graph (app.build) against real NATS JetStream and a RunLedger
TEST DOUBLE (tests/helpers/ledger_double.py) on a real grpc.aio server.

What is checked here is the executor's side of the protocol: messages acked once their
runs are leased or finished, capacity rejections redelivered later (never dropped),
malformed messages terminated, bounded concurrency, batched completion, heartbeats
(cancel orders, lost leases, reconnect) and graceful shutdown. Failures and recovery
are in test_executor_recovery.py; fixtures in conftest.py, helpers in support.py.
"""

from __future__ import annotations

import time

import pytest
from nats.js import JetStreamContext

from sundial.core.bus import runs_subject
from sundial.internal.v1 import events_pb2, ledger_pb2
from sundial.run import RejectReason
from sundial.v1 import run_pb2
from tests.helpers.eventually import assert_eventually
from tests.helpers.ledger_double import LedgerDouble, counts, ref
from tests.helpers.target_server import RecordingTarget
from tests.integration.executor.support import (
    BASE,
    RunningExecutor,
    acked,
    add_jobs,
    all_status,
    called,
    connected,
    holds,
    more_beats,
    publish,
    status_is,
    statuses,
    stream_empty,
    stream_messages,
    succeeded,
)

pytestmark = pytest.mark.timeout(60)


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
    await assert_eventually(lambda: acked(executor, 1), timeout_s=5)
    assert await stream_messages(jetstream) == 0
    assert counts(ledger.outcomes) == {"OUTCOME_STATUS_SUCCEEDED": 3}


async def test_a_redelivered_message_of_finished_runs_is_acked_without_calling(
    start_executor, ledger: LedgerDouble, target: RecordingTarget, jetstream: JetStreamContext
) -> None:
    refs = add_jobs(ledger, target, 2)
    executor = await start_executor()
    await publish(jetstream, refs, seq=1)
    await assert_eventually(lambda: acked(executor, 1), timeout_s=10)
    # The first message is acked once its runs are leased, before they are called and
    # completed: republished then, the holder would be granted its own runs again (a
    # re-grant, nothing rejected). Wait until the ledger has recorded both completions.
    await assert_eventually(
        lambda: all_status(ledger, refs, "SUCCEEDED"), timeout_s=10, what="completions"
    )
    await publish(jetstream, refs, seq=2)  # a republish of the same runs
    await assert_eventually(lambda: acked(executor, 2), timeout_s=10)
    assert len(target.calls) == 2
    assert executor.consumer.stats.rejected == {RejectReason.FINISHED: 2}


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
    assert executor.consumer.stats.rejected.get(RejectReason.TENANT_AT_CAPACITY, 0) >= 8
    await assert_eventually(lambda: acked(executor, 1), timeout_s=5)
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
    # A job id that is not a UUID: no run can have it (RunRef's job id is a UUID).
    await publish(jetstream, [ref("job-1", BASE), refs[0]], seq=2)
    await publish(jetstream, [run_pb2.RunRef(job_id=refs[0].job_id)], seq=3)  # no time
    await publish(jetstream, refs, seq=4)
    await assert_eventually(lambda: succeeded(ledger, refs[0]), timeout_s=10)
    await assert_eventually(lambda: _terminated(executor, 4), timeout_s=5)
    await assert_eventually(lambda: stream_empty(jetstream), timeout_s=5)
    assert [len(request.runs) for request in ledger.lease_requests] == [1]


def _terminated(executor: RunningExecutor, n: int) -> None:
    assert executor.consumer.stats.terminated == n


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


async def test_a_full_executor_waits_for_slots_rather_than_giving_a_message_back(
    start_executor, ledger: LedgerDouble, target: RecordingTarget, jetstream: JetStreamContext
) -> None:
    """Slots free up within milliseconds with a fast target: giving the message back
    at once would have it fetched and its finished runs leased again."""
    target.script("/hook", delay_s=0.05)
    refs = add_jobs(ledger, target, 6)
    executor = await start_executor(max_in_flight=2)
    await publish(jetstream, refs)

    def all_succeeded() -> None:
        assert statuses(ledger, refs) == ["SUCCEEDED"] * 6

    await assert_eventually(all_succeeded, timeout_s=20)
    await assert_eventually(lambda: acked(executor, 1), timeout_s=5)
    assert executor.consumer.stats.naked == 0
    assert executor.consumer.stats.rejected == {}
    assert sum(len(r.runs) for r in ledger.lease_requests) == 6  # each run leased once


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
    await assert_eventually(lambda: succeeded(ledger, refs[0]), timeout_s=10)
    assert len(ledger.lease_requests) == 3


async def test_cancel_order_stops_the_call_and_reports_cancelled(
    start_executor, ledger: LedgerDouble, target: RecordingTarget, jetstream: JetStreamContext
) -> None:
    target.hold("/hook")
    refs = add_jobs(ledger, target, 1)
    await start_executor()
    await publish(jetstream, refs)
    await assert_eventually(lambda: called(target, 1), timeout_s=10)
    ledger.cancel(refs[0], reason="overlap policy CANCEL_OTHER")
    await assert_eventually(lambda: status_is(ledger, refs[0], "CANCELLED"), timeout_s=5)
    [outcome] = ledger.outcomes
    assert outcome.status == ledger_pb2.OUTCOME_STATUS_CANCELLED
    assert "CANCEL_OTHER" in outcome.error


async def test_lost_lease_abandons_the_run_without_reporting(
    start_executor, ledger: LedgerDouble, target: RecordingTarget, jetstream: JetStreamContext
) -> None:
    target.hold("/hook")
    refs = add_jobs(ledger, target, 1)
    executor = await start_executor()
    await publish(jetstream, refs)
    await assert_eventually(lambda: called(target, 1), timeout_s=10)
    ledger.expire(refs[0])  # as if the lease ran out and the run went back to the queue
    await assert_eventually(lambda: holds(executor, 0), timeout_s=5)
    assert ledger.outcomes == [] and ledger.complete_requests == []


async def test_heartbeats_extend_leases_and_reconnect_after_a_ledger_restart(
    start_executor, ledger: LedgerDouble, target: RecordingTarget, jetstream: JetStreamContext
) -> None:
    target.hold("/hook")
    refs = add_jobs(ledger, target, 1)
    executor = await start_executor()
    await publish(jetstream, refs)
    await assert_eventually(lambda: called(target, 1), timeout_s=10)
    await assert_eventually(lambda: _beat_with_run(ledger), timeout_s=5)
    await ledger.stop()
    executor.heartbeat.connected.clear()
    await ledger.start()  # same port: a restarted scheduler
    seen = len(ledger.heartbeats)
    await assert_eventually(lambda: connected(executor), timeout_s=15)
    await assert_eventually(lambda: more_beats(ledger, seen), timeout_s=5)
    target.release("/hook")
    await assert_eventually(lambda: succeeded(ledger, refs[0]), timeout_s=10)


def _beat_with_run(ledger: LedgerDouble) -> None:
    assert any(len(b.runs) == 1 for b in ledger.heartbeats)


async def test_shutdown_lets_in_flight_runs_finish_and_reports_them(
    start_executor, ledger: LedgerDouble, target: RecordingTarget, jetstream: JetStreamContext
) -> None:
    target.script("/hook", delay_s=1.0)
    refs = add_jobs(ledger, target, 2)
    executor = await start_executor(grace_period_s=5.0)
    await publish(jetstream, refs)
    await assert_eventually(lambda: called(target, 2), timeout_s=10)
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
    await assert_eventually(lambda: called(target, 1), timeout_s=10)
    began = time.monotonic()
    await executor.stop()
    assert time.monotonic() - began < 5
    assert ledger.outcomes == [] and ledger.complete_requests == []
    assert ledger.status(refs[0]) == "RUNNING"  # the lease will expire; the ledger retries
