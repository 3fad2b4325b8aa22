"""``sundial calendars ...``, ``sundial jobs create --cron ... --calendar``, ``sundial jobs
preview`` and a jobs file with several specs and calendars, against the API's real graph
on loopback; and the local ``sundial preview`` with several specs and ad-hoc dates."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from typer.testing import CliRunner, Result

from sundial.cli.app import app
from sundial.v1 import job_service_pb2 as pb
from tests.integration.api.support import Api, Tenant

JOBS = """\
job_id: standup-reminder
name: standup reminder
schedule:
  specs:
  - cron: 0 9 * * 1-5
  - cron: 30 13 * * 1-5
  - interval: {every: 86400s, offset: 3600s}
  time_zone: Pacific/Auckland
  calendars: [holidays]
target:
  http: {url: "http://127.0.0.1:9/remind"}
"""


async def _cli(env: dict[str, str], *args: str, code: int = 0) -> Result:
    """Run ``sundial *args`` in a thread (the API serves on this test's loop)."""
    result = await asyncio.to_thread(
        CliRunner().invoke, app, list(args), env={**env, "COLUMNS": "250"}
    )
    assert result.exit_code == code, (args, result.output)
    return result


async def test_calendars_and_specs_through_the_cli(
    api: Api, tenant: Tenant, tmp_path: Path
) -> None:
    env = {"SUNDIAL_API": api.address, "SUNDIAL_TOKEN": tenant.token}
    made = await _cli(
        env, "calendars", "create", "holidays", "--exclude", "--date", "12-25", "--date",
        "2027-01-01", "-o", "json",
    )  # fmt: skip
    assert json.loads(made.stdout)["calendar"]["dates"] == ["2027-01-01", "12-25"]
    await _cli(env, "calendars", "create", "nope", code=1)  # no kind given
    listed = await _cli(env, "calendars", "list")
    assert "holidays" in listed.stdout and "exclude" in listed.stdout
    assert (await _cli(env, "calendars", "list", "-o", "name")).stdout == "holidays\n"
    # A job with two crons and the calendar, from flags.
    created = await _cli(
        env, "jobs", "create", "twice-daily", "--cron", "0 9 * * *", "--cron", "0 18 * * *",
        "--tz", "Europe/Berlin", "--calendar", "holidays", "--url", "http://127.0.0.1:9/x",
        "-o", "json",
    )  # fmt: skip
    job = json.loads(created.stdout)["job"]
    assert [s["cron"] for s in job["schedule"]["specs"]] == ["0 9 * * *", "0 18 * * *"]
    assert job["schedule"]["calendars"] == ["holidays"]
    shown = await _cli(env, "jobs", "get", job["job_id"])
    assert "cron 0 9 * * *; cron 0 18 * * * (Europe/Berlin) [calendars holidays]" in shown.stdout
    preview = await _cli(
        env, "jobs", "preview", job["job_id"], "--after", "2026-12-24T12:00:00Z", "--count", "3",
        "-o", "json",
    )  # fmt: skip
    entries = json.loads(preview.stdout)["fire_times"]
    assert [(e["at"], e.get("spec_index", 0), e.get("calendar", "")) for e in entries] == [
        ("2026-12-24T17:00:00Z", 1, ""),
        ("2026-12-25T08:00:00Z", 0, "holidays"),
        ("2026-12-25T17:00:00Z", 1, "holidays"),
        ("2026-12-26T08:00:00Z", 0, ""),
        ("2026-12-26T17:00:00Z", 1, ""),
    ]
    table = await _cli(env, "jobs", "preview", job["job_id"], "--after", "2026-12-24T12:00:00Z")
    assert "(no run) 2026-12-25 is excluded by calendar holidays" in table.stdout
    # A jobs file with a list of specs and a calendar applies, then is UNCHANGED, and
    # exports as written.
    path = tmp_path / "jobs.yaml"
    path.write_text(JOBS)
    await _cli(env, "apply", "-f", str(path))
    again = await _cli(env, "apply", "-f", str(path))
    assert "unchanged" in again.output.lower()
    exported = await _cli(env, "export", "standup-reminder")
    assert "calendars:\n  - holidays" in exported.stdout and "specs:" in exported.stdout
    # Updating the calendar reschedules both jobs; deleting it is refused while named.
    updated = await _cli(env, "calendars", "update", "holidays", "--date", "12-24")
    assert "jobs rescheduled: 2" in updated.stdout
    refused = await _cli(env, "calendars", "delete", "holidays", code=1)
    assert "is named by the schedules of jobs" in refused.output
    await _cli(env, "jobs", "update", job["job_id"], "--no-calendars")
    await _cli(env, "jobs", "delete", "standup-reminder")
    await _cli(env, "calendars", "delete", "holidays")
    assert (
        await api.jobs.ListCalendars(pb.ListCalendarsRequest(), metadata=tenant.md)
    ).calendars == []


async def test_local_preview_unions_specs_and_removes_dates() -> None:
    result = await _cli(
        {}, "preview", "0 9 * * *", "0 18 * * *", "--every", "12h", "--tz", "Australia/Sydney",
        "--exclude", "12-25", "--after", "2026-12-24T12:00:00Z", "--count", "3", "-o", "json",
    )  # fmt: skip
    entries = json.loads(result.stdout)["fire_times"]
    kept = [(e["local_time"], e.get("spec_index", 0)) for e in entries if not e.get("dropped")]
    assert kept == [
        ("2026-12-26T09:00:00+11:00", 0),
        ("2026-12-26T11:00:00+11:00", 2),
        ("2026-12-26T18:00:00+11:00", 1),
    ]
    removed = {e["local_time"][:10] for e in entries if e.get("dropped")}
    assert removed == {"2026-12-25"}
    bad = await _cli({}, "preview", "0 9 * * *", "--exclude", "12-32", code=1)
    assert "--exclude[0]" in bad.output
