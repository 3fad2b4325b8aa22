"""The API as a real process, driven by `sundial jobs ...`, `sundial preview` and the
`sundial dev` bootstrap (dev tenant, token, demo job)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from typer.testing import CliRunner

from sundial.cli.app import app
from sundial.cli.dev import DEMO_JOB, create_demo, create_dev_tenant
from sundial.devstack import ServiceProcess, Services, Stack

ADMIN_TOKEN = "e2e-admin-token-0123456789abcdef"


@pytest.fixture
async def api_process(
    stack: Stack, migrated_database_url: str, tmp_path: Path
) -> AsyncIterator[ServiceProcess]:
    services = Services(
        stack,
        log_dir=tmp_path,
        extra_env={
            "SUNDIAL_DATABASE_URL": migrated_database_url,
            "SUNDIAL_ADMIN_TOKEN": ADMIN_TOKEN,
            "SUNDIAL_ALLOW_LOOPBACK_TARGETS": "1",
            "SUNDIAL_GRACE_PERIOD_S": "2",
        },
    )
    process = await asyncio.to_thread(services.add, "api")
    yield process
    await asyncio.to_thread(services.stop)


def _run(env: dict[str, str], *args: str) -> str:
    result = CliRunner().invoke(app, list(args), env={**env, "COLUMNS": "250"})
    assert result.exit_code == 0, (args, result.output)
    return result.output


async def test_cli_against_a_real_api(api_process: ServiceProcess) -> None:
    def scenario() -> None:
        with grpc.insecure_channel(api_process.address) as channel:
            token = create_dev_tenant(channel, ADMIN_TOKEN)
            demo = create_demo(channel, token, "http://127.0.0.1:8085/demo")
            # Idempotent: a second bootstrap reuses the tenant and the demo job.
            again = create_demo(
                channel, create_dev_tenant(channel, ADMIN_TOKEN), "http://127.0.0.1:8085/demo"
            )
            assert again.uid == demo.uid and demo.name == DEMO_JOB
            # Applied under its own id: the demo job is named by it.
            assert demo.job_id == DEMO_JOB != demo.uid
        env = {"SUNDIAL_API": api_process.address, "SUNDIAL_TOKEN": token}
        assert demo.uid in _run(env, "jobs", "get", DEMO_JOB)

        created = json.loads(
            _run(
                env,
                "jobs",
                "create",
                "report",
                "--cron",
                "0 9 * * MON-FRI",
                "--tz",
                "Europe/Berlin",
                "--url",
                "http://127.0.0.1:8085/report",
                "--label",
                "team=billing",
                "--header",
                "X-Team=billing",
                "--payload",
                '{"kind": "usage"}',
                "--json",
            )
        )["job"]
        job_id = created["job_id"]
        assert created["schedule"]["time_zone"] == "Europe/Berlin"
        assert created["target"]["http"]["headers"] == {"X-Team": "billing"}

        listing = _run(env, "jobs", "list")
        assert "report" in listing and DEMO_JOB in listing and job_id in listing
        assert DEMO_JOB not in _run(env, "jobs", "list", "--label", "team=billing")
        assert "cron 0 9 * * MON-FRI (Europe/Berlin)" in _run(env, "jobs", "get", job_id)

        assert "triggered run" in _run(env, "jobs", "trigger", job_id)
        runs = _run(env, "runs", "list", job_id)
        assert "manual" in runs and "queued" in runs and "lateness" in runs
        [run_key] = [
            r["run_key"] for r in json.loads(_run(env, "runs", "list", job_id, "--json"))["runs"]
        ]
        assert run_key.startswith(f"{job_id}@")
        assert "cancelled" in _run(env, "runs", "cancel", run_key, "--reason", "test")
        assert "queued" in _run(env, "runs", "replay", run_key)
        unknown = CliRunner().invoke(app, ["runs", "list", job_id, "--status", "sleepy"], env=env)
        assert unknown.exit_code == 1 and "--status" in unknown.output
        described = _run(env, "jobs", "describe", job_id)
        assert "recent runs" in described and "next fire times" in described
        assert "manual" in described and "queued" in described

        assert "paused report" in _run(env, "jobs", "pause", job_id, "--note", "holiday")
        assert "yes (holiday)" in _run(env, "jobs", "get", job_id)
        assert "resumed report" in _run(env, "jobs", "resume", job_id)

        preview = _run(
            env,
            "preview",
            "30 2 * * *",
            "--tz",
            "America/New_York",
            "--after",
            "2026-03-07T00:00:00Z",
            "--count",
            "3",
        )
        assert "2026-03-08T03:00:00-04:00" in preview and "does not exist" in preview

        interval = json.loads(
            _run(
                env,
                "jobs",
                "create",
                "tick",
                "--every",
                "1m30s",
                "--url",
                "http://127.0.0.1:8085/t",
                "--json",
            )
        )["job"]
        assert interval["schedule"]["interval"]["every"] == "90s"

        assert "deleted" in _run(env, "jobs", "delete", job_id)
        # Errors: one line naming the code and the field, exit status 1.
        bad = CliRunner().invoke(
            app,
            ["jobs", "create", "bad", "--cron", "61 * * * *", "--url", "http://127.0.0.1:1/"],
            env=env,
        )
        assert bad.exit_code == 1
        assert "INVALID_ARGUMENT: schedule.cron:" in bad.output
        missing = CliRunner().invoke(app, ["jobs", "get", job_id], env=env)
        assert missing.exit_code == 1 and "NOT_FOUND" in missing.output
        no_token = CliRunner().invoke(
            app, ["jobs", "list"], env={"SUNDIAL_API": api_process.address, "SUNDIAL_TOKEN": ""}
        )
        assert no_token.exit_code == 1 and "SUNDIAL_TOKEN" in no_token.output

    await asyncio.to_thread(scenario)
