"""SSRF protection under each operator setting: which target hosts a job may call."""

from __future__ import annotations

import grpc
import pytest

from sundial.v1 import job_pb2
from sundial.v1 import job_service_pb2 as pb
from tests.integration.api.support import StartApi, expect_error, make_job

PUBLIC = "http://93.184.216.34/hook"  # a public address: no DNS needed


async def _verdict(api, tenant, url: str) -> str:  # type: ignore[no-untyped-def]
    job = make_job(target=job_pb2.Target(http=job_pb2.HttpTarget(url=url)))
    try:
        await api.jobs.CreateJob(pb.CreateJobRequest(job=job), metadata=tenant.md)
    except grpc.aio.AioRpcError as exc:
        assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT, exc.details()
        assert exc.details().startswith("target.http.url: "), exc.details()
        return "refused"
    finally:
        await api.sql("DELETE FROM jobs")
        await api.sql("UPDATE tenants SET job_count = 0")
    return "allowed"


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        (
            {"allow_loopback_targets": False, "allow_private_targets": False},
            {
                PUBLIC: "allowed",
                "https://93.184.216.34:8443/x": "allowed",
                "http://127.0.0.1/": "refused",
                "http://127.9.9.9/": "refused",
                "http://localhost:8080/": "refused",
                "http://[::1]/": "refused",
                "http://[::ffff:127.0.0.1]/": "refused",
                "http://10.0.0.1/": "refused",
                "http://172.16.0.1/": "refused",
                "http://192.168.1.1/": "refused",
                "http://169.254.169.254/": "refused",
            },
        ),
        (
            {"allow_loopback_targets": True, "allow_private_targets": False},
            {
                "http://127.0.0.1/": "allowed",
                "http://localhost:8080/": "allowed",
                "http://[::1]/": "allowed",
                "http://10.0.0.1/": "refused",
            },
        ),
        (
            {"allow_loopback_targets": False, "allow_private_targets": True},
            {
                "http://10.0.0.1/": "allowed",
                "http://192.168.1.1/": "allowed",
                "http://[fd12::1]/": "allowed",
                "http://169.254.10.1/": "allowed",
                "http://127.0.0.1/": "refused",
                # Metadata services, unspecified, multicast: never.
                "http://169.254.169.254/": "refused",
                "http://[fd00:ec2::254]/": "refused",
                "http://100.100.100.200/": "refused",
                "http://0.0.0.0/": "refused",
                "http://239.1.1.1/": "refused",
            },
        ),
    ],
    ids=["strict", "loopback-allowed", "private-allowed"],
)
async def test_target_policy(
    start_api: StartApi, settings: dict[str, bool], expected: dict[str, str]
) -> None:
    api = await start_api(**settings)
    tenant = await api.tenant("acme")
    verdicts = {url: await _verdict(api, tenant, url) for url in expected}
    assert verdicts == expected


async def test_refusal_names_the_reason(start_api: StartApi) -> None:
    api = await start_api(allow_loopback_targets=False)
    tenant = await api.tenant("acme")
    job = make_job(target=job_pb2.Target(http=job_pb2.HttpTarget(url="http://localhost/x")))
    await expect_error(
        api.jobs.CreateJob(pb.CreateJobRequest(job=job), metadata=tenant.md),
        grpc.StatusCode.INVALID_ARGUMENT,
        field="target.http.url",
        text="loopback",
    )
    grpc_job = make_job(target=job_pb2.Target(grpc=job_pb2.GrpcTarget(address="localhost:443")))
    await expect_error(
        api.jobs.CreateJob(pb.CreateJobRequest(job=grpc_job), metadata=tenant.md),
        grpc.StatusCode.INVALID_ARGUMENT,
        field="target.grpc.address",
        text="loopback",
    )
