"""``sundial apply -f`` and ``sundial export`` against the API's real graph on loopback:
a jobs file round-trips exactly, a dry run shows diffs and changes nothing, prune deletes
only the labelled jobs the file does not name."""

from __future__ import annotations

import asyncio
from pathlib import Path

import yaml
from typer.testing import CliRunner, Result

from sundial.cli.app import app
from sundial.v1 import job_pb2
from sundial.v1 import job_service_pb2 as pb
from tests.integration.api.support import Api, Tenant, make_job

JOBS = """\
# Several documents; one holds a list.
job_id: usage-report
name: usage report
description: Monthly usage, per customer.
schedule:
  cron: 0 9 1 * *
  time_zone: Europe/Berlin
target:
  http:
    url: http://127.0.0.1:9/report
    headers: {X-Team: billing}
payload: eyJraW5kIjogInVzYWdlIn0=
labels: {app: demo, team: billing}
---
- job_id: crm-sync
  name: crm sync
  schedule:
    interval: {every: 900s, offset: 60s}
    jitter: 30s
  target:
    grpc: {address: "127.0.0.1:50051", plaintext: true, metadata: {x-region: eu}}
  policies:
    overlap: OVERLAP_POLICY_BUFFER_ONE
    retry: {max_attempts: 3, base_delay: 5s}
    run_timeout: 120s
  labels: {app: demo}
- job_id: trial-expiry
  name: trial expiry
  schedule: {once: 2099-01-01T00:00:00Z}
  target: {http: {url: "http://127.0.0.1:9/expire", method: DELETE}}
  paused: true
  pause_note: waiting for launch
  labels: {app: demo}
"""


async def _cli(env: dict[str, str], *args: str, code: int = 0, stdin: str = "") -> Result:
    """Run ``sundial *args`` in a thread (the API serves on this test's loop)."""
    result = await asyncio.to_thread(
        CliRunner().invoke, app, list(args), env={**env, "COLUMNS": "250"}, input=stdin
    )
    assert result.exit_code == code, (args, result.output)
    return result


def _env(api: Api, tenant: Tenant) -> dict[str, str]:
    return {"SUNDIAL_API": api.address, "SUNDIAL_TOKEN": tenant.token}


async def _applied(api: Api, tenant: Tenant, tmp_path: Path) -> tuple[dict[str, str], Path]:
    """The CLI's environment and a jobs file holding JOBS, applied."""
    env = _env(api, tenant)
    path = tmp_path / "jobs.yaml"
    path.write_text(JOBS)
    await _cli(env, "apply", "-f", str(path))
    return env, path


async def _get(api: Api, tenant: Tenant, job_id: str) -> job_pb2.Job:
    return (await api.jobs.GetJob(pb.GetJobRequest(job_id=job_id), metadata=tenant.md)).job


async def test_apply_then_export_round_trips_exactly(
    api: Api, tenant: Tenant, tmp_path: Path
) -> None:
    env = _env(api, tenant)
    path = tmp_path / "jobs.yaml"
    path.write_text(JOBS)
    applied = await _cli(env, "apply", "-f", str(path))
    assert applied.stdout.splitlines() == [
        "usage-report: created (version 1)",
        "crm-sync: created (version 1)",
        "trial-expiry: created (version 1)",
    ]
    report = await _get(api, tenant, "usage-report")
    assert report.payload == b'{"kind": "usage"}' and report.schedule.time_zone == "Europe/Berlin"
    assert report.target.http.headers == {"X-Team": "billing"}
    sync = await _get(api, tenant, "crm-sync")
    assert sync.policies.retry.max_attempts == 3 and sync.target.grpc.metadata == {"x-region": "eu"}
    trial = await _get(api, tenant, "trial-expiry")
    assert trial.paused and trial.pause_note == "waiting for launch"  # honoured on create
    assert "usage report" in (await _cli(env, "jobs", "get", "usage-report")).stdout

    exported = (await _cli(env, "export", "-l", "app=demo")).stdout
    entries = list(yaml.safe_load_all(exported))
    assert [e["job_id"] for e in entries] == ["crm-sync", "trial-expiry", "usage-report"]  # by name
    for entry in entries:
        assert not {"uid", "version", "stats", "next_run_at", "paused", "tenant_id"} & set(entry)
    # Export, apply: nothing changes; export again: the same text.
    again = await _cli(env, "apply", "-f", "-", stdin=exported)
    assert sorted(again.stdout.splitlines()) == [
        "crm-sync: unchanged (version 1)",
        "trial-expiry: unchanged (version 1)",
        "usage-report: unchanged (version 1)",
    ]
    assert (await _cli(env, "export", "-l", "app=demo")).stdout == exported
    assert (await _get(api, tenant, "usage-report")) == report
    # Named jobs, and the original file again: unchanged as well.
    one = (await _cli(env, "export", "crm-sync", sync.uid)).stdout
    assert [e["job_id"] for e in yaml.safe_load_all(one)] == ["crm-sync", "crm-sync"]
    third = await _cli(env, "apply", "-f", str(path))
    assert all(line.endswith("unchanged (version 1)") for line in third.stdout.splitlines())


async def test_dry_run_shows_diffs_and_changes_nothing(
    api: Api, tenant: Tenant, tmp_path: Path
) -> None:
    env, path = await _applied(api, tenant, tmp_path)
    changed = JOBS.replace("cron: 0 9 1 * *", "cron: 0 10 1 * *") + (
        "---\njob_id: newcomer\nname: newcomer\nschedule: {cron: '*/5 * * * *'}\n"
        "target: {http: {url: 'http://127.0.0.1:9/new'}}\n"
    )
    path.write_text(changed)
    before = await api.counts()
    versions = {j: (await _get(api, tenant, j)).version for j in ("usage-report", "crm-sync")}
    dry = (await _cli(env, "apply", "-f", str(path), "--dry-run")).stdout
    lines = dry.splitlines()
    assert "usage-report: update" in lines
    assert "--- usage-report (current)" in lines and "+++ usage-report (wanted)" in lines
    assert "-  cron: 0 9 1 * *" in lines and "+  cron: 0 10 1 * *" in lines
    assert "crm-sync: unchanged" in lines and "trial-expiry: unchanged" in lines
    assert "newcomer: create" in lines and "+job_id: newcomer" in lines
    # Only the changed line differs in the update's diff, since both sides are the
    # server's normalised form.
    report_diff = dry.split("usage-report: update\n")[1].split("crm-sync:")[0]
    assert [
        line
        for line in report_diff.splitlines()
        if line[:1] in "+-" and line[:3] not in ("---", "+++")
    ] == [
        "-  cron: 0 9 1 * *",
        "+  cron: 0 10 1 * *",
    ]
    assert await api.counts() == before
    assert {j: (await _get(api, tenant, j)).version for j in versions} == versions
    # Then for real.
    done = (await _cli(env, "apply", "-f", str(path))).stdout.splitlines()
    assert "usage-report: updated (version 2)" in done and "newcomer: created (version 1)" in done


async def test_prune_deletes_only_labelled_jobs_the_file_does_not_name(
    api: Api, tenant: Tenant, tmp_path: Path
) -> None:
    env, path = await _applied(api, tenant, tmp_path)
    for name, job_id, labels in (
        ("stray", "stray", {"app": "demo"}),
        ("unlabelled", "unlabelled", {}),
        ("elsewhere", "elsewhere", {"app": "other"}),
    ):
        await api.jobs.CreateJob(
            pb.CreateJobRequest(job=make_job(name, labels=labels), job_id=job_id),
            metadata=tenant.md,
        )
    server_named = (
        await api.jobs.CreateJob(
            pb.CreateJobRequest(job=make_job("no-alias", labels={"app": "demo"})),
            metadata=tenant.md,
        )
    ).job
    # The file now names two of its three jobs.
    kept = JOBS.split("- job_id: trial-expiry", maxsplit=1)[0]
    path.write_text(kept)
    before = await api.counts()
    dry = (
        await _cli(env, "apply", "-f", str(path), "--prune", "-l", "app=demo", "--dry-run")
    ).stdout
    pruned = sorted(line for line in dry.splitlines() if line.endswith("prune (would delete)"))
    assert pruned == [
        f"{server_named.job_id}: prune (would delete)",
        "stray: prune (would delete)",
        "trial-expiry: prune (would delete)",
    ]
    assert "-job_id: stray" in dry.splitlines()
    assert await api.counts() == before
    done = (await _cli(env, "apply", "-f", str(path), "--prune", "-l", "app=demo")).stdout
    assert sorted(line for line in done.splitlines() if line.endswith("pruned")) == [
        f"{server_named.job_id}: pruned",
        "stray: pruned",
        "trial-expiry: pruned",
    ]
    listed = await api.jobs.ListJobs(pb.ListJobsRequest(), metadata=tenant.md)
    assert sorted(job.job_id for job in listed.jobs) == [
        "crm-sync",
        "elsewhere",
        "unlabelled",
        "usage-report",
    ]


async def test_a_bad_file_changes_nothing(api: Api, tenant: Tenant, tmp_path: Path) -> None:
    env = _env(api, tenant)
    path = tmp_path / "jobs.yaml"
    before = await api.counts()
    bad_cron = JOBS.replace("interval: {every: 900s, offset: 60s}", "cron: 61 * * * *")
    path.write_text(bad_cron)
    failed = await _cli(env, "apply", "-f", str(path), code=1)
    # The first job is valid, but the server validated all of them before writing any.
    assert "crm-sync: INVALID_ARGUMENT: schedule.cron:" in failed.output
    assert await api.counts() == before
    for text, message in (
        ("name: x\n", "job_id is required"),
        ("job_id: a\nbogus: 1\n", "bogus"),
        ("- job_id: a\n- job_id: a\n", "already used by"),
        ("[unclosed\n", "not YAML"),
        ("just text\n", "expected a job"),
    ):
        path.write_text(text)
        refused = await _cli(env, "apply", "-f", str(path), code=1)
        assert message in refused.output, (text, refused.output)
    refused = await _cli(env, "apply", "-f", str(path), "--prune", code=1)
    assert "--prune needs --label" in refused.output
    missing = await _cli(env, "export", "no-such-job", code=1)
    assert "no-such-job: NOT_FOUND" in missing.output
    assert await api.counts() == before
