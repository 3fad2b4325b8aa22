"""Per-tenant egress policies through the API: set by an admin, shown to the tenant,
applied when a job is written, and the ListJobs filter of targets it forbids.

The API's lookups go to a DNS server on loopback (``dns_server``) that answers with the
addresses the tests choose: no outside DNS is involved.
"""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from sundial.v1 import admin_pb2, egress_pb2, job_pb2
from sundial.v1 import job_service_pb2 as pb
from tests.helpers.dns_server import DnsServer
from tests.integration.api.support import Api, StartApi, Tenant, expect_error, make_job

HTTP, GRPC = egress_pb2.EGRESS_PROTOCOL_HTTP, egress_pb2.EGRESS_PROTOCOL_GRPC

# What the names of these tests resolve to, for the API's lookups.
DNS = {
    "svc.internal.test": ["10.20.0.5"],
    "db.other.test": ["192.168.3.4"],
    "meta.internal.test": ["169.254.169.254"],
    "public.example": ["93.184.216.34"],
}


@pytest.fixture
async def start_api(start_api: StartApi, dns_server: DnsServer) -> StartApi:
    """APIs that look target names up at :func:`dns_server`."""

    async def start(**settings: Any) -> Api:
        return await start_api(dns_nameservers=(dns_server.address,), **settings)

    return start


@pytest.fixture
def dns(dns_server: DnsServer) -> dict[str, list[str]]:
    """What the API's lookups find: :data:`DNS` (editable by the test); any other name
    does not exist."""
    dns_server.answers.update({name: list(addresses) for name, addresses in DNS.items()})
    return dns_server.answers


def rule(what: str, *protocols: int) -> egress_pb2.EgressRule:
    if "/" in what or what[0].isdigit():
        return egress_pb2.EgressRule(cidr=what, protocols=protocols)
    return egress_pb2.EgressRule(host=what, protocols=protocols)


async def set_policy(api: Api, tenant_id: str, *rules: egress_pb2.EgressRule) -> Any:
    return await api.admin.SetTenantEgressPolicy(
        admin_pb2.SetTenantEgressPolicyRequest(
            tenant_id=tenant_id, policy=egress_pb2.EgressPolicy(rules=rules)
        ),
        metadata=api.admin_md,
    )


def http_job(name: str, url: str) -> job_pb2.Job:
    return make_job(name, target=job_pb2.Target(http=job_pb2.HttpTarget(url=url)))


def grpc_job(name: str, address: str) -> job_pb2.Job:
    return make_job(
        name, target=job_pb2.Target(grpc=job_pb2.GrpcTarget(address=address, plaintext=True))
    )


async def create(api: Api, tenant: Tenant, job: job_pb2.Job) -> str:
    """``"created"``, or the refusal's message (INVALID_ARGUMENT on the target field)."""
    try:
        created = await api.jobs.CreateJob(pb.CreateJobRequest(job=job), metadata=tenant.md)
    except grpc.aio.AioRpcError as exc:
        assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT, exc.details()
        assert (exc.details() or "").startswith("target."), exc.details()
        return exc.details() or ""
    return "created" if created.job.job_id else "?"


@pytest.fixture
async def strict(start_api: StartApi) -> Api:
    """An API whose operator allows nothing non-public (the production default)."""
    return await start_api(allow_loopback_targets=False, allow_private_targets=False)


async def test_tenant_a_with_a_policy_reaches_its_targets_and_tenant_b_does_not(
    strict: Api, dns: dict[str, list[str]]
) -> None:
    a, b = await strict.tenant("tenant-a"), await strict.tenant("tenant-b")
    await set_policy(strict, a.tenant_id, rule("*.internal.test"), rule("10.0.0.0/8"))
    cases = {
        "svc": http_job("svc", "http://svc.internal.test/x"),
        "literal": http_job("literal", "http://10.1.2.3/x"),
        "grpc": grpc_job("grpc", "svc.internal.test:50051"),
        "mapped": http_job("mapped", "http://[::ffff:10.1.2.3]/x"),
    }
    for name, job in cases.items():
        assert await create(strict, a, job) == "created", name
        refused = await create(strict, b, job)
        assert "egress policy does not allow" in refused, (name, refused)
    # Outside A's rules, a private address is refused for A too; public is for everyone.
    assert "(192.168.3.4) is a private" in await create(
        strict, a, http_job("db", "http://db.other.test/x")
    )
    assert await create(strict, b, http_job("pub", "https://public.example/x")) == "created"


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:169.254.169.254]/",
        "http://[::ffff:a9fe:a9fe]/",
        "http://[2002:a9fe:a9fe::]/",
        "http://[64:ff9b::a9fe:a9fe]/",
        "http://[fd00:ec2::254]/",
        "http://meta.internal.test/",  # a name A's host rule covers, resolving to it
    ],
)
async def test_nobody_reaches_the_metadata_service_whatever_the_policy(
    start_api: StartApi, dns: dict[str, list[str]], url: str
) -> None:
    api = await start_api(allow_loopback_targets=True, allow_private_targets=True)
    a = await api.tenant("tenant-a")
    await set_policy(api, a.tenant_id, rule("0.0.0.0/0"), rule("::/0"), rule("*.internal.test"))
    refused = await create(api, a, http_job("meta", url))
    assert "a cloud metadata address" in refused, refused


async def test_an_unresolvable_name_is_accepted_at_write_time(
    strict: Api, dns: dict[str, list[str]]
) -> None:
    b = await strict.tenant("tenant-b")
    assert await create(strict, b, http_job("later", "http://not-yet.internal.test/x")) == "created"
    assert await create(strict, b, grpc_job("gone", "nowhere.invalid:443")) == "created"


async def test_the_policy_is_set_shown_and_cleared(strict: Api) -> None:
    a = await strict.tenant("tenant-a")
    shown = await strict.jobs.GetEgressPolicy(pb.GetEgressPolicyRequest(), metadata=a.md)
    assert not shown.egress.tenant_specific and not shown.egress.policy.rules
    assert not shown.egress.loopback_allowed and not shown.egress.HasField("update_time")
    answer = await set_policy(
        strict, a.tenant_id, rule("*.SVC.cluster.local."), rule("10.96.0.0/12", GRPC)
    )
    expected = egress_pb2.EgressPolicy(
        rules=[
            egress_pb2.EgressRule(host="*.svc.cluster.local", protocols=[HTTP, GRPC]),
            egress_pb2.EgressRule(cidr="10.96.0.0/12", protocols=[GRPC]),
        ]
    )
    assert answer.egress.policy == expected and answer.egress.tenant_specific
    shown = await strict.jobs.GetEgressPolicy(pb.GetEgressPolicyRequest(), metadata=a.md)
    assert shown.egress.policy == expected and shown.egress.HasField("update_time")
    got = await strict.admin.GetTenantEgressPolicy(
        admin_pb2.GetTenantEgressPolicyRequest(tenant_id=a.tenant_id), metadata=strict.admin_md
    )
    assert got.egress == shown.egress
    cleared = await strict.admin.SetTenantEgressPolicy(
        admin_pb2.SetTenantEgressPolicyRequest(tenant_id=a.tenant_id, use_default=True),
        metadata=strict.admin_md,
    )
    assert not cleared.egress.tenant_specific and not cleared.egress.policy.rules


async def test_the_default_policy_shows_the_operator_switches(start_api: StartApi) -> None:
    api = await start_api(allow_loopback_targets=True, allow_private_targets=True)
    b = await api.tenant("tenant-b")
    shown = await api.jobs.GetEgressPolicy(pb.GetEgressPolicyRequest(), metadata=b.md)
    assert shown.egress.loopback_allowed and not shown.egress.tenant_specific
    assert [r.cidr for r in shown.egress.policy.rules] == ["0.0.0.0/0", "::/0"]


@pytest.mark.parametrize(
    ("bad", "field", "text"),
    [
        (rule("10.1.2.3/8"), "policy.rules[1].cidr", "not a CIDR network"),
        (rule("a.*.test"), "policy.rules[1].host", "first label"),
        (egress_pb2.EgressRule(host="*"), "policy.rules[1].host", "needs a suffix"),
        (egress_pb2.EgressRule(host="1.2.3.4"), "policy.rules[1].host", "allow it as a cidr"),
        (egress_pb2.EgressRule(), "policy.rules[1]", "one of host or cidr"),
        (egress_pb2.EgressRule(cidr="10.0.0.0/8", protocols=[7]), "policy.rules[1].protocols", ""),
    ],
)
async def test_a_malformed_policy_is_refused_naming_the_field_and_changes_nothing(
    strict: Api, bad: egress_pb2.EgressRule, field: str, text: str
) -> None:
    a = await strict.tenant("tenant-a")
    await expect_error(
        set_policy(strict, a.tenant_id, rule("10.0.0.0/8"), bad),
        grpc.StatusCode.INVALID_ARGUMENT,
        field=field,
        text=text,
    )
    shown = await strict.jobs.GetEgressPolicy(pb.GetEgressPolicyRequest(), metadata=a.md)
    assert not shown.egress.tenant_specific


async def test_only_admins_set_policies_of_tenants_that_exist(strict: Api) -> None:
    a = await strict.tenant("tenant-a")
    await expect_error(
        strict.admin.SetTenantEgressPolicy(
            admin_pb2.SetTenantEgressPolicyRequest(tenant_id=a.tenant_id), metadata=a.md
        ),
        grpc.StatusCode.PERMISSION_DENIED,
    )
    await expect_error(set_policy(strict, "no-such-tenant"), grpc.StatusCode.NOT_FOUND)
    for call in (
        set_policy(strict, "bad\x00id"),
        strict.admin.GetTenantEgressPolicy(
            admin_pb2.GetTenantEgressPolicyRequest(tenant_id=""), metadata=strict.admin_md
        ),
    ):
        await expect_error(call, grpc.StatusCode.INVALID_ARGUMENT, field="tenant_id")
    await expect_error(
        strict.admin.GetTenantEgressPolicy(
            admin_pb2.GetTenantEgressPolicyRequest(tenant_id="no-such-tenant"),
            metadata=strict.admin_md,
        ),
        grpc.StatusCode.NOT_FOUND,
    )


async def test_list_jobs_filters_the_targets_the_current_policy_forbids(
    strict: Api, dns: dict[str, list[str]]
) -> None:
    a = await strict.tenant("tenant-a")
    await set_policy(strict, a.tenant_id, rule("*.internal.test"), rule("10.0.0.0/8"))
    for job in (
        http_job("by-name", "http://svc.internal.test/x"),
        http_job("by-literal", "http://10.1.2.3/x"),
        grpc_job("grpc-literal", "10.4.4.4:50051"),
        http_job("public", "https://public.example/x"),
        http_job("unresolvable", "http://not-yet.internal.test/x"),
    ):
        assert await create(strict, a, job) == "created", job.name

    async def forbidden(page_size: int = 0) -> list[str]:
        names: list[str] = []
        token = ""
        while True:
            page = await strict.jobs.ListJobs(
                pb.ListJobsRequest(target_forbidden=True, page_size=page_size, page_token=token),
                metadata=a.md,
            )
            names += [job.name for job in page.jobs]
            token = page.next_page_token
            if not token:
                return names

    assert await forbidden() == []
    # Tightened: the network rule now covers gRPC only, the host rule is gone.
    await set_policy(strict, a.tenant_id, rule("10.0.0.0/8", GRPC))
    assert await forbidden() == ["by-literal", "by-name"]
    assert await forbidden(page_size=1) == ["by-literal", "by-name"]
    # The unfiltered list still has every job.
    every = await strict.jobs.ListJobs(pb.ListJobsRequest(), metadata=a.md)
    assert len(every.jobs) == 5
    # Widened again: nothing is forbidden.
    await set_policy(strict, a.tenant_id, rule("10.0.0.0/8"), rule("*.test"))
    assert await forbidden() == []
