"""End to end with TLS on: API, scheduler and executor as real processes, every gRPC server
serving mTLS with certificates the test makes, the executor dialling the ledger with its
own client certificate, a scheduled job's run succeeding through it, and the CLI reaching
the API over TLS."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sundial.cli.app import app
from sundial.core.tls import ClientTls
from sundial.devstack import Stack, health_status
from sundial.v1 import job_pb2, run_pb2
from tests.helpers.certs import Authority
from tests.helpers.cluster import running_cluster
from tests.helpers.eventually import assert_eventually
from tests.helpers.target_server import RecordingTarget

pytestmark = [pytest.mark.timeout(120)]


async def test_a_job_runs_with_mtls_on_every_grpc_server(
    stack: Stack, migrated_database_url: str, tmp_path: Path, target: RecordingTarget
) -> None:
    ca = Authority(tmp_path / "pki", "sundial-ca")
    services_cert = ca.issue("services", client=False)  # one certificate for 127.0.0.1
    executor = ca.issue("executor", server=False)
    operator = ca.issue("operator", server=False)  # the probe, the test's API channel, the CLI
    stranger = Authority(tmp_path / "other", "other-ca").issue("stranger", server=False)
    env = {
        "SUNDIAL_TLS_CERT_FILE": str(services_cert.cert_file),
        "SUNDIAL_TLS_KEY_FILE": str(services_cert.key_file),
        "SUNDIAL_TLS_CLIENT_CA_FILE": str(ca.cert_file),
        # The executor's own identity at the ledger, not the operator's.
        "SUNDIAL_LEDGER_TLS_CA_FILE": str(ca.cert_file),
        "SUNDIAL_LEDGER_TLS_CERT_FILE": str(executor.cert_file),
        "SUNDIAL_LEDGER_TLS_KEY_FILE": str(executor.key_file),
    }
    operator_tls = ca.client_tls(operator)
    async with running_cluster(
        stack, migrated_database_url, tmp_path / "logs", client_tls=operator_tls, **env
    ) as cluster:
        tenant = await cluster.tenant()
        job = job_pb2.Job(
            name="over-mtls",
            schedule=job_pb2.Schedule(interval=job_pb2.IntervalSchedule()),
            target=job_pb2.Target(http=job_pb2.HttpTarget(url=f"{target.url}/mtls")),
        )
        job.schedule.interval.every.FromSeconds(1)
        created = await tenant.create_job(job)

        async def succeeded() -> run_pb2.Run:
            runs = await tenant.runs(created.job_id)
            done = [r for r in runs if r.status == run_pb2.RUN_STATUS_SUCCEEDED]
            assert done, [run_pb2.RunStatus.Name(r.status) for r in runs]
            return done[0]

        run = await assert_eventually(succeeded, timeout_s=40, interval_s=0.5)
        assert run.run_key in {call.key for call in target.calls}

        # Every server admits only TLS clients holding a certificate from the CA.
        without_cert = ClientTls(ca_file=ca.cert_file)
        wrong_ca = ClientTls(
            ca_file=ca.cert_file, cert_file=stranger.cert_file, key_file=stranger.key_file
        )
        for name, process in cluster.services.processes.items():
            probes = {
                "plaintext": await asyncio.to_thread(health_status, process.address),
                "no cert": await asyncio.to_thread(
                    health_status, process.address, tls=without_cert
                ),
                "other CA": await asyncio.to_thread(health_status, process.address, tls=wrong_ca),
                "operator": await asyncio.to_thread(
                    health_status, process.address, tls=operator_tls
                ),
            }
            assert probes == {
                "plaintext": "UNREACHABLE",
                "no cert": "UNREACHABLE",
                "other CA": "UNREACHABLE",
                "operator": "SERVING",
            }, name

        api = cluster.services.processes["api"].address
        cli_env = {
            "SUNDIAL_API": api,
            "SUNDIAL_TOKEN": tenant.token,
            "SUNDIAL_API_CA_FILE": str(ca.cert_file),
            "SUNDIAL_API_CERT_FILE": str(operator.cert_file),
            "SUNDIAL_API_KEY_FILE": str(operator.key_file),
            "COLUMNS": "250",
        }

        def cli(*args: str, **env: str | None) -> tuple[int, str]:
            result = CliRunner().invoke(app, list(args), env={**cli_env, **env})
            return result.exit_code, result.output

        code, output = await asyncio.to_thread(cli, "jobs", "list")
        assert code == 0 and created.job_id in output, output
        code, output = await asyncio.to_thread(cli, "jobs", "get", created.job_id, "-o", "json")
        assert code == 0, output
        assert json.loads(output)["job"]["name"] == "over-mtls"
        code, output = await asyncio.to_thread(cli, "runs", "get", run.run_key)
        assert code == 0 and "succeeded" in output, output
        # The same call without a client certificate, or in plaintext, does not get through.
        code, output = await asyncio.to_thread(
            cli, "jobs", "list", SUNDIAL_API_CERT_FILE=None, SUNDIAL_API_KEY_FILE=None
        )
        assert code == 1 and "cannot reach the API" in output, output
        code, output = await asyncio.to_thread(cli, "jobs", "list", "--no-tls")
        assert code == 1 and "cannot reach the API" in output, output
