"""A tenant secret end to end (docs/design.md section 7, "Secrets"): referenced by a
target, it reaches the target on the call, and a search of every read (gRPC and
HTTP/JSON), ``sundial export``, ``apply --dry-run``, revisions, audit events, the three
services' logs and every span they exported for the run finds the value nowhere."""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest
from typer.testing import CliRunner

from sundial.cli.app import app
from sundial.devstack import Stack
from sundial.v1 import job_pb2, job_service_pb2, secret_pb2
from tests.helpers.cluster import Cluster, running_cluster
from tests.helpers.eventually import assert_eventually
from tests.helpers.otlp_receiver import OtlpReceiver
from tests.helpers.target_server import RecordingTarget

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as running:
        yield running


@pytest.fixture
async def traced(
    stack: Stack, migrated_database_url: str, tmp_path: Path, receiver: OtlpReceiver
) -> AsyncIterator[Cluster]:
    async with running_cluster(
        stack,
        migrated_database_url,
        tmp_path,
        http=True,
        SUNDIAL_OTLP_ENDPOINT=receiver.endpoint,
        OTEL_BSP_SCHEDULE_DELAY="200",
        SUNDIAL_LOG_LEVEL="DEBUG",
    ) as running:
        yield running


async def test_a_referenced_secret_reaches_the_target_and_nothing_else(
    traced: Cluster, receiver: OtlpReceiver, target: RecordingTarget, tmp_path: Path
) -> None:
    value = f"crm-{secrets.token_hex(16)}"
    tenant = await traced.tenant()
    await tenant.call(
        "CreateSecret",
        secret_pb2.CreateSecretRequest(secret=secret_pb2.Secret(name="crm-token", value=value)),
    )
    reference = "Bearer ${secret:crm-token}"
    job = await tenant.create_job(
        job_pb2.Job(
            name="crm sync",
            schedule=job_pb2.Schedule(cron="0 0 1 1 *"),
            target=job_pb2.Target(
                http=job_pb2.HttpTarget(
                    url=f"{target.url}/crm",
                    headers={"Authorization": reference, "X-Account": "${secret:crm-token}"},
                )
            ),
        )
    )
    job_id = job.uid  # type: ignore[attr-defined]
    trace_id = secrets.token_hex(16)
    await tenant.jobs.TriggerJob(
        job_service_pb2.TriggerJobRequest(job_id=job_id),
        metadata=(*tenant.metadata, ("traceparent", f"00-{trace_id}-{secrets.token_hex(8)}-01")),
        timeout=10,
    )

    def called() -> None:
        calls = target.calls_to("/crm")
        assert len(calls) == 1, calls
        call = calls[0]
        # The recording target keeps header names lower-cased.
        assert call.request.headers["authorization"] == f"Bearer {value}"
        assert call.request.headers["x-account"] == value

    await assert_eventually(called, timeout_s=30, interval_s=0.05)

    def whole_run() -> None:
        services = {s.service for s in receiver.trace(trace_id)}
        assert services == {"sundial-api", "sundial-scheduler", "sundial-executor"}
        names = {s.name for s in receiver.trace(trace_id)}
        assert "sundial.attempt" in names, names

    await assert_eventually(whole_run, timeout_s=30, interval_s=0.2)

    # Every read over gRPC.
    reads = [
        await tenant.call("GetJob", job_service_pb2.GetJobRequest(job_id=job_id)),
        await tenant.call("ListJobs", job_service_pb2.ListJobsRequest()),
        await tenant.call("DescribeJob", job_service_pb2.DescribeJobRequest(job_id=job_id)),
        await tenant.call("ListRuns", job_service_pb2.ListRunsRequest(job_id=job_id)),
        await tenant.call(
            "ListJobRevisions",
            job_service_pb2.ListJobRevisionsRequest(
                job_id=job_id, view=job_service_pb2.JOB_VIEW_FULL
            ),
        ),
        await tenant.call("ListAuditEvents", job_service_pb2.ListAuditEventsRequest()),
        await tenant.call("ListSecrets", secret_pb2.ListSecretsRequest()),
    ]
    got = reads[0].job  # type: ignore[attr-defined]
    assert got.target.http.headers["Authorization"] == reference
    texts = [str(read) + read.SerializeToString().decode("latin-1") for read in reads]  # type: ignore[attr-defined]
    # ... and over HTTP/JSON (what the console reads).
    base = traced.services.processes["api"].http_url
    async with aiohttp.ClientSession() as session:
        for method, body in (("GetJob", {"jobId": job_id}), ("ListJobs", {}), ("ListSecrets", {})):
            async with session.post(
                f"{base}/sundial.v1.JobService/{method}",
                json=body,
                headers={"authorization": f"Bearer {tenant.token}"},
            ) as answer:
                assert answer.status == 200
                texts.append(await answer.text())
    # The CLI's export and a dry run of a changed file.
    env = {"SUNDIAL_API": traced.services.processes["api"].address, "SUNDIAL_TOKEN": tenant.token}
    runner = CliRunner()
    exported = await asyncio.to_thread(runner.invoke, app, ["export", job_id], env=env)
    assert exported.exit_code == 0, exported.output
    assert reference in exported.stdout
    path = tmp_path / "jobs.yaml"
    await asyncio.to_thread(path.write_text, exported.stdout.replace("crm sync", "crm sync 2"))
    dry = await asyncio.to_thread(
        runner.invoke, app, ["apply", "-f", str(path), "--dry-run"], env=env
    )
    assert dry.exit_code == 0, dry.output
    texts += [exported.output, dry.output]
    # The services' logs (DEBUG) and every span of the run's trace, and every span at all.
    logs = await asyncio.to_thread(
        lambda: {p.name: p.read_text(errors="replace") for p in tmp_path.glob("*.log")}
    )
    assert {name.split("-")[0] for name in logs} >= {"api", "scheduler", "executor"}
    texts += list(logs.values())
    texts += [json.dumps([repr(s) for s in receiver.spans])]
    for text in texts:
        assert value not in text
