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
            assert again.job_id == demo.job_id and demo.name == DEMO_JOB
        env = {"SUNDIAL_API": api_process.address, "SUNDIAL_TOKEN": token}

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


async def test_readme_tour_and_egress_commands(api_process: ServiceProcess) -> None:
    def scenario() -> None:
        with grpc.insecure_channel(api_process.address) as channel:
            token = create_dev_tenant(channel, ADMIN_TOKEN)
        env = {"SUNDIAL_API": api_process.address, "SUNDIAL_TOKEN": token}
        admin = {"SUNDIAL_API": api_process.address, "SUNDIAL_TOKEN": ADMIN_TOKEN}
        # README's quick tour, as written (example.com need not resolve: a name that
        # does not resolve now is checked when it is called).
        created = _run(
            env,
            "jobs",
            "create",
            "report",
            "--cron",
            "0 9 * * MON-FRI",
            "--tz",
            "Europe/Berlin",
            "--url",
            "https://example.com/hooks/report",
            "--payload",
            '{"kind": "usage"}',
        )
        assert "report" in created
        _run(
            env,
            "preview",
            "30 2 * * *",
            "--tz",
            "America/New_York",
            "--after",
            "2026-03-07T00:00:00Z",
        )

        # The operator's default for the dev tenant (loopback allowed), then its own.
        shown = _run(env, "egress")
        assert "the operator's default" in shown and "loopback: allowed" in shown
        _run(admin, "admin", "egress", "set", "dev", "--allow", "10.0.0.0/8")
        _run(env, "jobs", "create", "lan", "--cron", "0 * * * *", "--url", "http://10.1.2.3/x")
        assert "lan" not in _run(env, "jobs", "list", "--forbidden")
        set_out = _run(
            admin,
            "admin",
            "egress",
            "set",
            "dev",
            "--allow",
            "*.svc.cluster.local",
            "--allow",
            "10.96.0.0/12=grpc",
        )
        assert "the tenant's own" in set_out and "*.svc.cluster.local" in set_out
        assert "10.96.0.0/12" in set_out and "grpc" in set_out
        policy = json.loads(_run(admin, "admin", "egress", "show", "dev", "--json"))
        assert policy["egress"]["tenant_specific"] is True
        assert [r.get("host") or r.get("cidr") for r in policy["egress"]["policy"]["rules"]] == [
            "*.svc.cluster.local",
            "10.96.0.0/12",
        ]
        assert "*.svc.cluster.local" in _run(env, "egress")
        # Tightened: the job written under the wider policy is now forbidden.
        forbidden = _run(env, "jobs", "list", "--forbidden")
        assert "lan" in forbidden and "report" not in forbidden
        bad = CliRunner().invoke(
            app, ["admin", "egress", "set", "dev", "--allow", "10.1.2.3/8"], env=admin
        )
        assert bad.exit_code == 1 and "not a CIDR network" in bad.output
        # The deploy package's mesh example, as deploy/k8s/README.md applies it.
        mesh = Path(__file__).parents[2] / "deploy/k8s/components/mesh-egress/egress-policy.json"
        applied = _run(admin, "admin", "egress", "set", "dev", "--file", str(mesh))
        assert "*.svc.cluster.local" in applied and "10.0.0.0/8" in applied
        assert "lan" not in _run(env, "jobs", "list", "--forbidden")
        cleared = _run(admin, "admin", "egress", "clear", "dev")
        assert "the operator's default" in cleared
        denied = CliRunner().invoke(app, ["admin", "egress", "show", "dev"], env=env)
        assert denied.exit_code == 1 and "PERMISSION_DENIED" in denied.output

    await asyncio.to_thread(scenario)
