"""The HTTP port (``SUNDIAL_HTTP_LISTEN``): JobService and AdminService over Connect,
served by the gRPC servicers, answer JSON with the same errors and details as gRPC;
a plain HTTP/1.1 request (what curl sends) works; the console's security headers."""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import ssl
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import pytest
from google.protobuf import descriptor_pb2, json_format
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from sundial.api.config import ApiConfig
from sundial.api.web import HttpServer
from sundial.core.config import ConfigError
from sundial.v1 import flow_pb2
from sundial.v1 import job_service_pb2 as pb
from tests.helpers.certs import Authority
from tests.integration.api.support import ADMIN_TOKEN, Api, StartApi, Tenant, make_job

pytestmark = pytest.mark.timeout(60)

JOBS = "/sundial.v1.JobService"


def http_server(api: Api) -> HttpServer:
    (server,) = [c for c in api.service.components if isinstance(c, HttpServer)]
    return server


class Http:
    """JSON calls to one API's HTTP port."""

    def __init__(self, api: Api) -> None:
        self.base = http_server(api).url
        self.session = aiohttp.ClientSession()

    async def call(
        self, path: str, body: dict[str, Any], token: str | None, **headers: str
    ) -> tuple[int, dict[str, Any], aiohttp.ClientResponse]:
        sent = {"content-type": "application/json", **headers}
        if token is not None:
            sent["authorization"] = f"Bearer {token}"
        async with self.session.post(self.base + path, json=body, headers=sent) as answer:
            return answer.status, await answer.json(), answer

    async def close(self) -> None:
        await self.session.close()


@pytest.fixture
async def http_api(start_api: StartApi) -> Api:
    return await start_api(http_listen="127.0.0.1:0")


@pytest.fixture
async def http(http_api: Api) -> Any:
    client = Http(http_api)
    yield client
    await client.close()


DETAIL_TYPES = {
    m.DESCRIPTOR.full_name: m
    for m in (
        error_details_pb2.ErrorInfo,
        error_details_pb2.RequestInfo,
        error_details_pb2.BadRequest,
        error_details_pb2.RetryInfo,
        error_details_pb2.PreconditionFailure,
    )
}


def details(error: dict[str, Any]) -> dict[str, Any]:
    """A Connect error's details decoded: {type name: message}."""
    decoded = {}
    for detail in error.get("details", []):
        raw = base64.b64decode(detail["value"] + "=" * (-len(detail["value"]) % 4))
        decoded[detail["type"]] = DETAIL_TYPES[detail["type"]].FromString(raw)
    return decoded


def grpc_details(exc: grpc.aio.AioRpcError) -> dict[str, Any]:
    status = rpc_status.from_call(exc)
    assert status is not None
    decoded = {}
    for packed in status.details:
        decoded[packed.TypeName()] = DETAIL_TYPES[packed.TypeName()].FromString(packed.value)
    return decoded


async def test_create_list_trigger_over_json_is_the_grpc_api(
    http: Http, http_api: Api, tenant: Tenant
) -> None:
    job = json_format.MessageToDict(make_job("from-curl"))
    status, created, _ = await http.call(f"{JOBS}/CreateJob", {"job": job}, tenant.token)
    assert status == 200, created
    job_id = created["job"]["jobId"]
    assert created["job"]["tenantId"] == tenant.tenant_id

    status, listed, _ = await http.call(f"{JOBS}/ListJobs", {}, tenant.token)
    assert status == 200
    assert [j["jobId"] for j in listed["jobs"]] == [job_id]
    # The same row through gRPC: one store, one implementation.
    seen = await http_api.jobs.ListJobs(pb.ListJobsRequest(), metadata=tenant.md)
    assert [j.job_id for j in seen.jobs] == [job_id]

    status, triggered, _ = await http.call(f"{JOBS}/TriggerJob", {"jobId": job_id}, tenant.token)
    assert status == 200, triggered
    assert triggered["run"]["kind"] == "RUN_KIND_MANUAL"
    runs = await http_api.jobs.ListRuns(pb.ListRunsRequest(job_id=job_id), metadata=tenant.md)
    assert [r.run_key for r in runs.runs] == [triggered["run"]["runKey"]]


async def test_a_bad_cron_is_invalid_argument_with_the_same_details_as_grpc(
    http: Http, http_api: Api, tenant: Tenant
) -> None:
    bad = make_job("bad", cron="61 * * * *")
    status, error, answer = await http.call(
        f"{JOBS}/CreateJob", {"job": json_format.MessageToDict(bad)}, tenant.token
    )
    assert status == 400
    assert error["code"] == "invalid_argument"
    got = details(error)
    violation = got["google.rpc.BadRequest"].field_violations[0]
    assert violation.field == "schedule.cron"
    assert got["google.rpc.ErrorInfo"].domain == "sundial"
    assert got["google.rpc.RequestInfo"].request_id == answer.headers["x-request-id"]

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await http_api.jobs.CreateJob(pb.CreateJobRequest(job=bad), metadata=tenant.md)
    assert raised.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert raised.value.details() == error["message"]
    over_grpc = grpc_details(raised.value)
    assert over_grpc["google.rpc.BadRequest"] == got["google.rpc.BadRequest"]
    assert over_grpc["google.rpc.ErrorInfo"] == got["google.rpc.ErrorInfo"]
    assert (await http_api.counts())["jobs"] == 0


async def test_flow_limits_over_json(http: Http, http_api: Api, tenant: Tenant) -> None:
    status, made, _ = await http.call(
        f"{JOBS}/SetFlowLimit", {"limit": {"key": "crm", "ratePerSecond": 50}}, tenant.token
    )
    assert status == 200, made
    assert (made["limit"]["burst"], made["limit"]["availableTokens"]) == (50, 50)
    status, listed, _ = await http.call(f"{JOBS}/ListFlowLimits", {}, tenant.token)
    assert status == 200, listed
    assert [(f["key"], f["ratePerSecond"]) for f in listed["limits"]] == [("crm", 50)]
    # JSON spells what the binary form cannot send by mistake: a rate of "NaN".
    for body, field in (
        ({"limit": {"key": "crm", "ratePerSecond": "NaN"}}, "limit.rate_per_second"),
        ({"limit": {"key": "", "maxRunning": 2}}, "limit.key"),
    ):
        status, error, _ = await http.call(f"{JOBS}/SetFlowLimit", body, tenant.token)
        assert (status, error["code"]) == (400, "invalid_argument"), error
        violation = details(error)["google.rpc.BadRequest"].field_violations[0]
        assert violation.field == field
    # The same store as gRPC's: the limit is as set first.
    seen = await http_api.jobs.ListFlowLimits(flow_pb2.ListFlowLimitsRequest(), metadata=tenant.md)
    assert [(f.key, f.rate_per_second, f.burst) for f in seen.limits] == [("crm", 50.0, 50)]


async def test_without_a_token_unauthenticated_and_wrong_role_permission_denied(
    http: Http, tenant: Tenant
) -> None:
    status, error, _ = await http.call(f"{JOBS}/ListJobs", {}, None)
    assert status == 401
    assert error["code"] == "unauthenticated"
    assert details(error)["google.rpc.ErrorInfo"].reason == "UNAUTHENTICATED"

    status, error, _ = await http.call(f"{JOBS}/ListJobs", {}, "not-a-real-token-at-all")
    assert (status, error["code"]) == (401, "unauthenticated")

    # A tenant token on AdminService, an admin token on JobService: the role is checked.
    status, error, _ = await http.call("/sundial.v1.AdminService/ListTenants", {}, tenant.token)
    assert (status, error["code"]) == (403, "permission_denied")
    status, error, _ = await http.call(f"{JOBS}/ListJobs", {}, ADMIN_TOKEN)
    assert (status, error["code"]) == (403, "permission_denied")
    status, listed, _ = await http.call("/sundial.v1.AdminService/ListTenants", {}, ADMIN_TOKEN)
    assert status == 200
    assert tenant.tenant_id in [t["tenantId"] for t in listed["tenants"]]


async def test_another_tenants_job_is_not_found(http: Http, http_api: Api, tenant: Tenant) -> None:
    other = await http_api.tenant("other")
    created = await http_api.jobs.CreateJob(
        pb.CreateJobRequest(job=make_job("private")), metadata=tenant.md
    )
    job_id = created.job.job_id
    for method in ("GetJob", "DescribeJob", "TriggerJob", "PauseJob"):
        status, error, _ = await http.call(f"{JOBS}/{method}", {"jobId": job_id}, other.token)
        assert (status, error["code"]) == (404, "not_found"), method
    status, listed, _ = await http.call(f"{JOBS}/ListJobs", {}, other.token)
    assert status == 200
    assert listed.get("jobs", []) == []
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await http_api.jobs.GetJob(pb.GetJobRequest(job_id=job_id), metadata=other.md)
    assert raised.value.code() is grpc.StatusCode.NOT_FOUND


async def raw_http(port: int, request: bytes) -> tuple[str, dict[str, str], bytes]:
    """One HTTP/1.1 exchange on a plain socket, as curl makes it."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        status_line, *lines = head.strip().split("\r\n")
        headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines)}
        if headers.get("transfer-encoding") == "chunked":
            body = b""
            while size := int((await reader.readuntil(b"\r\n")).strip(), 16):
                body += await reader.readexactly(size)
                await reader.readexactly(2)
        else:
            body = await reader.readexactly(int(headers.get("content-length", "0")))
    finally:
        writer.close()
        await writer.wait_closed()
    return status_line, headers, body


async def test_a_curl_style_http11_request(http_api: Api, tenant: Tenant) -> None:
    port = http_server(http_api).port
    body = b"{}"
    status_line, headers, answer = await raw_http(
        port,
        b"POST /sundial.v1.JobService/ListJobs HTTP/1.1\r\n"
        b"Host: 127.0.0.1\r\nUser-Agent: curl/8.0\r\nAccept: */*\r\n"
        + f"authorization: Bearer {tenant.token}\r\n".encode()
        + b"content-type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body,
    )
    assert status_line.startswith("HTTP/1.1 200"), status_line
    assert headers["content-type"] == "application/json"
    assert json.loads(answer) == {}
    assert "script-src 'self'" in headers["content-security-policy"]
    assert headers["cache-control"] == "no-store"


async def test_the_api_description_and_the_console_are_served(http: Http) -> None:
    async with http.session.get(http.base + "/api") as answer:
        index = await answer.json()
    jobs = next(s for s in index["services"] if s["name"] == "sundial.v1.JobService")
    list_jobs = next(m for m in jobs["methods"] if m["name"] == "ListJobs")
    assert list_jobs["url"] == f"{JOBS}/ListJobs"
    assert list_jobs["input"] == "sundial.v1.ListJobsRequest"
    async with http.session.get(http.base + index["descriptor_set"]) as answer:
        fds = descriptor_pb2.FileDescriptorSet.FromString(await answer.read())
    assert "sundial/v1/job_service.proto" in [f.name for f in fds.file]
    async with http.session.get(http.base + "/console/") as answer:
        page = await answer.text()
        assert answer.status == 200
        csp = answer.headers["content-security-policy"]
    assert "<script" in page
    assert "<script>" not in page  # no inline script: the CSP would block it
    assert "'unsafe-inline'" not in csp
    assert "frame-ancestors 'none'" in csp


async def test_cors_only_for_configured_origins(start_api: StartApi, tenant: Tenant) -> None:
    del tenant
    api = await start_api(http_listen="127.0.0.1:0", http_cors_origins=("https://ops.example.com",))
    base = http_server(api).url
    preflight = {
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization, content-type",
    }
    async with aiohttp.ClientSession() as session:
        async with session.options(
            f"{base}{JOBS}/ListJobs", headers={"origin": "https://ops.example.com", **preflight}
        ) as answer:
            assert answer.status == 200
            allowed = answer.headers["access-control-allow-origin"]
            assert allowed == "https://ops.example.com"
            assert "access-control-allow-credentials" not in answer.headers
        async with session.options(
            f"{base}{JOBS}/ListJobs", headers={"origin": "https://evil.example", **preflight}
        ) as answer:
            assert answer.status == 400
            assert "access-control-allow-origin" not in answer.headers


async def test_no_cors_by_default(http: Http) -> None:
    async with http.session.post(
        f"{http.base}{JOBS}/ListJobs",
        json={},
        headers={"origin": "https://evil.example", "content-type": "application/json"},
    ) as answer:
        assert "access-control-allow-origin" not in answer.headers


async def test_tls_with_the_grpc_ports_certificate(start_api: StartApi, tmp_path: Path) -> None:
    ca = Authority(tmp_path / "pki")
    issued = ca.issue("api", client=False)
    api = await start_api(
        http_listen="127.0.0.1:0",
        tls_cert_file=issued.cert_file,
        tls_key_file=issued.key_file,
        channel_tls=ca.client_tls(),
    )
    server = http_server(api)
    assert server.url.startswith("https://")
    trusted = ssl.create_default_context(cafile=str(ca.cert_file))
    async with aiohttp.ClientSession() as session:
        async with session.post(
            f"{server.url}{JOBS}/ListJobs",
            json={},
            headers={"content-type": "application/json"},
            ssl=trusted,
        ) as answer:
            assert answer.status == 401  # served over TLS, and still authenticated
        with pytest.raises(aiohttp.ClientError):  # plaintext is not served on that port
            async with session.post(
                f"http://127.0.0.1:{server.port}{JOBS}/ListJobs", json={}
            ) as answer:
                await answer.read()


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
async def test_curl_creates_lists_and_triggers_a_job(http_api: Api, tenant: Tenant) -> None:
    base = http_server(http_api).url
    auth = f"authorization: Bearer {tenant.token}"

    async def curl(method: str, body: str) -> dict[str, Any]:
        process = await asyncio.create_subprocess_exec(
            "curl", "--silent", "--show-error", "--noproxy", "*", "--max-time", "10",
            "-H", auth, "-H", "content-type: application/json", "-d", body,
            f"{base}{JOBS}/{method}",
            stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, _ = await process.communicate()
        assert process.returncode == 0
        return json.loads(out)

    created = await curl(
        "CreateJob",
        '{"job": {"name": "report", "schedule": {"cron": "0 9 * * MON-FRI", '
        '"timeZone": "Europe/Berlin"}, "target": {"http": {"url": "http://127.0.0.1:9/hook"}}}}',
    )
    job_id = created["job"]["jobId"]
    assert [j["jobId"] for j in (await curl("ListJobs", "{}"))["jobs"]] == [job_id]
    triggered = await curl("TriggerJob", json.dumps({"jobId": job_id}))
    assert triggered["run"]["jobId"] == job_id
    error = await curl("GetJob", '{"jobId": "Not A Job Id!"}')  # neither a uid nor an id
    assert error["code"] == "invalid_argument"


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"http_listen": "8080"}, "http_listen"),
        ({"http_cors_origins": ("https://ops.example.com/path",)}, "http_cors_origins"),
        ({"http_cors_origins": ("*",)}, "http_cors_origins"),
        ({"http_cors_origins": ("ops.example.com",)}, "http_cors_origins"),
    ],
)
def test_bad_http_settings_are_refused(settings: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as raised:
        ApiConfig(database_url="postgresql://localhost/x", **settings)
    assert raised.value.name == field


@pytest.mark.parametrize(
    "body",
    [b"not json", b'{"jobId": 5}', b'{"pageSize": "many"}', b'{"scheduledAfter": "yesterday"}'],
)
async def test_a_body_that_does_not_decode_is_invalid_argument(
    http: Http, tenant: Tenant, body: bytes
) -> None:
    async with http.session.post(
        f"{http.base}{JOBS}/ListRuns",
        data=body,
        headers={"content-type": "application/json", "authorization": f"Bearer {tenant.token}"},
    ) as answer:
        assert answer.status == 400
        error = await answer.json()
    assert error["code"] == "invalid_argument"
    assert error["message"].startswith("the body is not a ListRunsRequest in JSON")
    got = details(error)
    assert got["google.rpc.ErrorInfo"].reason == "INVALID_ARGUMENT"
    assert got["google.rpc.BadRequest"].field_violations


async def test_rollback_job_over_json(http: Http, http_api: Api, tenant: Tenant) -> None:
    """A new RPC is on both transports once registered: RollbackJob over Connect JSON."""
    job = json_format.MessageToDict(make_job("rolled", description="first"))
    status, created, _ = await http.call(f"{JOBS}/CreateJob", {"job": job}, tenant.token)
    assert status == 200, created
    job_id = created["job"]["jobId"]
    change = {"job": {"jobId": job_id, "description": "second"}, "updateMask": "description"}
    status, updated, _ = await http.call(f"{JOBS}/UpdateJob", change, tenant.token)
    assert status == 200 and updated["job"]["description"] == "second", updated
    body = {"jobId": job_id, "version": 1, "expectedVersion": 2}
    status, rolled, _ = await http.call(f"{JOBS}/RollbackJob", body, tenant.token)
    assert status == 200, rolled
    assert rolled["job"]["description"] == "first" and rolled["job"]["version"] == "3"
    status, stale, answer = await http.call(f"{JOBS}/RollbackJob", body, tenant.token)
    assert status == 409 and stale["code"] == "aborted", stale
    # A stale expected_version is not worth repeating as it is: no Retry-After.
    assert "retry-after" not in answer.headers
