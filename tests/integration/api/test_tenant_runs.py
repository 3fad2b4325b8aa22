"""Tenant-wide ListRuns (no job_id): filters, keyset pages, the scan budget, the plan,
beside a second tenant with runs of the same shape."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import pytest
from google.protobuf import timestamp_pb2

from sundial.api import runs as runs_module
from sundial.api.store import queries
from sundial.run import RunStatus
from sundial.v1 import job_service_pb2 as pb
from sundial.v1 import run_pb2
from tests.integration.api.support import Api, Tenant, expect_error, make_job

NOW = datetime.now(UTC).replace(microsecond=0)
STATUSES = ["succeeded", "dead", "running", "queued", "cancelled", "retrying"]


def ts(value: datetime) -> timestamp_pb2.Timestamp:
    message = timestamp_pb2.Timestamp()
    message.FromDatetime(value)
    return message


async def history(api: Api, tenant: Tenant, labels: list[dict[str, str]]) -> list[str]:
    """One job per entry of ``labels`` (a threshold of 60 s), each with 12 runs, one a
    minute back from an hour ago, statuses cycling through :data:`STATUSES`; every
    third is a backfill; a run started 10 minutes after its time is late. Of the two
    queued runs the older is published (in flight, as the running ones: ListRuns reads
    them from the in-flight index), the newer waits for admission."""
    created = await api.jobs.BatchCreateJobs(
        pb.BatchCreateJobsRequest(
            jobs=[make_job(f"job-{i}", labels=job_labels) for i, job_labels in enumerate(labels)]
        ),
        metadata=tenant.md,
    )
    uids = [job.uid for job in created.jobs]
    for uid in uids:
        for k in range(12):
            at = NOW - timedelta(hours=1, minutes=k)
            status = STATUSES[k % len(STATUSES)]
            started = at + timedelta(minutes=10 if k % 4 == 0 else 0, seconds=1)
            await api.sql(
                "INSERT INTO job_runs (job_id, scheduled_at, tenant_id, partition_id, kind,"
                " status, started_at, dispatch_seq) VALUES ($1::uuid, $2, $3, 0, $4, $5, $6, $7)",
                uid,
                at,
                tenant.tenant_id,
                "backfill" if k % 3 == 2 else "scheduled",
                status,
                None if status == "queued" else started,
                7 if status == "queued" and k > 6 else 0,
            )
    return uids


async def all_pages(api: Api, tenant: Tenant, **fields: Any) -> list[run_pb2.Run]:
    runs: list[run_pb2.Run] = []
    token = ""
    for _ in range(100):
        page = await api.jobs.ListRuns(
            pb.ListRunsRequest(page_token=token, **fields), metadata=tenant.md
        )
        runs.extend(page.runs)
        token = page.next_page_token
        if not token:
            return runs
    raise AssertionError("paging did not end")


def order_key(run: run_pb2.Run) -> tuple[datetime, str]:
    return run.scheduled_at.ToDatetime(UTC), run.job_id


async def test_every_run_of_the_tenant_newest_first_in_pages(api: Api, tenant: Tenant) -> None:
    other = await api.tenant("other")
    uids = await history(api, tenant, [{"customer": "42"}, {"customer": "7"}, {}])
    await history(api, other, [{"customer": "42"}])
    runs = await all_pages(api, tenant, page_size=5)
    assert len(runs) == 36
    assert {run.job_id for run in runs} == set(uids)
    keys = [order_key(run) for run in runs]
    assert keys == sorted(keys, reverse=True)
    assert len(set(keys)) == 36
    # Every run carries its due time (no jitter: the nominal time).
    assert all(run.due_at == run.scheduled_at for run in runs)


async def test_filters_combine(api: Api, tenant: Tenant) -> None:
    other = await api.tenant("other")
    uids = await history(api, tenant, [{"customer": "42"}, {"customer": "7"}])
    await history(api, other, [{"customer": "42"}, {"customer": "7"}])

    dead = await all_pages(api, tenant, statuses=[run_pb2.RUN_STATUS_DEAD], page_size=3)
    assert len(dead) == 4 and {r.status for r in dead} == {run_pb2.RUN_STATUS_DEAD}
    several = await all_pages(
        api, tenant, statuses=[run_pb2.RUN_STATUS_DEAD, run_pb2.RUN_STATUS_RUNNING], page_size=3
    )
    assert len(several) == 8
    assert [order_key(r) for r in several] == sorted(map(order_key, several), reverse=True)

    recent = await all_pages(
        api, tenant, scheduled_after=ts(NOW - timedelta(hours=1, minutes=3)), page_size=4
    )
    assert len(recent) == 8  # minutes 0-3 of both jobs

    backfills = await all_pages(api, tenant, kinds=[run_pb2.RUN_KIND_BACKFILL])
    assert len(backfills) == 8 and {r.kind for r in backfills} == {run_pb2.RUN_KIND_BACKFILL}

    labelled = await all_pages(api, tenant, selector="customer=42", page_size=5)
    assert {r.job_id for r in labelled} == {uids[0]} and len(labelled) == 12
    assert await all_pages(api, tenant, selector="customer notin (42, 7)") == []

    started = await all_pages(
        api,
        tenant,
        started_after=ts(NOW - timedelta(minutes=55)),
        statuses=[run_pb2.RUN_STATUS_SUCCEEDED, run_pb2.RUN_STATUS_DEAD],
    )
    # Runs 0 and 4 of each job started ten minutes late (at -50 and -54 minutes): 0 is
    # succeeded, 4 cancelled, so one per job.
    assert len(started) == 2

    # Late: scheduled runs that started 10 minutes after their time (k = 0, 4, 8; 8 is
    # a backfill), and queued runs waiting past the threshold (k = 3, 9): per job 0, 4, 3,
    # 9 -- 4 runs each.
    late = await all_pages(api, tenant, late_only=True, page_size=3)
    assert len(late) == 8
    assert {r.kind for r in late} == {run_pb2.RUN_KIND_SCHEDULED}


async def test_a_rare_filter_pages_within_the_scan_budget(
    api: Api, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each status's range reads at most its share of the budget per page: a page may
    hold fewer runs than asked, but walking the pages finds every match exactly once, in
    order."""
    monkeypatch.setattr(runs_module, "SCAN_BUDGET", 16)  # 2 runs per status and page
    uids = await history(api, tenant, [{"customer": "42"}, {"customer": "7"}])
    seen: list[run_pb2.Run] = []
    pages = 0
    token = ""
    while True:
        page = await api.jobs.ListRuns(
            pb.ListRunsRequest(selector="customer=7", page_token=token, page_size=3),
            metadata=tenant.md,
        )
        pages += 1
        assert len(page.runs) <= 3
        seen.extend(page.runs)
        token = page.next_page_token
        if not token:
            break
    assert {run.job_id for run in seen} == {uids[1]}
    keys = [order_key(run) for run in seen]
    assert len(keys) == len(set(keys)) == 12
    assert keys == sorted(keys, reverse=True)
    everything = await all_pages(api, tenant, selector="customer=7", page_size=100)
    assert [order_key(run) for run in everything] == keys


async def test_bad_requests_name_the_field(api: Api, tenant: Tenant) -> None:
    uids = await history(api, tenant, [{}])
    await expect_error(
        api.jobs.ListRuns(pb.ListRunsRequest(job_id=uids[0], selector="a=1"), metadata=tenant.md),
        grpc.StatusCode.INVALID_ARGUMENT,
        field="selector",
    )
    page = await api.jobs.ListRuns(pb.ListRunsRequest(page_size=2), metadata=tenant.md)
    await expect_error(
        api.jobs.ListRuns(
            pb.ListRunsRequest(page_size=2, page_token=page.next_page_token, late_only=True),
            metadata=tenant.md,
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        field="page_token",
    )
    forged = "eyJ2IjoxLCJjIjpbIjIwMjYtMDEtMDFUMDA6MDA6MDArMDA6MDAiLCJ4Il0sImYiOiIifQ"
    await expect_error(
        api.jobs.ListRuns(pb.ListRunsRequest(page_token=forged), metadata=tenant.md),
        grpc.StatusCode.INVALID_ARGUMENT,
        field="page_token",
    )


def _nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    found = [plan]
    for child in plan.get("Plans", []):
        found.extend(_nodes(child))
    return found


async def test_a_page_reads_each_status_range_in_index_order(api: Api, tenant: Tenant) -> None:
    """The plan docs/design.md section 13 states, on a history of 40,000 runs of two
    tenants over two days, the newest of them in flight: per status asked, one range of
    job_runs_tenant_status_idx read in order, reading the page and no more (no sort of
    its matches, no other tenant's or status's rows read), merged with that status's
    runs in flight from job_runs_tenant_inflight_idx (sorted: at most the tenant's
    window and cap)."""
    other = await api.tenant("other")
    uids = await history(api, tenant, [{"customer": "42"}] * 2)
    others = await history(api, other, [{"customer": "42"}] * 2)
    # The 400 newest runs are running or queued (four in five of them published, so in
    # flight), the rest finished.
    await api.sql(
        "INSERT INTO job_runs (job_id, scheduled_at, tenant_id, partition_id, kind, status,"
        "                      dispatch_seq)"
        " SELECT (ARRAY[$1, $2, $3, $4]::uuid[])[1 + i % 4],"
        "        $5::timestamptz - make_interval(secs => i * 4.3),"
        "        (ARRAY[$6, $6, $7, $7])[1 + i % 4], 0, 'scheduled',"
        "        CASE WHEN i <= 400 THEN (ARRAY['running', 'queued', 'queued'])[1 + i % 3]"
        "             ELSE (ARRAY['succeeded', 'succeeded', 'dead', 'succeeded', 'cancelled'])"
        "                  [1 + i % 5] END,"
        "        CASE WHEN i <= 400 THEN i % 5 ELSE 0 END"
        "   FROM generate_series(1, 40000) AS i",
        *uids,
        *others,
        NOW,
        tenant.tenant_id,
        other.tenant_id,
    )
    await api.sql("ANALYZE job_runs")
    in_flight = await api.sql(
        "SELECT count(*) FROM job_runs WHERE tenant_id = $1"
        " AND (status = 'running' OR (status = 'queued' AND dispatch_seq > 0))",
        tenant.tenant_id,
    )
    for statuses in (["dead"], ["dead", "running"], [s.value for s in RunStatus]):
        args = [tenant.tenant_id, statuses, None, None, NOW - timedelta(hours=30)]
        args += [None] * 6 + [False, NOW, 50, 51]
        explained = await api.sql(
            f"EXPLAIN (ANALYZE, FORMAT JSON) {queries.list_tenant_runs}", *args
        )
        nodes = _nodes(json.loads(explained[0][0])[0]["Plan"])
        scans = [n for n in nodes if n.get("Relation Name", "").startswith("job_runs")]
        assert scans and all(n["Node Type"] == "Index Scan" for n in scans), nodes
        ordered = [n for n in scans if "tenant_id_status_scheduled_at" in n["Index Name"]]
        flying = [n for n in scans if n["Index Name"].endswith("tenant_id_status_idx")]
        assert ordered and len(ordered) + len(flying) == len(scans), scans
        # Only runs in flight are sorted as they are read: each status's other runs come
        # in index order (the sorts above the scan sort the page's budget at most).
        for sort in (n for n in nodes if n["Node Type"] == "Sort"):
            if any(re.match(r"r(_\d+)?\.scheduled_at", key) for key in sort["Sort Key"]):
                assert all(n in flying for n in _nodes(sort) if "Index Name" in n), sort
        # Each status's range reads at most its share (a page, 51) and only this
        # tenant's runs of that status; its runs in flight at most all of them.
        for scan in ordered:
            assert scan["Actual Rows"] <= 51, scan
            assert scan.get("Rows Removed by Filter", 0) == 0, scan
        for scan in flying:
            assert scan["Actual Rows"] <= in_flight[0][0], scan
            assert scan.get("Rows Removed by Filter", 0) == 0, scan
