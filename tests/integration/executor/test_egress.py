"""Egress policies at call time, against real local targets: every connected address is
checked against the policy the lease carries, a changed policy stops the next call even
over a pooled connection or a cached channel, and a name that does not resolve fails
with a clear connection error.

The executor's name lookups go to a DNS server on loopback (``dns_server``): every name
here resolves to what the test says, or does not exist, whatever the machine's DNS.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator

import pytest

from sundial.core import wire
from sundial.core.egress import EgressPolicy, parse_rule, policy_of
from sundial.executor.convert import lease_from_grant
from sundial.executor.runner import Runner
from sundial.internal.v1 import ledger_pb2
from sundial.run import ErrorClass, GrpcTarget, HttpTarget, Outcome, OutcomeStatus
from sundial.targets import AddressPolicy, CircuitBreaker, GrpcCaller, HttpCaller
from sundial.targets import address as address_module
from tests.helpers.dns_server import DnsServer
from tests.helpers.eventually import assert_eventually
from tests.helpers.grpc_target import GrpcTargetServer
from tests.helpers.target_server import RecordingTarget
from tests.integration.executor.conftest import make_lease

pytestmark = pytest.mark.timeout(30)

# Tenant A of the issue; the operator allows loopback (the targets listen on it), so a
# loopback address is like any private one: reachable only by a rule of the policy.
TENANT_A = policy_of([parse_rule("*.internal.test"), parse_rule("10.0.0.0/8")])
TIGHTENED = policy_of([parse_rule("10.0.0.0/8")])


async def answer_dns(dns_server: DnsServer, answers: dict[str, list[str]]) -> list[str]:
    """The DNS server answers ``answers``; other names do not exist. Returns the names
    looked up, in order (the server's live record)."""
    dns_server.answers.update(answers)
    return dns_server.order


@pytest.fixture
async def runner() -> AsyncIterator[Runner]:
    policy = AddressPolicy(allow_loopback=True)
    http, grpc_caller = HttpCaller(policy, max_connections=8), GrpcCaller(policy)
    yield Runner(http, grpc_caller, CircuitBreaker(failures=100, open_s=1))
    await http.aclose()
    await grpc_caller.aclose()


def port_of(address: str) -> str:
    return address.rsplit(":", 1)[1]


async def call(
    runner: Runner, target: HttpTarget | GrpcTarget, egress: EgressPolicy | None
) -> Outcome:
    return await runner.run(dataclasses.replace(make_lease(target), egress=egress))


async def test_a_name_resolving_outside_the_policy_is_refused_at_call_time(
    runner: Runner, target: RecordingTarget, dns_server: DnsServer
) -> None:
    port = port_of(target.url)
    await answer_dns(
        dns_server,
        {
            "svc.internal.test": ["127.0.0.1"],
            "rogue.example": ["127.0.0.1"],  # passed the write-time check, then moved
            "lan.example": ["192.168.5.5"],
        },
    )
    allowed = await call(runner, HttpTarget(f"http://svc.internal.test:{port}/ok"), TENANT_A)
    assert allowed.status is OutcomeStatus.SUCCEEDED, allowed.error
    for host, address in (("rogue.example", "127.0.0.1"), ("lan.example", "192.168.5.5")):
        outcome = await call(runner, HttpTarget(f"http://{host}:{port}/no"), TENANT_A)
        assert outcome.status is OutcomeStatus.FAILED_FINAL
        assert outcome.error_class is ErrorClass.TARGET_FORBIDDEN
        assert outcome.error.startswith(f"{host} ({address}) is a "), outcome.error
        assert "egress policy does not allow for http targets" in outcome.error
    assert [c.request.path for c in target.calls] == ["/ok"]
    # A tenant without a policy gets the operator's default (here: loopback allowed).
    default = await call(runner, HttpTarget(f"http://rogue.example:{port}/default"), None)
    assert default.status is OutcomeStatus.SUCCEEDED, default.error


async def test_a_tightened_policy_stops_the_next_call_over_a_pooled_connection(
    runner: Runner, target: RecordingTarget, dns_server: DnsServer
) -> None:
    looked_up = await answer_dns(dns_server, {"svc.internal.test": ["127.0.0.1"]})
    url = f"http://svc.internal.test:{port_of(target.url)}/n"
    for _ in range(2):  # the second call reuses the pooled connection: no lookup
        assert (await call(runner, HttpTarget(url), TENANT_A)).status is OutcomeStatus.SUCCEEDED
    assert looked_up == ["svc.internal.test"]
    # Under another policy the pooled connection is not reused: a new one is resolved
    # and checked, and refused before anything is sent.
    refused = await call(runner, HttpTarget(url), TIGHTENED)
    assert refused.error_class is ErrorClass.TARGET_FORBIDDEN, refused.error
    assert len(target.calls) == 2
    assert looked_up == ["svc.internal.test"] * 2
    # Widened again: calls go through.
    assert (await call(runner, HttpTarget(url), TENANT_A)).status is OutcomeStatus.SUCCEEDED
    assert len(target.calls) == 3


async def test_an_ip_literal_is_judged_by_the_network_rules(
    runner: Runner, target: RecordingTarget
) -> None:
    with_loopback = policy_of([parse_rule("127.0.0.0/8=http")])
    ok = await call(runner, HttpTarget(f"{target.url}/lit"), with_loopback)
    assert ok.status is OutcomeStatus.SUCCEEDED, ok.error
    refused = await call(runner, HttpTarget(f"{target.url}/lit"), TENANT_A)
    assert refused.error_class is ErrorClass.TARGET_FORBIDDEN
    assert refused.error.startswith("127.0.0.1 is a loopback address"), refused.error
    metadata = await call(
        runner,
        HttpTarget("http://[::ffff:169.254.169.254]/latest/"),
        policy_of([parse_rule("0.0.0.0/0"), parse_rule("::/0")]),
    )
    assert metadata.error_class is ErrorClass.TARGET_FORBIDDEN
    assert "a cloud metadata address" in metadata.error
    assert len(target.calls) == 1


async def test_grpc_targets_are_checked_at_every_call_over_a_cached_channel(
    runner: Runner, dns_server: DnsServer
) -> None:
    async with GrpcTargetServer() as server:
        await answer_dns(dns_server, {"svc.internal.test": ["127.0.0.1"]})
        target = GrpcTarget(f"svc.internal.test:{port_of(server.address)}", plaintext=True)
        assert (await call(runner, target, TENANT_A)).status is OutcomeStatus.SUCCEEDED
        refused = await call(runner, target, TIGHTENED)
        assert refused.status is OutcomeStatus.FAILED_FINAL
        assert refused.error_class is ErrorClass.TARGET_FORBIDDEN
        assert "for grpc targets" in refused.error
        http_only = policy_of([parse_rule("*.internal.test=http")])
        assert (await call(runner, target, http_only)).error_class is ErrorClass.TARGET_FORBIDDEN
        assert len(server.calls) == 1


async def test_a_name_that_does_not_resolve_fails_with_a_clear_connection_error(
    runner: Runner, dns_server: DnsServer
) -> None:
    await answer_dns(dns_server, {})
    outcome = await call(runner, HttpTarget("http://not-yet.internal.test/x"), TENANT_A)
    assert outcome.status is OutcomeStatus.FAILED_RETRYABLE
    assert outcome.error_class is ErrorClass.CONNECTION
    assert "host not-yet.internal.test does not resolve" in outcome.error, outcome.error
    grpc_outcome = await call(runner, GrpcTarget("not-yet.internal.test:443"), TENANT_A)
    assert grpc_outcome.error_class is ErrorClass.CONNECTION
    assert "does not resolve" in grpc_outcome.error


def test_a_grant_carries_the_tenants_policy_or_none() -> None:
    ref = make_lease(HttpTarget("http://x.test/")).run
    grant = ledger_pb2.Grant(
        attempt=1,
        target=wire.target(HttpTarget("http://svc.internal.test/x")),
        run_key=ref.key,
    )
    grant.lease_until.GetCurrentTime()
    assert lease_from_grant(ref, grant).egress is None
    grant.egress.CopyFrom(wire.egress_policy(TENANT_A))
    assert lease_from_grant(ref, grant).egress == TENANT_A


async def test_one_tenants_names_that_never_answer_leave_another_tenants_calls_on_time(
    target: RecordingTarget, dns_server: DnsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(address_module, "RESOLVE_TIMEOUT_S", 5.0)
    port = port_of(target.url)
    dns_server.silent.add("never.a.test")
    dns_server.answers["fine.b.test"] = ["127.0.0.1"]
    policy = AddressPolicy(allow_loopback=True, resolver=dns_server.resolver(per_tenant=2))
    http = HttpCaller(policy, max_connections=64)
    try:
        # Tenant A: 40 calls whose target names never answer.
        stuck = [
            asyncio.create_task(
                http.call(HttpTarget(f"http://never.a.test:{port}/a"), b"", {}, tenant="a")
            )
            for _ in range(40)
        ]
        await assert_eventually(lambda: dns_server.asked["never.a.test"] >= 2)
        # Tenant B's calls, meanwhile, each resolve and succeed at once.
        for i in range(10):
            outcome = await asyncio.wait_for(
                http.call(HttpTarget(f"http://fine.b.test:{port}/b{i}"), b"", {}, tenant="b"),
                timeout=1.0,
            )
            assert outcome.status is OutcomeStatus.SUCCEEDED, outcome
        assert not any(task.done() for task in stuck)
        for task in stuck:
            task.cancel()
        await asyncio.gather(*stuck, return_exceptions=True)
    finally:
        await http.aclose()
        await policy.resolver.close()  # type: ignore[union-attr]
    assert [c.path for c in target.calls] == [f"/b{i}" for i in range(10)]
