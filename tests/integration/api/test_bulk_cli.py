"""``sundial jobs pause|resume|delete|trigger -l``, ``sundial jobs count`` and
``sundial runs list`` without a job, against a real API server."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from typer.testing import CliRunner

from sundial.cli.app import app
from sundial.v1 import job_service_pb2 as pb
from tests.integration.api.support import TARGET_URL, Api, Tenant


async def run_cli(api: Api, tenant: Tenant, *args: str) -> Any:
    env = {"SUNDIAL_API": api.address, "SUNDIAL_TOKEN": tenant.token, "COLUMNS": "200"}
    return await asyncio.to_thread(CliRunner().invoke, app, list(args), env=env)


async def cli_json(api: Api, tenant: Tenant, *args: str) -> Any:
    result = await run_cli(api, tenant, *args, "-o", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


async def create(api: Api, tenant: Tenant, name: str, *labels: str) -> str:
    args = ["jobs", "create", name, "--cron", "0 3 * * *", "--url", TARGET_URL]
    for label in labels:
        args += ["--label", label]
    return (await cli_json(api, tenant, *args))["job"]["job_id"]


async def test_pause_by_selector_with_a_dry_run_then_resume(api: Api, tenant: Tenant) -> None:
    other = await api.tenant("other")
    ids = [
        await create(api, tenant, f"job-{i}", f"customer={42 if i < 3 else 7}") for i in range(5)
    ]
    await create(api, other, "job-0", "customer=42")

    dry = await run_cli(api, tenant, "jobs", "pause", "-l", "customer=42", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "would pause 3 of 3 matching jobs" in dry.output
    assert all(job_id in dry.output for job_id in ids[:3])
    assert (await cli_json(api, tenant, "jobs", "list", "--paused")).get("jobs", []) == []

    # --limit 2: the command calls again until every matched job is paused.
    paused = await cli_json(
        api, tenant, "jobs", "pause", "-l", "customer=42", "--limit", "2", "--note", "incident"
    )
    assert (int(paused["affected"]), int(paused.get("remaining", 0))) == (3, 0)
    assert sorted(paused["job_ids"]) == sorted(ids[:3])
    listed = await cli_json(api, tenant, "jobs", "list", "--paused")
    assert sorted(j["job_id"] for j in listed["jobs"]) == sorted(ids[:3])
    theirs = await api.jobs.ListJobs(pb.ListJobsRequest(paused=True), metadata=other.md)
    assert list(theirs.jobs) == []

    count = await run_cli(api, tenant, "jobs", "count", "-l", "customer in (42,7)")
    assert count.exit_code == 0 and count.stdout.strip() == "5"
    resumed = await run_cli(api, tenant, "jobs", "resume", "-l", "customer=42")
    assert resumed.exit_code == 0 and "resumed 3 of 3 matching jobs" in resumed.output
    assert (await cli_json(api, tenant, "jobs", "list", "--paused")).get("jobs", []) == []

    selected = await cli_json(api, tenant, "jobs", "list", "-l", "customer=7", "--search", "JOB")
    assert [j["name"] for j in selected["jobs"]] == ["job-3", "job-4"]


async def test_trigger_delete_and_every_jobs_runs(api: Api, tenant: Tenant) -> None:
    ids = [await create(api, tenant, f"job-{i}", "team=ops") for i in range(2)]
    triggered = await cli_json(api, tenant, "jobs", "trigger", "-l", "team=ops")
    assert int(triggered["affected"]) == 2 and len(triggered["run_keys"]) == 2
    runs = await cli_json(api, tenant, "runs", "list", "--status", "queued")
    assert sorted(r["run_key"] for r in runs["runs"]) == sorted(triggered["run_keys"])
    labelled = await cli_json(api, tenant, "runs", "list", "-l", "team=nobody")
    assert labelled.get("runs", []) == []
    deleted = await cli_json(api, tenant, "jobs", "delete", "-l", "team=ops")
    assert sorted(deleted["job_ids"]) == sorted(ids)
    assert (await cli_json(api, tenant, "jobs", "list")).get("jobs", []) == []


async def test_a_job_id_and_a_selector_are_refused_together(api: Api, tenant: Tenant) -> None:
    job_id = await create(api, tenant, "job", "team=ops")
    both = await run_cli(api, tenant, "jobs", "pause", job_id, "-l", "team=ops")
    assert both.exit_code != 0 and "not both" in both.output
    neither = await run_cli(api, tenant, "jobs", "delete")
    assert neither.exit_code != 0 and "-l SELECTOR" in neither.output
    bad = await run_cli(api, tenant, "jobs", "pause", "-l", "team in (ops")
    assert bad.exit_code != 0 and "selector" in bad.output
