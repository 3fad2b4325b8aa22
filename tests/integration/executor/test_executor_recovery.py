"""The executor's graph (app.build) when things go wrong, against real NATS JetStream
and a RunLedger TEST DOUBLE (tests/helpers/ledger_double.py) on a real grpc.aio server.

Lost LeaseRuns answers and re-grants, CompleteRuns failures (INTERNAL/UNKNOWN retried,
one invalid outcome isolated), a ledger that stops answering heartbeats, fetch errors, a
JetStream that cannot answer yet when the consumer binds, unexpected errors in leasing,
calling and reporting (slots never leak, the executor keeps running), and runs left to
executors with free slots instead of hoarded.
"""

from __future__ import annotations

import asyncio

import grpc
import pytest
from nats.errors import ConnectionClosedError
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js import JetStreamContext
from nats.js.errors import BadRequestError, ServiceUnavailableError

from sundial.core.grpc import KEEPALIVE_SERVER_OPTIONS
from sundial.executor.app import LEDGER_CHANNEL_OPTIONS
from sundial.internal.v1 import ledger_pb2
from tests.helpers.eventually import assert_eventually
from tests.helpers.ledger_double import LedgerDouble
from tests.helpers.target_server import RecordingTarget
from tests.integration.executor.support import (
    acked,
    add_jobs,
    all_status,
    called,
    connected,
    free_slots,
    holds,
    key_of,
    more_beats,
    publish,
    status_is,
    statuses,
    stream_empty,
    succeeded,
)

pytestmark = pytest.mark.timeout(60)


async def test_a_grant_whose_answer_was_lost_is_granted_again_and_run_once(
    start_executor, ledger: LedgerDouble, target: RecordingTarget, jetstream: JetStreamContext
) -> None:
    refs = add_jobs(ledger, target, 1)
    ledger.lose_lease_answers = 1  # committed, then the answer is lost: the call is retried
    executor = await start_executor()
    await publish(jetstream, refs)
    await assert_eventually(lambda: succeeded(ledger, refs[0]), timeout_s=10)
    assert len(ledger.lease_requests) == 2
    assert len(target.calls) == 1
    assert [o.attempt for o in ledger.outcomes] == [1]
    await assert_eventually(lambda: acked(executor, 1), timeout_s=5)


async def test_a_run_granted_again_while_held_is_not_called_twice(
    start_executor, ledger: LedgerDouble, target: RecordingTarget, jetstream: JetStreamContext
) -> None:
    target.hold("/hook")
    refs = add_jobs(ledger, target, 1)
    executor = await start_executor()
    await publish(jetstream, refs, seq=1)
    await assert_eventually(lambda: called(target, 1), timeout_s=10)
    await publish(jetstream, refs, seq=2)  # a redelivery: the ledger re-grants attempt 1
    await assert_eventually(lambda: acked(executor, 2), timeout_s=10)
    assert executor.consumer.stats.granted == 2
    assert free_slots(executor) == executor.heartbeat._inflight.max_in_flight - 1
    target.release("/hook")
    await assert_eventually(lambda: succeeded(ledger, refs[0]), timeout_s=10)
    assert len(target.calls) == 1
    assert len(ledger.complete_requests) == 1
    await assert_eventually(lambda: holds(executor, 0), timeout_s=5)
    assert free_slots(executor) == executor.heartbeat._inflight.max_in_flight


async def test_a_run_granted_again_after_it_finished_is_reported_not_called_again(
    start_executor, ledger: LedgerDouble, target: RecordingTarget, jetstream: JetStreamContext
) -> None:
    refs = add_jobs(ledger, target, 1)
    # The report is refused and given up: the run stays RUNNING under this executor's
    # lease, and a redelivered message makes the ledger grant the same lease again.
    ledger.fail_complete_codes = [grpc.StatusCode.INVALID_ARGUMENT]
    executor = await start_executor()
    await publish(jetstream, refs, seq=1)
    await assert_eventually(lambda: called(target, 1), timeout_s=10)
    await assert_eventually(lambda: holds(executor, 0), timeout_s=10)
    assert statuses(ledger, refs) == ["RUNNING"]
    await publish(jetstream, refs, seq=2)
    await assert_eventually(lambda: succeeded(ledger, refs[0]), timeout_s=10)
    assert executor.consumer.stats.granted == 2
    # One call for the one attempt; its kept outcome answered the re-grant.
    assert len(target.calls) == 1
    assert [o.attempt for o in ledger.outcomes] == [1]
    await assert_eventually(lambda: acked(executor, 2), timeout_s=5)
    assert free_slots(executor) == executor.heartbeat._inflight.max_in_flight


async def test_complete_calls_failing_internal_or_unknown_are_retried(
    start_executor, ledger: LedgerDouble, target: RecordingTarget, jetstream: JetStreamContext
) -> None:
    refs = add_jobs(ledger, target, 1)
    ledger.fail_complete_codes = [grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN]
    executor = await start_executor()
    await publish(jetstream, refs)
    await assert_eventually(lambda: succeeded(ledger, refs[0]), timeout_s=10)
    assert len(ledger.complete_requests) == 3
    assert len(target.calls) == 1
    await assert_eventually(lambda: holds(executor, 0), timeout_s=5)


async def test_one_invalid_outcome_does_not_drop_the_rest_of_its_batch(
    start_executor, ledger: LedgerDouble, target: RecordingTarget, jetstream: JetStreamContext
) -> None:
    target.hold("/hook")
    refs = add_jobs(ledger, target, 5)
    ledger.invalid_outcomes = {key_of(refs[2])}
    executor = await start_executor(complete_flush_ms=300.0)
    await publish(jetstream, refs)
    await assert_eventually(lambda: called(target, 5), timeout_s=10)
    target.release("/hook")  # five outcomes at once: one CompleteRuns batch

    def the_good_ones_recorded() -> None:
        assert statuses(ledger, refs) == ["SUCCEEDED"] * 2 + ["RUNNING"] + ["SUCCEEDED"] * 2

    await assert_eventually(the_good_ones_recorded, timeout_s=10)
    assert len(ledger.complete_requests[0].outcomes) == 5  # it was one batch, then split
    await assert_eventually(lambda: holds(executor, 0), timeout_s=5)


async def test_an_outcome_failing_internal_every_time_does_not_stall_the_others(
    start_executor, ledger: LedgerDouble, target: RecordingTarget, jetstream: JetStreamContext
) -> None:
    target.hold("/hook")
    refs = add_jobs(ledger, target, 3)
    ledger.internal_outcomes = {key_of(refs[1])}
    executor = await start_executor(complete_flush_ms=300.0)
    await publish(jetstream, refs)
    await assert_eventually(lambda: called(target, 3), timeout_s=10)
    target.release("/hook")

    def the_others_recorded() -> None:
        assert statuses(ledger, refs) == ["SUCCEEDED", "RUNNING", "SUCCEEDED"]

    await assert_eventually(the_others_recorded, timeout_s=20)
    # Given up at last: the run is let go and its lease will expire (the ledger retries).
    await assert_eventually(lambda: holds(executor, 0), timeout_s=20)


async def test_a_heartbeat_stream_the_ledger_stopped_answering_is_reopened(
    start_executor, ledger: LedgerDouble, target: RecordingTarget, jetstream: JetStreamContext
) -> None:
    target.hold("/hook")
    refs = add_jobs(ledger, target, 1)
    executor = await start_executor()
    await publish(jetstream, refs)
    await assert_eventually(lambda: called(target, 1), timeout_s=10)
    opened = ledger.heartbeat_streams
    ledger.mute_heartbeats = True  # beats arrive, answers never come back: half-open
    await assert_eventually(lambda: _streams_opened(ledger, opened + 1), timeout_s=10)
    ledger.mute_heartbeats = False
    seen = len(ledger.heartbeats)
    await assert_eventually(lambda: more_beats(ledger, seen), timeout_s=5)
    await assert_eventually(lambda: connected(executor), timeout_s=5)
    target.release("/hook")
    await assert_eventually(lambda: succeeded(ledger, refs[0]), timeout_s=10)


def _streams_opened(ledger: LedgerDouble, n: int) -> None:
    assert ledger.heartbeat_streams >= n, ledger.heartbeat_streams


def test_the_ledger_server_accepts_the_executors_keepalive_pings() -> None:
    # A client pinging faster than the server allows is sent GOAWAY too_many_pings, and
    # every executor would lose its ledger connection over and over.
    client = dict(LEDGER_CHANNEL_OPTIONS)
    server = dict(KEEPALIVE_SERVER_OPTIONS)
    assert (
        client["grpc.keepalive_time_ms"]
        >= server["grpc.http2.min_recv_ping_interval_without_data_ms"]
    )
    assert client["grpc.keepalive_permit_without_calls"] == 1
    assert server["grpc.keepalive_permit_without_calls"] == 1


# Fault injection at the client: what a real outage looks like to the call it hits.
# JetStream answering 503 (a leader election) and the connection closing under a
# fetch; a cluster still electing its leaders answering the stream's info, then letting
# the consumer's info request time out as the executor binds (seen in CI: the executor
# exited on it while a three-node cluster formed).
JETSTREAM_FAULTS = {
    "fetch": (
        JetStreamContext.PullSubscription,
        lambda: [
            ServiceUnavailableError(code=503, description="no responders"),
            ConnectionClosedError(),
        ],
    ),
    "pull_subscribe": (JetStreamContext, lambda: [NatsTimeoutError(), NatsTimeoutError()]),
}


@pytest.mark.parametrize("method", list(JETSTREAM_FAULTS))
async def test_jetstream_errors_are_retried_and_the_executor_keeps_running(
    start_executor,
    ledger: LedgerDouble,
    target: RecordingTarget,
    jetstream: JetStreamContext,
    *,
    monkeypatch: pytest.MonkeyPatch,
    method: str,
) -> None:
    owner, make_failures = JETSTREAM_FAULTS[method]
    failures: list[Exception] = make_failures()
    real = getattr(owner, method)

    async def flaky(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        if failures:
            raise failures.pop(0)
        return await real(self, *args, **kwargs)

    monkeypatch.setattr(owner, method, flaky)
    refs = add_jobs(ledger, target, 2)
    executor = await start_executor()
    await publish(jetstream, refs)
    await assert_eventually(lambda: all_status(ledger, refs, "SUCCEEDED"), timeout_s=15)
    assert failures == []
    assert not executor.task.done()
    assert free_slots(executor) == executor.heartbeat._inflight.max_in_flight


async def test_a_durable_the_executor_cannot_bind_to_stops_it_with_the_error(
    start_executor, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Not a JetStream that cannot answer yet: the durable exists with other settings and
    # binding to it is refused. Warning forever would hide that; the executor exits.
    gate = asyncio.Event()

    async def refused(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        await gate.wait()  # once the executor reported its heartbeat stream
        raise BadRequestError(code=400, description="consumer config mismatch")

    monkeypatch.setattr(JetStreamContext, "pull_subscribe", refused)
    monkeypatch.setattr(JetStreamContext, "pull_subscribe_bind", refused)
    executor = await start_executor()
    gate.set()
    assert await asyncio.wait_for(asyncio.shield(executor.task), 30) == 1


async def test_slots_are_given_back_when_leasing_fails_unexpectedly(
    start_executor, ledger: LedgerDouble, target: RecordingTarget, jetstream: JetStreamContext
) -> None:
    refs = add_jobs(ledger, target, 1)
    executor = await start_executor(max_in_flight=2)
    # The LeaseRuns call every ask for a lease goes through (lease_batch.LeaseBatcher).
    real_lease = executor.consumer._leases._lease
    calls = 0

    async def lease_failing_once(chunk):  # type: ignore[no-untyped-def]
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("injected: a bug while leasing")
        return await real_lease(chunk)

    executor.consumer._leases._lease = lease_failing_once
    await publish(jetstream, refs)
    await assert_eventually(lambda: succeeded(ledger, refs[0]), timeout_s=15)
    assert calls == 2  # the message came back (nak) and was leased again
    await assert_eventually(lambda: holds(executor, 0), timeout_s=5)
    assert free_slots(executor) == 2


async def test_an_unexpected_error_of_a_target_call_is_reported_retryable(
    start_executor, ledger: LedgerDouble, target: RecordingTarget, jetstream: JetStreamContext
) -> None:
    refs = add_jobs(ledger, target, 1)
    executor = await start_executor()
    inflight = executor.heartbeat._inflight

    async def broken_run(lease):  # type: ignore[no-untyped-def]
        raise RuntimeError("injected: a bug in a caller")

    inflight._runner.run = broken_run  # type: ignore[method-assign]
    await publish(jetstream, refs)
    await assert_eventually(lambda: status_is(ledger, refs[0], "RETRYING"), timeout_s=10)
    [outcome] = ledger.outcomes
    assert outcome.status == ledger_pb2.OUTCOME_STATUS_FAILED_RETRYABLE
    assert outcome.error == "executor error: RuntimeError: injected: a bug in a caller"
    await assert_eventually(lambda: holds(executor, 0), timeout_s=5)
    assert free_slots(executor) == inflight.max_in_flight


async def test_an_unexpected_error_sending_outcomes_does_not_stop_the_completer(
    start_executor, ledger: LedgerDouble, target: RecordingTarget, jetstream: JetStreamContext
) -> None:
    refs = add_jobs(ledger, target, 2)
    executor = await start_executor()
    ledger_client = executor.completer._ledger
    real_stub = ledger_client._stub

    class BrokenOnce:
        """The real stub, but the first CompleteRuns raises what no RPC raises."""

        def __init__(self) -> None:
            self.broken = True

        def __getattr__(self, name: str) -> object:  # LeaseRuns, Heartbeat: the real ones
            return getattr(real_stub, name)

        def CompleteRuns(self, request, **kwargs):  # type: ignore[no-untyped-def]
            if self.broken:
                self.broken = False
                raise RuntimeError("injected: a bug while sending")
            return real_stub.CompleteRuns(request, **kwargs)

    ledger_client._stub = BrokenOnce()  # type: ignore[assignment]
    await publish(jetstream, refs[:1], seq=1)
    await assert_eventually(lambda: called(target, 1), timeout_s=10)
    # Its submitter is answered (not sent): the run is let go, its lease will expire.
    await assert_eventually(lambda: holds(executor, 0), timeout_s=5)
    assert ledger.status(refs[0]) == "RUNNING"
    await publish(jetstream, refs[1:], seq=2)
    await assert_eventually(lambda: succeeded(ledger, refs[1]), timeout_s=10)
    assert not executor.task.done()


async def test_runs_that_do_not_fit_are_left_to_an_executor_with_free_slots(
    start_executor, ledger: LedgerDouble, target: RecordingTarget, jetstream: JetStreamContext
) -> None:
    target.hold("/hook")
    refs = add_jobs(ledger, target, 5)
    busy = await start_executor(max_in_flight=2)
    await publish(jetstream, refs)
    await assert_eventually(lambda: called(target, 2), timeout_s=10)
    # The busy executor leased what fit, waited a moment for a slot and gave the message
    # back: the other executor takes the three runs it could not start, while the first
    # two still run.
    await start_executor(max_in_flight=8)
    await assert_eventually(lambda: called(target, 5), timeout_s=15)
    assert target.max_active == 5
    assert busy.consumer.stats.naked >= 1
    target.release("/hook")
    await assert_eventually(lambda: all_status(ledger, refs, "SUCCEEDED"), timeout_s=10)
    assert sorted(target.keys()) == sorted(ledger.runs)  # each run called once
    await assert_eventually(lambda: stream_empty(jetstream), timeout_s=10)
