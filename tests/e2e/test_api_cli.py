"""The API as a real process, driven by `sundial jobs ...`, `sundial preview` and the
`sundial dev` bootstrap (dev tenant, token, demo job)."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
import yaml
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
                "--lateness-threshold",
                "2m",
                "-o",
                "json",
            )
        )["job"]
        job_id = created["job_id"]
        assert created["policies"]["lateness_threshold"] == "120s"
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
            r["run_key"]
            for r in json.loads(_run(env, "runs", "list", job_id, "-o", "json"))["runs"]
        ]
        assert run_key.startswith(f"{job_id}@")
        assert "cancelled" in _run(env, "runs", "cancel", run_key, "--reason", "test")
        assert "queued" in _run(env, "runs", "replay", run_key)
        unknown = CliRunner().invoke(app, ["runs", "list", job_id, "--status", "sleepy"], env=env)
        assert unknown.exit_code == 1 and "--status" in unknown.output
        described = _run(env, "jobs", "describe", job_id)
        assert "recent runs" in described and "next fire times" in described
        assert "manual" in described and "queued" in described
        assert "late after 2m" in described and "SLO (scheduled runs)" in described
        # The SLO counts scheduled occurrences only: the manual run is not one.
        slo = json.loads(
            _run(env, "jobs", "slo", job_id, "--window", "1h", "--window", "2d", "-o", "json")
        )["slo"]
        assert [(s["window"], s.get("due", "0"), s["lateness_threshold"]) for s in slo] == [
            ("3600s", "0", "120s"),
            ("172800s", "0", "120s"),
        ]
        assert "on time" in _run(env, "jobs", "slo", job_id)
        bad = CliRunner().invoke(app, ["jobs", "slo", job_id, "--window", "1s"], env=env)
        assert bad.exit_code != 0 and "slo_windows[0]" in bad.output

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
                "-o",
                "json",
            )
        )["job"]
        assert interval["schedule"]["interval"]["every"] == "90s"

        # update: only what the options name changes.
        updated = json.loads(
            _run(
                env,
                *("jobs", "update", job_id, "--cron", "30 8 * * *", "--label", "team=ops"),
                *("--max-attempts", "3", "--expected-version", str(int(created["version"]) + 2)),
                *("-o", "json"),
            )
        )["job"]
        assert updated["schedule"]["cron"] == "30 8 * * *"
        assert updated["schedule"]["time_zone"] == "Europe/Berlin"  # kept
        assert updated["labels"] == {"team": "ops"}
        assert updated["policies"]["retry"]["max_attempts"] == 3
        assert updated["target"]["http"]["headers"] == {"X-Team": "billing"}  # kept
        assert updated["policies"]["lateness_threshold"] == "120s"  # kept
        assert "late after 90s" in _run(
            env, "jobs", "update", job_id, "--lateness-threshold", "90s"
        )
        stale = CliRunner().invoke(
            app,
            ["jobs", "update", job_id, "--description", "x", "--expected-version", "1"],
            env=env,
        )
        assert stale.exit_code == 1 and "ABORTED" in stale.output
        # backfill: every occurrence of the range, then the kind and time filters.
        backfilled = _run(
            env,
            *("jobs", "backfill", job_id, "--start", "2026-01-05T00:00:00Z"),
            *("--end", "2026-01-08T00:00:00Z", "-o", "name"),
        ).split()
        assert len(backfilled) == 3 and all(k.startswith(f"{job_id}@2026-01-0") for k in backfilled)
        listed = _run(
            env,
            *("runs", "list", job_id, "--kind", "backfill", "--after", "2026-01-06T00:00:00Z"),
            *("-o", "name"),
        ).split()
        assert listed == sorted(backfilled, reverse=True)[:2]
        paged = _run(env, "runs", "list", job_id, "--kind", "backfill", "--limit", "2")
        assert "more runs: --page-token" in paged
        assert yaml.safe_load(_run(env, "jobs", "get", job_id, "-o", "yaml"))["job"]["job_id"] == (
            job_id
        )

        assert "deleted" in _run(env, "jobs", "delete", job_id)
        admin = {**env, "SUNDIAL_TOKEN": ADMIN_TOKEN}
        status = json.loads(_run(admin, "admin", "cluster", "status", "-o", "json"))
        assert status["partition_count"] == 256
        assert "dispatch lag" in _run(admin, "admin", "cluster", "status")
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


def _cli_process(env: dict[str, str], *args: str, columns: int, terminal: bool) -> str:
    """``sundial *args`` as a real process whose stdout is a terminal ``columns`` wide
    (a pseudo-terminal) or a pipe; its stdout."""
    full_env = {**os.environ, **env, "COLUMNS": str(columns), "TERM": "dumb"}
    command = [sys.executable, "-m", "sundial.cli", *args]
    if not terminal:
        done = subprocess.run(
            command, env=full_env, capture_output=True, text=True, timeout=60, check=True
        )
        return done.stdout
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    chunks = []
    try:
        with subprocess.Popen(
            command, env=full_env, stdout=follower, stderr=subprocess.PIPE, close_fds=True
        ) as process:
            os.close(follower)
            while True:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:  # EIO: the process closed the terminal
                    break
                if not chunk:
                    break
                chunks.append(chunk)
            _, errors = process.communicate(timeout=60)
            assert process.returncode == 0, errors
    finally:
        os.close(leader)
    text = b"".join(chunks).decode().replace("\r\n", "\n")
    return re.sub(r"\x1b\[[0-9;]*m", "", text)  # the bold header


async def test_tables_keep_whole_ids_and_times_at_80_columns_and_through_a_pipe(
    api_process: ServiceProcess,
) -> None:
    def scenario() -> None:
        with grpc.insecure_channel(api_process.address) as channel:
            token = create_dev_tenant(channel, ADMIN_TOKEN)
        env = {"SUNDIAL_API": api_process.address, "SUNDIAL_TOKEN": token}
        created = json.loads(
            _run(
                env,
                *("jobs", "create", "a-rather-long-job-name-for-a-narrow-terminal"),
                *("--cron", "0 9 * * MON-FRI", "--tz", "Europe/Berlin"),
                *("--url", "http://127.0.0.1:8085/report", "-o", "json"),
            )
        )["job"]
        job_id, next_run = created["job_id"], created["next_run_at"].replace(".000Z", "Z")
        _run(env, "jobs", "trigger", job_id)
        for terminal in (True, False):
            listing = _cli_process(env, "jobs", "list", columns=80, terminal=terminal)
            [row] = [line for line in listing.splitlines() if job_id in line]
            assert next_run in row, listing  # whole, never cut
            if terminal:
                assert max(len(line) for line in listing.splitlines()) <= 80, listing
                assert "version" not in listing  # a lower-priority column made room
            else:
                assert "version" in listing and "schedule" in listing  # a pipe gets all
            runs = _cli_process(env, "runs", "list", job_id, columns=80, terminal=terminal)
            [run_key] = [w for w in runs.split() if w.startswith(f"{job_id}@")]
            assert run_key.endswith("Z") and len(run_key) > len(job_id) + 20, runs

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
        policy = json.loads(_run(admin, "admin", "egress", "show", "dev", "-o", "json"))
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
