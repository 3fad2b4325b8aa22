"""``sundial jobs`` on ``sundial.client`` (issue 24 item 4): create and trigger send a
request id on every call (so the channel's retry of UNAVAILABLE cannot act twice), a
given ``--request-id`` answers the first call again, and lists read their pages through
``sundial.client.Pages``."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from typer.testing import CliRunner

from sundial.cli.app import app
from tests.integration.api.support import TARGET_URL, Api, Tenant


async def cli(api: Api, tenant: Tenant, *args: str) -> Any:
    env = {"SUNDIAL_API": api.address, "SUNDIAL_TOKEN": tenant.token, "COLUMNS": "200"}
    result = await asyncio.to_thread(CliRunner().invoke, app, [*args, "-o", "json"], env=env)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def create_args(name: str, *extra: str) -> list[str]:
    return ["jobs", "create", name, "--cron", "0 3 * * *", "--url", TARGET_URL, *extra]


async def test_create_and_trigger_send_request_ids(api: Api, tenant: Tenant) -> None:
    plain = await cli(api, tenant, *create_args("plain"))
    requests = await api.sql("SELECT method, request_id FROM job_requests ORDER BY method")
    assert [r["method"] for r in requests] == ["CreateJob"]  # one, though none was given
    assert requests[0]["request_id"]

    first = await cli(api, tenant, *create_args("keyed", "--request-id", "create-keyed"))
    again = await cli(api, tenant, *create_args("keyed", "--request-id", "create-keyed"))
    assert first["job"]["uid"] == again["job"]["uid"]  # the first answer, not ALREADY_EXISTS

    job_id = plain["job"]["job_id"]
    run = await cli(api, tenant, "jobs", "trigger", job_id, "--request-id", "now-1")
    same = await cli(api, tenant, "jobs", "trigger", job_id, "--request-id", "now-1")
    assert run["run"]["run_key"] == same["run"]["run_key"]
    await cli(api, tenant, "jobs", "trigger", job_id)
    methods = [r["method"] for r in await api.sql("SELECT method FROM job_requests")]
    assert methods.count("TriggerJob") == 2 and methods.count("CreateJob") == 2


async def test_lists_page_through_the_library(api: Api, tenant: Tenant) -> None:
    for i in range(3):
        await cli(api, tenant, *create_args(f"job-{i}"))
    some = await cli(api, tenant, "jobs", "list", "--limit", "2")
    assert [j["name"] for j in some["jobs"]] == ["job-0", "job-1"]
    assert some["next_page_token"]  # where a longer listing would go on
    every = await cli(api, tenant, "jobs", "list", "--limit", "0")
    assert [j["name"] for j in every["jobs"]] == ["job-0", "job-1", "job-2"]
    assert "next_page_token" not in every


async def test_backfill_goes_through_the_library(api: Api, tenant: Tenant) -> None:
    job = await cli(api, tenant, *create_args("daily"))
    window = ["--start", "2026-01-01T00:00:00Z", "--end", "2026-01-04T00:00:00+00:00"]
    created = await cli(api, tenant, "jobs", "backfill", job["job"]["job_id"], *window)
    assert [r["scheduled_at"] for r in created["runs"]] == [
        f"2026-01-0{d}T03:00:00Z" for d in (1, 2, 3)
    ]
    again = await cli(api, tenant, "jobs", "backfill", job["job"]["job_id"], *window)
    assert (again.get("runs", []), again["existing_count"]) == ([], 3)


async def test_create_and_update_a_fixed_delay(api: Api, tenant: Tenant) -> None:
    """``--every 15m --from-end``: the delay counts from the end of the previous run
    (docs/design.md section 4); the first one from the creation."""
    before = datetime.now(UTC)
    made = await cli(
        api, tenant, "jobs", "create", "fixed", "--every", "15m", "--from-end", "--url", TARGET_URL
    )
    interval = made["job"]["schedule"]["interval"]
    assert (interval["every"], interval["from_end"]) == ("900s", True)
    first = datetime.fromisoformat(made["job"]["next_run_at"])
    assert before + timedelta(minutes=15) <= first <= datetime.now(UTC) + timedelta(minutes=15)
    env = {"SUNDIAL_API": api.address, "SUNDIAL_TOKEN": tenant.token, "COLUMNS": "200"}
    shown = await asyncio.to_thread(
        CliRunner().invoke, app, ["jobs", "get", made["job"]["job_id"]], env=env
    )
    assert "every 15m after each run ends" in shown.stdout, shown.output
    changed = await cli(
        api, tenant, "jobs", "update", made["job"]["job_id"], "--every", "1m", "--from-end"
    )
    assert changed["job"]["schedule"]["interval"]["every"] == "60s"
    assert changed["job"]["schedule"]["interval"]["from_end"] is True
    for wrong in (
        ["--cron", "0 3 * * *", "--from-end"],
        ["--every", "1m", "--every", "2m", "--from-end"],
    ):
        result = await asyncio.to_thread(
            CliRunner().invoke, app, ["jobs", "create", "bad", *wrong, "--url", TARGET_URL], env=env
        )
        assert result.exit_code != 0 and "--from-end goes with exactly one --every" in result.output
