"""What the benchmarks share: fresh databases, seeded jobs, and a process's CPU and memory
from /proc (Linux)."""

from __future__ import annotations

import json
import os
import uuid
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from sundial.core.db import migrate
from sundial.core.partition import partition_of
from sundial.devstack import Stack
from sundial.job import JobPolicies, policies_to_json, schedule_to_json
from sundial.schedule import CronSpec, Schedule

SCHEDULE = schedule_to_json(Schedule(CronSpec("0 0 * * *")))
POLICIES = policies_to_json(JobPolicies())
TARGET = {"http": {"url": "https://example.com/hook"}}

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of process ``pid``."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(") ", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def peak_rss_mb(pid: int) -> float:
    """Peak resident memory (VmHWM) of process ``pid``, MiB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def family(root: int) -> list[int]:
    """``root`` and every live process whose parent it is (PostgreSQL's backends)."""
    pids = [root]
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                if int(stat.read().rsplit(") ", 1)[1].split()[1]) == root:
                    pids.append(int(entry))
        except (FileNotFoundError, ProcessLookupError):
            continue
    return pids


def family_cpu(root: int) -> float:
    """CPU seconds of ``root`` and its children, those that exited included (a closed
    connection's backend is gone, its CPU counted in the postmaster's cutime/cstime)."""
    with open(f"/proc/{root}/stat") as stat:
        fields = stat.read().rsplit(") ", 1)[1].split()
    total = (int(fields[13]) + int(fields[14])) / TICKS
    for pid in family(root):
        try:
            total += cpu_seconds(pid)
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def with_database(url: str, name: str) -> str:
    """``url`` pointing at database ``name``."""
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


async def fresh_database(stack: Stack, label: str) -> str:
    """A new database on the stack's PostgreSQL, migrated; its URL."""
    name = f"bench_{label}_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(stack.database_url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    url = with_database(stack.database_url, name)
    await migrate(url)
    return url


async def seed_jobs(
    conn: Any, count: int, *, next_run_at: str = "NULL", chunk: int = 20_000
) -> None:
    """``count`` jobs of tenant ``bench`` with realistic definitions and the digest the API
    writes with them (migration 0008); ``next_run_at`` is an SQL expression (NULL: not
    scheduled until the benchmark makes them due)."""
    for start in range(0, count, chunk):
        ids = [uuid.uuid4() for _ in range(min(chunk, count - start))]
        async with conn.transaction():
            await conn.execute(
                "INSERT INTO jobs (job_id, tenant_id, name, partition_id, next_run_at)"
                f" SELECT j, 'bench', 'job-' || j::text, p, {next_run_at}"
                " FROM unnest($1::uuid[], $2::smallint[]) AS u(j, p)",
                ids,
                [partition_of(i) for i in ids],
            )
            await conn.execute(
                "INSERT INTO job_definitions (job_id, schedule, target, policies, payload)"
                " SELECT j, $2::text::jsonb, $3::text::jsonb, $4::text::jsonb, '\\x7b7d'"
                " FROM unnest($1::uuid[]) AS j",
                ids,
                json.dumps(SCHEDULE),
                json.dumps(TARGET),
                json.dumps(POLICIES),
            )
            await conn.execute(
                "UPDATE jobs j SET definition_digest ="
                " md5(d.schedule::text || ' ' || d.policies::text)::uuid"
                " FROM job_definitions d WHERE d.job_id = j.job_id AND j.job_id = ANY($1)",
                ids,
            )


def bench_env(stack: Stack, admin_token: str, **extra: str) -> dict[str, str]:
    """The services' environment of the stack benchmarks (bench_isolation, bench_fairness):
    the stack's database, an admin token, loopback targets allowed, quiet logs and a
    short dispatcher poll."""
    return {
        "SUNDIAL_DATABASE_URL": stack.database_url,
        "SUNDIAL_ADMIN_TOKEN": admin_token,
        "SUNDIAL_ALLOW_LOOPBACK_TARGETS": "1",
        "SUNDIAL_LOG_LEVEL": "WARNING",
        "SUNDIAL_POLL_INTERVAL_S": "0.1",
        **extra,
    }
