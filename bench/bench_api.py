"""Benchmark the API service: CreateJob with 8 concurrent clients, BatchCreateJobs.

Run: ``python bench/bench_api.py [--creates 4000] [--batches 20] [--only PHASE ...] [--json]``
(``--only bare_sql_batch batch_create``: just those phases, in the same run).

Reported, all in the same run on the same PostgreSQL:

* ``bare_sql_create_8``: the machine's limit for CreateJob. Eight asyncpg connections each
  looping the statement CreateJob runs per job (the guarded max_jobs counter update on
  the shared tenant row and the set-based insert of jobs, job_definitions and job_stats),
  with no gRPC, auth, validation or schedule computation.
* ``create_job_8``: a real ``sundial-api`` process; 8 concurrent gRPC clients each
  calling CreateJob in a loop (distinct names, a cron schedule, an HTTP target):
  jobs per second and latency p50/p99.
* ``get_job_8``: the API's floor per call: 8 concurrent clients calling GetJob (bearer
  token lookup, one indexed read, conversion, gRPC): what any RPC costs before its work.
  ``get_job_by_client_id_8``: the same for a job named by its client-chosen id (one more
  indexed read to resolve it). Both with CPU microseconds per call of the API process
  and of PostgreSQL.
* ``bare_sql_batch``: the machine's limit for BatchCreateJobs: the same statement with
  1,000 rows per call, one connection (the API adds the request id's record in the
  transaction).
* ``batch_create``: the API process; one client calling BatchCreateJobs with 1,000
  schedules per call (mixed cron expressions, zones and intervals, a fifth using ``H``):
  schedules per second, and CPU milliseconds per 1,000 schedules of the API process and
  of PostgreSQL (from /proc, so other load on the machine does not count). Run with
  ``bare_sql_batch`` one batch of each in turn, so the load of a shared machine weighs
  on both alike (the bare side's PostgreSQL CPU is reported too).

The stack is started by ``sundial.devstack`` unless ``SUNDIAL_DATABASE_URL`` points
elsewhere. Client and server share the machine: on 2 cores the figures include the
benchmark's own client cost.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import grpc
from _common import cpu_seconds, family_cpu, fresh_database  # bench/: the script's folder

from sundial.api.store import queries
from sundial.api.store._params import InsertJobs
from sundial.core.db import init_connection, json_text
from sundial.core.partition import partition_of
from sundial.devstack import Stack
from sundial.devstack._services import Services
from sundial.job import JobPolicies, policies_to_json, schedule_to_json
from sundial.schedule import CronSpec, Schedule
from sundial.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    job_pb2,
    job_service_pb2,
    job_service_pb2_grpc,
)

ADMIN_TOKEN = "bench-admin-token-0123456789abcdef"
CLIENTS = 8
BATCH = 1000
CRONS = ["0 * * * *", "*/15 * * * *", "30 9 * * MON-FRI", "H H * * *", "0 0 1 * *"]
ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Asia/Tokyo"]
TARGET = "http://127.0.0.1:8085/hook"


async def add_tenant(conn: asyncpg.Connection, tenant_id: str) -> None:
    await conn.execute(
        "INSERT INTO tenants (tenant_id, name, max_jobs, signing_secret)"
        " VALUES ($1, $1, 100000000, $2)",
        tenant_id,
        os.urandom(32),
    )


def _params(tenant: str, n: int, prefix: str) -> InsertJobs:
    """queries.insert_jobs' parameters for ``n`` jobs, as the API builds them: the JSON
    columns as text, each distinct document encoded once; no trace context; the writer
    and request id as the API records them (revisions); no calendars named."""
    ids = [uuid.uuid4() for _ in range(n)]
    now = datetime.now(UTC)
    schedule = json_text(schedule_to_json(Schedule(CronSpec("0 * * * *"))))
    target = json_text({"http": {"url": TARGET, "method": "POST", "headers": {}}})
    return InsertJobs(
        tenant_id=tenant,
        job_ids=ids,
        names=[f"{prefix}-{i}" for i in range(n)],
        partition_ids=[partition_of(i) for i in ids],
        next_run_ats=[now] * n,
        paused=[False] * n,
        schedules=[schedule] * n,
        targets=[target] * n,
        policies=[json_text(policies_to_json(JobPolicies()))] * n,
        payloads=[b""] * n,
        labels=["{}"] * n,
        descriptions=[""] * n,
        pause_notes=[""] * n,
        client_job_ids=[None] * n,
        now=now,
        traceparent=None,
        changed_by="bench",
        request_id="bench",
        calendars=[None] * n,
    )


async def _create_tx(conn: asyncpg.Connection, params: InsertJobs) -> None:
    # The statement the API runs (quota check and inserts), alone in autocommit.
    inserted = await conn.fetchval(*queries.bind("insert_jobs", params))
    assert inserted == len(params.job_ids)


async def bare_sql_create(url: str, total: int, connections: int) -> dict[str, float]:
    """``connections`` loops of the one-job CreateJob transaction."""
    conns = [await asyncpg.connect(url) for _ in range(connections)]
    for conn in conns:
        await init_connection(conn)
    await add_tenant(conns[0], "bare")
    per = total // connections

    async def loop(conn: asyncpg.Connection, worker: int) -> None:
        for i in range(per):
            await _create_tx(conn, _params("bare", 1, f"w{worker}-{i}"))

    began = time.perf_counter()
    await asyncio.gather(*(loop(conn, w) for w, conn in enumerate(conns)))
    elapsed = time.perf_counter() - began
    for conn in conns:
        await conn.close()
    return {"jobs": per * connections, "jobs_per_s": round(per * connections / elapsed)}


async def bare_sql_batch(url: str, batches: int) -> dict[str, float]:
    """One connection inserting ``batches`` x 1,000 jobs, one transaction each."""
    conn = await asyncpg.connect(url)
    await init_connection(conn)
    await add_tenant(conn, "bare-batch")
    prepared = [_params("bare-batch", BATCH, f"b{b}") for b in range(batches)]
    began = time.perf_counter()
    for params in prepared:
        await _create_tx(conn, params)
    elapsed = time.perf_counter() - began
    await conn.close()
    return {"schedules": batches * BATCH, "schedules_per_s": round(batches * BATCH / elapsed)}


def _job(name: str, i: int) -> job_pb2.Job:
    if i % 5 == 4:
        schedule = job_pb2.Schedule(interval=job_pb2.IntervalSchedule())
        schedule.interval.every.seconds = 60 * (1 + i % 30)
    else:
        schedule = job_pb2.Schedule(cron=CRONS[i % len(CRONS)], time_zone=ZONES[i % len(ZONES)])
    return job_pb2.Job(
        name=name,
        schedule=schedule,
        target=job_pb2.Target(http=job_pb2.HttpTarget(url=TARGET)),
        payload=b'{"report": "usage"}',
        labels={"customer": f"c{i % 1000}"},
    )


async def _tenant_token(channel: grpc.aio.Channel, tenant_id: str) -> tuple[tuple[str, str]]:
    admin = admin_pb2_grpc.AdminServiceStub(channel)
    md = (("authorization", f"Bearer {ADMIN_TOKEN}"),)
    await admin.CreateTenant(
        admin_pb2.CreateTenantRequest(
            tenant=admin_pb2.Tenant(
                tenant_id=tenant_id,
                display_name=tenant_id,
                quotas=admin_pb2.Quotas(max_jobs=100_000_000),
            )
        ),
        metadata=md,
    )
    token = await admin.CreateApiToken(
        admin_pb2.CreateApiTokenRequest(
            tenant_id=tenant_id, role=admin_pb2.TOKEN_ROLE_TENANT, description="bench"
        ),
        metadata=md,
    )
    return (("authorization", f"Bearer {token.secret}"),)


async def api_creates(address: str, total: int) -> dict[str, float]:
    """8 concurrent clients calling CreateJob."""
    async with grpc.aio.insecure_channel(address) as channel:
        md = await _tenant_token(channel, "creates")
        stub = job_service_pb2_grpc.JobServiceStub(channel)
        latencies: list[float] = []
        per = total // CLIENTS
        # Warm up connections, caches and prepared statements.
        for i in range(20):
            await stub.CreateJob(
                job_service_pb2.CreateJobRequest(job=_job(f"warm-{i}", i)), metadata=md
            )

        async def client(worker: int) -> None:
            for i in range(per):
                job = _job(f"c{worker}-{i}", i)
                began = time.perf_counter()
                await stub.CreateJob(job_service_pb2.CreateJobRequest(job=job), metadata=md)
                latencies.append(time.perf_counter() - began)

        began = time.perf_counter()
        await asyncio.gather(*(client(w) for w in range(CLIENTS)))
        elapsed = time.perf_counter() - began
    quantiles = statistics.quantiles(latencies, n=100)
    return {
        "jobs": per * CLIENTS,
        "jobs_per_s": round(per * CLIENTS / elapsed),
        "latency_p50_ms": round(quantiles[49] * 1000, 1),
        "latency_p99_ms": round(quantiles[98] * 1000, 1),
    }


async def api_gets(
    address: str, total: int, api_pid: int, postgres_pid: int, *, client_id: str = ""
) -> dict[str, float]:
    """8 concurrent clients calling GetJob on one existing job (by ``client_id`` if given,
    else by its uid)."""
    async with grpc.aio.insecure_channel(address) as channel:
        md = await _tenant_token(channel, f"gets-{client_id or 'uid'}")
        stub = job_service_pb2_grpc.JobServiceStub(channel)
        created = await stub.CreateJob(
            job_service_pb2.CreateJobRequest(job=_job("target", 0), job_id=client_id),
            metadata=md,
        )
        request = job_service_pb2.GetJobRequest(job_id=created.job.job_id)
        per = total // CLIENTS

        async def client() -> None:
            for _ in range(per):
                await stub.GetJob(request, metadata=md)

        api_cpu, db_cpu = cpu_seconds(api_pid), family_cpu(postgres_pid)
        began = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(CLIENTS)))
        elapsed = time.perf_counter() - began
        api_cpu, db_cpu = cpu_seconds(api_pid) - api_cpu, family_cpu(postgres_pid) - db_cpu
    calls = per * CLIENTS
    return {
        "calls": calls,
        "calls_per_s": round(calls / elapsed),
        "api_cpu_us_per_call": round(api_cpu / calls * 1e6),
        "postgres_cpu_us_per_call": round(db_cpu / calls * 1e6),
    }


async def batches_side_by_side(
    bare_url: str, address: str, batches: int, api_pid: int, postgres_pid: int
) -> tuple[dict[str, float], dict[str, float]]:
    """``bare_sql_batch`` and ``batch_create`` in turn, one batch of each at a time, so
    other load on a shared machine weighs on both alike: one connection inserting
    1,000 jobs per statement, and one client calling BatchCreateJobs with 1,000
    schedules (each with a request id); PostgreSQL's CPU per batch for each, the API's
    for its own."""
    conn = await asyncpg.connect(bare_url)
    await init_connection(conn)
    await add_tenant(conn, "bare-batch")
    prepared = [_params("bare-batch", BATCH, f"b{b}") for b in range(batches)]
    bare = {"s": 0.0, "db": 0.0}
    api = {"s": 0.0, "db": 0.0, "cpu": 0.0}
    async with grpc.aio.insecure_channel(address) as channel:
        md = await _tenant_token(channel, "batches")
        stub = job_service_pb2_grpc.JobServiceStub(channel)
        requests = [
            job_service_pb2.BatchCreateJobsRequest(
                jobs=[_job(f"b{b}-{i}", i) for i in range(BATCH)], request_id=f"import-{b}"
            )
            for b in range(batches + 1)
        ]
        await stub.BatchCreateJobs(requests[0], metadata=md)  # warm-up
        for params, request in zip(prepared, requests[1:], strict=True):
            db_cpu, began = family_cpu(postgres_pid), time.perf_counter()
            await _create_tx(conn, params)
            bare["s"] += time.perf_counter() - began
            bare["db"] += family_cpu(postgres_pid) - db_cpu
            api_cpu, db_cpu = cpu_seconds(api_pid), family_cpu(postgres_pid)
            began = time.perf_counter()
            await stub.BatchCreateJobs(request, metadata=md)
            api["s"] += time.perf_counter() - began
            api["cpu"] += cpu_seconds(api_pid) - api_cpu
            api["db"] += family_cpu(postgres_pid) - db_cpu
    await conn.close()
    schedules = batches * BATCH
    return (
        {
            "schedules": schedules,
            "schedules_per_s": round(schedules / bare["s"]),
            "ms_per_batch": round(bare["s"] / batches * 1000, 1),
            "postgres_cpu_ms_per_batch": round(bare["db"] / batches * 1000, 1),
        },
        {
            "schedules": schedules,
            "schedules_per_s": round(schedules / api["s"]),
            "ms_per_batch": round(api["s"] / batches * 1000, 1),
            "api_cpu_ms_per_batch": round(api["cpu"] / batches * 1000, 1),
            "postgres_cpu_ms_per_batch": round(api["db"] / batches * 1000, 1),
        },
    )


PHASES = (
    "bare_sql_create_8",
    "bare_sql_batch",
    "create_job_8",
    "get_job_8",
    "get_job_by_client_id_8",
    "batch_create",
)


async def main(
    creates: int, batches: int, only: frozenset[str] = frozenset(PHASES)
) -> dict[str, dict[str, float]]:
    results: dict[str, dict[str, float]] = {}
    with Stack(durable=False) as stack:  # fsync off, as the tests run it
        url = await fresh_database(stack, "api_sql")
        if "bare_sql_create_8" in only:
            results["bare_sql_create_8"] = await bare_sql_create(url, creates, CLIENTS)
        bare_url = url
        if "bare_sql_batch" in only and "batch_create" not in only:
            results["bare_sql_batch"] = await bare_sql_batch(url, batches)
        if not only & {"create_job_8", "get_job_8", "get_job_by_client_id_8", "batch_create"}:
            return results
        url = await fresh_database(stack, "api")
        with tempfile.TemporaryDirectory() as logs:
            services = Services(
                stack,
                log_dir=Path(logs),
                extra_env={
                    "SUNDIAL_DATABASE_URL": url,
                    "SUNDIAL_ADMIN_TOKEN": ADMIN_TOKEN,
                    "SUNDIAL_ALLOW_LOOPBACK_TARGETS": "1",
                    "SUNDIAL_LOG_LEVEL": "WARNING",
                    # What one API costs per call, not the per-tenant rate limit: the
                    # single benchmark tenant calls far faster than a tenant's default.
                    "SUNDIAL_TENANT_RATE_PER_S": "0",
                },
            )
            try:
                api = await asyncio.to_thread(services.add, "api")
                if "create_job_8" in only:
                    results["create_job_8"] = await api_creates(api.address, creates)
                postgres = stack.postgres._process
                api_pid, postgres_pid = api.process.pid, postgres.pid if postgres else None
                assert api_pid and postgres_pid
                if "get_job_8" in only:
                    results["get_job_8"] = await api_gets(
                        api.address, creates, api_pid, postgres_pid
                    )
                if "get_job_by_client_id_8" in only:
                    results["get_job_by_client_id_8"] = await api_gets(
                        api.address, creates, api_pid, postgres_pid, client_id="target"
                    )
                if "batch_create" in only:
                    results["bare_sql_batch"], results["batch_create"] = await batches_side_by_side(
                        bare_url, api.address, batches, api_pid, postgres_pid
                    )
            finally:
                await asyncio.to_thread(services.stop)
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--creates", type=int, default=4000)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--only", nargs="+", choices=PHASES, default=list(PHASES))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    figures = asyncio.run(main(args.creates, args.batches, frozenset(args.only)))
    if args.json:
        json.dump(figures, sys.stdout, indent=2)
        print()
    else:
        print(f"API: CreateJob with {CLIENTS} concurrent clients, BatchCreateJobs of {BATCH}")
        for name, values in figures.items():
            print(f"  {name:18s} " + "  ".join(f"{k}={v}" for k, v in values.items()))
        for name, bare, key in (
            ("create_job_8", "bare_sql_create_8", "jobs_per_s"),
            ("batch_create", "bare_sql_batch", "schedules_per_s"),
        ):
            if name in figures and bare in figures:
                ratio = figures[name][key] / figures[bare][key]
                print(f"  {name}: {ratio:.0%} of {bare}")
