"""The executor's ledger client against the RunLedger TEST DOUBLE on a real grpc.aio
server: which codes are retried, how often, and that every operation ends by its deadline.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime

import grpc
import pytest

from sundial.executor.config import ExecutorConfig
from sundial.executor.ledger import LedgerClient, LedgerError, LedgerRetryPolicy
from sundial.executor.model import Rejected
from sundial.internal.v1 import ledger_pb2_grpc
from sundial.run import Completion, FenceReason, Outcome, OutcomeStatus, RejectReason, RunRef
from sundial.v1 import job_pb2
from tests.helpers.ledger_double import LedgerDouble

pytestmark = pytest.mark.timeout(30)

RUN = RunRef(uuid.UUID("8f1c2e4a-7b3d-4c5e-9f60-1a2b3c4d5e6f"), datetime(2026, 3, 8, tzinfo=UTC))
DONE = Completion(RUN, 1, Outcome(OutcomeStatus.SUCCEEDED, started_at=RUN.scheduled_at))


@pytest.fixture
async def client(ledger: LedgerDouble) -> AsyncIterator[LedgerClient]:
    config = ExecutorConfig(
        nats_url="nats://127.0.0.1:4222", ledger_address=ledger.address, ledger_token=ledger.token
    )
    async with grpc.aio.insecure_channel(ledger.address) as channel:
        yield LedgerClient(
            ledger_pb2_grpc.RunLedgerServiceStub(channel),
            config,
            executor_id="test-executor",
            token=config.ledger_token,
        )


def test_the_policy_comes_from_the_config() -> None:
    config = ExecutorConfig(
        nats_url="nats://127.0.0.1:4222",
        ledger_address="127.0.0.1:1",
        ledger_token="executor-token",
        ledger_timeout_s=3.0,
        run_lease_s=45.0,
    )
    policy = LedgerRetryPolicy.from_config(config)
    assert (policy.call_timeout_s, policy.deadline_s) == (3.0, 45.0)


@pytest.mark.parametrize(
    "code",
    [
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNKNOWN,
    ],
)
async def test_transient_codes_and_server_errors_are_retried(
    client: LedgerClient, ledger: LedgerDouble, code: grpc.StatusCode
) -> None:
    ledger.fail_complete_codes = [code, code]
    [answer] = await client.complete_runs([DONE])
    assert (answer.accepted, answer.fence_reason) == (False, FenceReason.NOT_FOUND)
    assert len(ledger.complete_requests) == 3


@pytest.mark.parametrize(
    ("code", "suspect"),
    [
        (grpc.StatusCode.INVALID_ARGUMENT, True),
        (grpc.StatusCode.PERMISSION_DENIED, False),
        (grpc.StatusCode.FAILED_PRECONDITION, False),
        (grpc.StatusCode.UNIMPLEMENTED, False),
    ],
)
async def test_other_codes_are_refusals_and_not_retried(
    client: LedgerClient, ledger: LedgerDouble, code: grpc.StatusCode, suspect: bool
) -> None:
    ledger.fail_complete_codes = [code]
    with pytest.raises(LedgerError) as caught:
        await client.complete_runs([DONE])
    assert (caught.value.code, caught.value.gave_up) == (code, False)
    assert caught.value.request_suspect is suspect
    assert len(ledger.complete_requests) == 1


async def test_a_server_error_is_given_up_after_its_retries_and_blames_the_request(
    client: LedgerClient, ledger: LedgerDouble
) -> None:
    ledger.fail_complete_codes = [grpc.StatusCode.INTERNAL] * 10
    with pytest.raises(LedgerError) as caught:
        await client.complete_runs([DONE])
    assert caught.value.gave_up and caught.value.request_suspect
    assert len(ledger.complete_requests) == 1 + client.policy.server_error_retries


async def test_an_unavailable_ledger_is_retried_until_the_deadline(
    client: LedgerClient, ledger: LedgerDouble
) -> None:
    client.policy = replace(client.policy, deadline_s=0.5)
    ledger.fail_lease_calls = 1000
    began = time.monotonic()
    with pytest.raises(LedgerError) as caught:
        await client.lease_runs([RUN])
    assert time.monotonic() - began < 2
    assert (caught.value.code, caught.value.gave_up) == (grpc.StatusCode.UNAVAILABLE, True)
    assert not caught.value.request_suspect
    assert len(ledger.lease_requests) >= 2  # retried, but not past the deadline
    ledger.fail_lease_calls = 0
    [result] = await client.lease_runs([RUN])  # a new operation has its own deadline
    assert isinstance(result, Rejected) and result.reason is RejectReason.NOT_FOUND


async def test_retrying_stops_when_the_caller_stops(
    client: LedgerClient, ledger: LedgerDouble
) -> None:
    ledger.fail_lease_calls = 1000
    stop = asyncio.Event()
    stop.set()  # already stopping: the first call is still made, but never retried
    with pytest.raises(LedgerError) as caught:
        await client.lease_runs([RUN], stop=stop)
    assert caught.value.gave_up
    assert len(ledger.lease_requests) == 1


async def test_a_refused_token_is_not_retried_and_is_logged_without_the_token(
    client: LedgerClient, ledger: LedgerDouble, caplog: pytest.LogCaptureFixture
) -> None:
    del ledger.tokens[ledger.token]  # revoked: the double's interceptor refuses it now
    with pytest.raises(LedgerError) as caught:
        await client.lease_runs([RUN])
    assert (caught.value.code, caught.value.gave_up) == (grpc.StatusCode.UNAUTHENTICATED, False)
    assert ledger.lease_requests == []  # refused before the request was read
    [record] = [r for r in caplog.records if getattr(r, "action", "") == "ledger.refused"]
    assert "SUNDIAL_LEDGER_TOKEN" in record.getMessage()
    assert ledger.token not in caplog.text


async def test_runs_an_answer_left_out_for_its_byte_budget_are_leased_in_further_calls(
    client: LedgerClient, ledger: LedgerDouble
) -> None:
    job = uuid.uuid4()
    ledger.add_job(job, job_pb2.Target(http=job_pb2.HttpTarget(url="http://127.0.0.1:9/x")))
    ledger.grants_per_answer = 2
    refs = [RunRef(job, datetime(2026, 3, 8, 0, m, tzinfo=UTC)) for m in range(5)]
    results = await client.lease_runs(refs)
    assert [type(r).__name__ for r in results] == ["Lease"] * 5
    assert [r.run for r in results] == refs and {r.attempt for r in results} == {1}
    # 2 + 2 + 1: each further call asks only for the runs the last one left out.
    assert [len(r.runs) for r in ledger.lease_requests] == [5, 3, 1]
