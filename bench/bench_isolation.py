"""Benchmark tenant isolation: what tenant A's heaviest legal loads cost tenant B.

Run: ``python bench/bench_isolation.py [--seconds 15] [--herd 20000] [--repeat 1]
[--phases ...] [--pgwork] [--json]``.

One local stack (API, scheduler, executor as real processes; fast PostgreSQL settings)
and the fast target of ``bench_e2e.py`` in a process of its own. Tenant B runs a steady
load throughout: 20 jobs firing every second at the target, and a GetJob every 20 ms
(1 s deadline). For each of A's loads, over ``--seconds``, B's p50/p99 API latency
and B's p99 run lateness (arrival at the target minus the scheduled time) are measured
with B alone just before it, then beside it; the ratio is of that pair (B alone moved
by half between the start and the end of one run on the shared machine, so one
measure of B alone made every ratio of the run lower or higher together). With
``--repeat N`` every load is measured N times, each beside its own B alone, and the
table gives the median ratio with the lowest and the highest:

* ``schedule``: 4 concurrent PreviewSchedule (1,000 fire times, 16 cron specs, a
  calendar excluding every day) and CreateJob of that schedule (refused);
* ``payload``: backfills of 20 runs of a job with the largest payload the API accepts
  (256 KiB), again and again;
* ``failing``: 50 jobs firing every second at an endpoint of B's target origin that
  answers 502;
* ``dns``: 50 jobs firing every second at a name whose DNS server never answers (the
  API and the executor ask a DNS server of this benchmark's);
* ``herd``: ``--herd`` one-time jobs due at one instant, calling a target process of
  A's own (a tenant's target is its own service), B's runs due meanwhile;
* ``cores`` (the machine's own limit for the herd row): no Sundial work at all, as many
  processes spinning as the machine has cores, which is what a herd takes from B (the
  herd keeps both cores of the reference machine busy). No scheduling inside Sundial
  can give B back what the operating system hands to other processes, so B's ratio
  here is the floor under the herd's, measured in the same run.

A ratio (loaded / alone) at or under 1.5 means B did not notice A. Missing B runs
(due in the window, never called) are counted too. B's 20 runs of a second are due at
one instant, so one slow second sets the p99: each phase also lists B's latest run of
each second (``run_lateness_max_by_second_s``), and of their dispatch and lease
(``run_dispatched_max_by_second_s``, ``run_leased_max_by_second_s``). ``--pgwork`` loads
``pg_stat_statements`` and prints PostgreSQL's top statements over the herd phase, per
run of A's that ended in it (``_pgwork.py``).

A's calls (``schedule``, ``payload``) come from a process of their own, as A's own
client on its own machine would: in B's process, decoding A's answers (1,000 fire
times a preview, 5 MiB a backfill) would hold the event loop that times B's calls.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import statistics
import sys
import tempfile
import time
import typing
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import asyncpg
import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.helpers

import _pgwork  # bench/: the script's folder
from _common import bench_env
from bench_e2e import (
    ADMIN_TOKEN,
    FAIL_PATH,
    Api,
    FastTarget,
    Recorder,
    cpu_by_process,
    http_target,
)

from sundial.client import CHANNEL_OPTIONS
from sundial.devstack import Services, Stack
from sundial.v1 import calendar_pb2, job_pb2, job_service_pb2
from tests.helpers.dns_server import DnsServer

B_JOBS = 20
B_CALL_EVERY_S = 0.02
"""B's GetJob rate: a p99 is then the 8th slowest of about 750 calls a phase (at 50 ms,
the 3rd of 300, set by two or three calls alone)."""
MAX_PAYLOAD = 256 * 1024
SLOW_NAME = "never.slow.test"


def quantile(values: list[float], q: int) -> float:
    if len(values) < 2:
        return round(values[0], 4) if values else float("nan")
    return round(statistics.quantiles(values, n=100)[q - 1], 4)


def every_second(name: str, url: str) -> job_pb2.Job:
    schedule = job_pb2.Schedule(interval=job_pb2.IntervalSchedule())
    schedule.interval.every.FromSeconds(1)
    return job_pb2.Job(name=name, schedule=schedule, target=http_target(url))


def run_key_arrays(keys: set[str]) -> tuple[list[uuid.UUID], list[datetime]]:
    """The job ids and due times of run keys ``job_id@due`` (for unnest in SQL)."""
    pairs = [key.split("@", 1) for key in keys]
    return (
        [uuid.UUID(job) for job, _ in pairs],
        [datetime.fromisoformat(at.replace("Z", "+00:00")) for _, at in pairs],
    )


class TenantB:
    """B's steady load and what it saw."""

    def __init__(
        self,
        api: Api,
        md: tuple[tuple[str, str], ...],
        job_ids: list[str],
        database_url: str,
    ) -> None:
        self.api = api
        self.md = md
        self.job_ids = job_ids
        self.database_url = database_url

    async def statuses(self, keys: set[str]) -> dict[str, int]:
        """How many of the runs ``keys`` (``job_id@due``) stand at each status ("none":
        no run row: the occurrence was never dispatched)."""
        conn = await asyncpg.connect(self.database_url)
        try:
            rows = await conn.fetch(
                "SELECT r.status FROM unnest($1::uuid[], $2::timestamptz[]) AS k(j, at)"
                " LEFT JOIN job_runs r ON r.job_id = k.j AND r.scheduled_at = k.at",
                *run_key_arrays(keys),
            )
        finally:
            await conn.close()
        return dict(Counter(row["status"] or "none" for row in rows))

    async def stages(self, keys: set[str]) -> dict[str, object]:
        """Where the runs ``keys`` spent their lateness: p99 of their dispatch (the
        dispatcher's or the admission's publish, after the due time), of their lease
        (the executor's grant) and of their end as the ledger recorded it, in seconds
        after their due times (a job's next occurrence finds its run live, and skips
        under the overlap policy, until that record); and the latest dispatch and lease
        of each second's runs, as ``run_lateness_max_by_second_s`` has their arrival."""
        conn = await asyncpg.connect(self.database_url)
        try:
            rows = await conn.fetch(
                "SELECT r.scheduled_at, r.lateness_ms / 1000.0 AS dispatched,"
                "       extract(epoch FROM r.started_at - r.scheduled_at) AS leased,"
                "       extract(epoch FROM r.finished_at - r.scheduled_at) AS ended"
                "  FROM unnest($1::uuid[], $2::timestamptz[]) AS k(j, at)"
                "  JOIN job_runs r ON r.job_id = k.j AND r.scheduled_at = k.at",
                *run_key_arrays(keys),
            )
        finally:
            await conn.close()
        figures: dict[str, object] = {
            f"run_{stage}_p99_s": quantile(
                [float(row[stage]) for row in rows if row[stage] is not None], 99
            )
            for stage in ("dispatched", "leased", "ended")
        }
        for stage in ("dispatched", "leased"):
            worst: dict[datetime, float] = {}
            for row in rows:
                if row[stage] is not None:
                    at = row["scheduled_at"]
                    worst[at] = max(worst.get(at, 0.0), float(row[stage]))
            figures[f"run_{stage}_max_by_second_s"] = [round(worst[at], 3) for at in sorted(worst)]
        return figures

    async def skipped_behind(self, keys: set[str]) -> dict[str, float | None]:
        """Of the runs ``keys`` the overlap policy skipped: the slowest of the runs that
        were unfinished at their occurrence (the job's run due a second before), as
        seconds after that run's due time to its lease, its end and the record of its
        end (None: none skipped)."""
        conn = await asyncpg.connect(self.database_url)
        try:
            row = await conn.fetchrow(
                "SELECT max(extract(epoch FROM p.started_at - p.scheduled_at)) AS leased,"
                "       max(extract(epoch FROM p.finished_at - p.scheduled_at)) AS ended,"
                "       max(extract(epoch FROM p.updated_at - p.scheduled_at)) AS recorded"
                "  FROM unnest($1::uuid[], $2::timestamptz[]) AS k(j, at)"
                "  JOIN job_runs r ON r.job_id = k.j AND r.scheduled_at = k.at"
                "  JOIN job_runs p ON p.job_id = k.j AND p.scheduled_at = k.at - interval '1 s'"
                " WHERE r.status = 'skipped'",
                *run_key_arrays(keys),
            )
        finally:
            await conn.close()
        return {
            name: None if value is None else round(float(value), 3) for name, value in row.items()
        }

    async def measure(
        self, recorder: Recorder, seconds: float, settle_s: float = 3.0
    ) -> dict[str, object]:
        """GetJob every ``B_CALL_EVERY_S`` for ``seconds``; then B's runs due in the window, once
        they arrived (at most ``settle_s`` after it)."""
        latencies: list[float] = []
        timeouts = 0
        start = time.time()
        while time.time() - start < seconds:
            began = time.monotonic()
            try:
                await self.api.jobs.GetJob(
                    job_service_pb2.GetJobRequest(job_id=self.job_ids[0]),
                    metadata=self.md,
                    timeout=1.0,
                )
                latencies.append(time.monotonic() - began)
            except grpc.aio.AioRpcError:
                timeouts += 1
                latencies.append(1.0)
            await asyncio.sleep(max(0.0, B_CALL_EVERY_S - (time.monotonic() - began)))
        end = time.time()
        prefixes = tuple(f"{job_id}@" for job_id in self.job_ids)
        due_start, due_end = int(start) + 1, int(end) - 1
        expected = {
            f"{p}{datetime.fromtimestamp(t, UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}"
            for p in prefixes
            for t in range(due_start, due_end)
        }
        deadline = time.monotonic() + settle_s
        while True:  # poll the target's records until B's window arrived or settle_s
            await recorder.update()
            if expected <= recorder.lateness.keys() or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.5)
        lateness = [recorder.lateness[k] for k in expected if k in recorder.lateness]
        missing = expected - recorder.lateness.keys()
        worst: dict[str, float] = {}  # B's latest run of each due second, in order
        for key in sorted(expected & recorder.lateness.keys(), key=lambda k: k.split("@")[1]):
            due = key.split("@")[1]
            worst[due] = max(worst.get(due, 0.0), recorder.lateness[key])
        return {
            "api_p50_s": quantile(latencies, 50),
            "api_p99_s": quantile(latencies, 99),
            "api_timeouts": timeouts,
            "run_lateness_p50_s": quantile(lateness, 50),
            "run_lateness_p99_s": quantile(lateness, 99),
            "run_lateness_max_by_second_s": [round(v, 3) for v in worst.values()],
            **await self.stages(expected),
            "runs_missing": len(missing),
            # Why: "skipped" is the overlap policy (the job's previous run unfinished at
            # the occurrence), anything else a run not called (yet).
            "missing_by_status": await self.statuses(missing) if missing else {},
            **({"skipped_behind": await self.skipped_behind(missing)} if missing else {}),
        }


async def looping(
    stop: asyncio.Event, concurrency: int, call: Callable[[], Awaitable[object]]
) -> int:
    """Call ``call`` from ``concurrency`` loops until ``stop``; returns the calls made."""
    made = 0

    async def one() -> None:
        nonlocal made
        while not stop.is_set():
            with contextlib.suppress(grpc.aio.AioRpcError):
                await call()
            made += 1

    await asyncio.gather(*(one() for _ in range(concurrency)))
    return made


def never_firing() -> job_pb2.Schedule:
    schedule = job_pb2.Schedule(calendars=["every-day"])
    for i in range(16):
        schedule.specs.add(cron=f"{i} {i} * * *")
    return schedule


async def load_schedule(api: Api, md: tuple[tuple[str, str], ...], stop: asyncio.Event) -> int:
    every_day = sorted(
        {f"{d:%m-%d}" for d in (date(2024, 1, 1) + timedelta(i) for i in range(366))}
    )
    await api.jobs.CreateCalendar(
        job_service_pb2.CreateCalendarRequest(
            calendar=calendar_pb2.Calendar(
                name="every-day", kind=calendar_pb2.CALENDAR_KIND_EXCLUDE, dates=every_day
            )
        ),
        metadata=md,
    )
    flip = 0

    async def call() -> object:
        nonlocal flip
        flip += 1
        if flip % 2:
            return await api.jobs.PreviewSchedule(
                job_service_pb2.PreviewScheduleRequest(schedule=never_firing(), count=1000),
                metadata=md,
                timeout=30,
            )
        job = job_pb2.Job(
            name="never", schedule=never_firing(), target=http_target("http://127.0.0.1:9/x")
        )
        return await api.jobs.CreateJob(
            job_service_pb2.CreateJobRequest(job=job), metadata=md, timeout=30
        )

    return await looping(stop, 4, call)


async def load_payload(
    api: Api, md: tuple[tuple[str, str], ...], url: str, stop: asyncio.Event
) -> int:
    job = job_pb2.Job(
        name="big",
        schedule=job_pb2.Schedule(cron="* * * * *"),
        target=http_target(f"{url}/a-big"),
        payload=b"x" * MAX_PAYLOAD,
    )
    created = await api.jobs.CreateJob(job_service_pb2.CreateJobRequest(job=job), metadata=md)
    end = datetime.now(UTC).replace(second=0, microsecond=0)

    async def call() -> object:
        nonlocal end
        start = end - timedelta(minutes=20)  # each call the 20 minutes before the last
        request = job_service_pb2.BackfillJobRequest(job_id=created.job.job_id)
        request.start_time.FromDatetime(start)
        request.end_time.FromDatetime(end)
        end = start
        answer = await api.jobs.BackfillJob(request, metadata=md, timeout=30)
        await asyncio.sleep(1.0)  # a backfill of 20 (5 MiB of payloads) a second
        return answer

    return await looping(stop, 1, call)


A_LOADS = ("schedule", "payload")
"""A's loads that are calls of A's client (run by :func:`a_client`)."""
A_TOKEN_ENV = "BENCH_A_TOKEN"
"""How the process of A's client gets A's bearer token (never in its arguments)."""


async def a_client(
    name: str, address: str, md: tuple[tuple[str, str], ...], url: str, stop: asyncio.Event
) -> int:
    """A's load ``name`` from a process of its own until ``stop``; the calls it made.

    The process calls until its stdin closes (and ends by itself after an hour)."""
    [(_, bearer)] = md
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--a-load",
        name,
        "--a-address",
        address,
        "--a-url",
        url,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, A_TOKEN_ENV: bearer.removeprefix("Bearer ")},
    )
    assert proc.stdin is not None
    try:
        await stop.wait()
    finally:
        proc.stdin.close()
        out, _ = await asyncio.wait_for(proc.communicate(), timeout=60)
    return int(out.decode().strip().splitlines()[-1])


async def a_load_main(name: str, address: str, url: str) -> None:
    """The process of :func:`a_client`: prints the calls made once stdin closes."""
    md = (("authorization", f"Bearer {os.environ[A_TOKEN_ENV]}"),)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    closed = loop.run_in_executor(None, sys.stdin.buffer.read)
    closed.add_done_callback(lambda _: loop.call_soon_threadsafe(stop.set))
    loop.call_later(3600, stop.set)
    # As the Python client does: its channel honours the API's pushback (RetryInfo) on
    # RESOURCE_EXHAUSTED by itself.
    async with grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS) as channel:
        api = Api(channel)
        if name == "schedule":
            made = await load_schedule(api, md, stop)
        else:
            made = await load_payload(api, md, url, stop)
    print(made, flush=True)


SPIN = "import time\nend = time.monotonic() + 600\nwhile time.monotonic() < end:\n    pass\n"
"""A process that keeps a core busy (and ends by itself after 10 minutes)."""


async def spin_cores(stop: asyncio.Event) -> int:
    """Keep every core busy with processes doing nothing else until ``stop``; returns
    how many there were."""
    procs = [
        await asyncio.create_subprocess_exec(sys.executable, "-c", SPIN)
        for _ in range(os.cpu_count() or 1)
    ]
    try:
        await stop.wait()
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            await proc.wait()
    return len(procs)


async def create_every_second(
    api: Api, md: tuple[tuple[str, str], ...], url: str, count: int
) -> None:
    await api.create(md, [every_second(f"a-{i}", url) for i in range(count)])


async def phase(
    name: str,
    b: TenantB,
    recorder: Recorder,
    seconds: float,
    load: Callable[[asyncio.Event], Awaitable[object]] | None,
    *,
    settle_s: float = 3.0,
) -> dict[str, object]:
    stop = asyncio.Event()
    task = asyncio.create_task(load(stop)) if load is not None else None
    try:
        await asyncio.sleep(2.0)  # A's load ramps up before B is measured
        cpu_before, began = cpu_by_process(), time.monotonic()
        figures = await b.measure(recorder, seconds, settle_s)
        # Cores each kind of process used over B's measure (and its settling).
        elapsed = time.monotonic() - began
        figures["cores_by_process"] = {
            kind: round((used - cpu_before.get(kind, 0.0)) / elapsed, 3)
            for kind, used in cpu_by_process().items()
        }
    finally:
        stop.set()
        made = None if task is None else await task
    if task is not None:
        figures["a_calls"] = made
    print(f"  {name}: {json.dumps(figures)}", flush=True)
    return figures


async def pause_all(api: Api, md: tuple[tuple[str, str], ...]) -> None:
    page = ""
    while True:
        listed = await api.jobs.ListJobs(
            job_service_pb2.ListJobsRequest(page_size=1000, page_token=page), metadata=md
        )
        for job in listed.jobs:
            with contextlib.suppress(grpc.aio.AioRpcError):
                await api.jobs.PauseJob(
                    job_service_pb2.PauseJobRequest(job_id=job.job_id), metadata=md
                )
        page = listed.next_page_token
        if not page:
            return


Pairs = dict[str, list[dict[str, typing.Any]]]
"""Per A's load, one entry per repetition: B ``alone`` just before, B beside it
(``loaded``), and for the herd A's own figures (``a``)."""


async def main(args: argparse.Namespace) -> Pairs:
    results: Pairs = {}
    target = FastTarget()
    try:
        recorder = Recorder(target)
        async with DnsServer() as dns:
            dns.silent.add(SLOW_NAME)
            settings = _pgwork.SETTINGS if args.pgwork else ()
            with (
                Stack(durable=False, postgres_settings=settings) as stack,
                tempfile.TemporaryDirectory() as logs,
            ):
                services = Services(
                    stack,
                    Path(logs),
                    extra_env=bench_env(
                        stack,
                        ADMIN_TOKEN,
                        SUNDIAL_DNS_NAMESERVERS=dns.address,
                        **dict(setting.split("=", 1) for setting in args.env),
                    ),
                )
                await asyncio.to_thread(services.start)
                try:
                    address = services.processes["api"].address
                    async with grpc.aio.insecure_channel(address) as channel:
                        await run_phases(
                            Api(channel),
                            address,
                            database_url=stack.database_url,
                            target=target,
                            recorder=recorder,
                            args=args,
                            results=results,
                        )
                finally:
                    await asyncio.to_thread(services.stop)
    finally:
        target.stop()
    return results


async def run_phases(
    api: Api,
    address: str,
    *,
    database_url: str,
    target: FastTarget,
    recorder: Recorder,
    args: argparse.Namespace,
    results: Pairs,
) -> None:
    _, b_md = await api.tenant()
    b_jobs = [every_second(f"b-{i}", f"{target.url}/b") for i in range(B_JOBS)]
    await api.create(b_md, b_jobs)
    listed = await api.jobs.ListJobs(job_service_pb2.ListJobsRequest(page_size=1000), metadata=b_md)
    b = TenantB(api, b_md, [job.job_id for job in listed.jobs], database_url)
    await asyncio.sleep(3.0)  # B's schedule warms up

    async def measure_alone() -> dict[str, object]:
        return await phase("alone", b, recorder, args.seconds, None)

    async def run(
        name: str,
        load: Callable[[asyncio.Event], Awaitable[object]],
        settle_s: float = 3.0,
        *,
        alone: dict[str, object] | None = None,
    ) -> None:
        """B alone (unless measured already, ``alone``), then B beside A's ``load``."""
        if alone is None:
            alone = await measure_alone()
        loaded = await phase(name, b, recorder, args.seconds, load, settle_s=settle_s)
        results.setdefault(name, []).append({"alone": alone, "loaded": loaded})

    phases = set(args.phases.split(","))
    for repetition in range(args.repeat):
        if args.repeat > 1:
            print(f"  repetition {repetition + 1} of {args.repeat}", flush=True)
        for name in A_LOADS:
            if name in phases:
                _, a_md = await api.tenant()
                await run(
                    name,
                    lambda stop, name=name, a_md=a_md: a_client(
                        name, address, a_md, target.url, stop
                    ),
                )
        if "failing" in phases:
            _, a_md = await api.tenant()
            await create_every_second(api, a_md, f"{target.url}{FAIL_PATH}", 50)
            await run("failing", lambda stop: stop.wait())
            await pause_all(api, a_md)
        if "dns" in phases:
            _, a_md = await api.tenant()
            await create_every_second(api, a_md, f"http://{SLOW_NAME}:80/x", 50)
            await run("dns", lambda stop: stop.wait())
            await pause_all(api, a_md)
        if "cores" in phases:
            await run("cores", spin_cores)
        if "herd" in phases and args.herd:
            before = await measure_alone()  # before the herd's jobs are created
            figures = await herd_phase(
                api,
                functools.partial(run, alone=before),
                args.herd,
                database_url,
                args.seconds,
                pgwork=args.pgwork,
                drain=repetition + 1 < args.repeat,
            )
            results["herd"][-1]["a"] = figures
            print(f"  herd, A: {json.dumps(figures)}", flush=True)


async def herd_phase(
    api: Api,
    run: Callable[..., Awaitable[None]],
    herd: int,
    database_url: str,
    seconds: float,
    *,
    pgwork: bool = False,
    drain: bool = False,
) -> dict[str, object]:
    """A's ``herd`` one-time jobs due at one instant, calling A's own target process
    (a tenant's target is its own service; B's target is left to B's runs). Returns
    A's runs per second from the instant to the end of B's measure beside it (what the
    executor's pacing costs A, docs/design.md section 7). With ``drain``, returns once
    every run of the herd succeeded (the next measure of B alone is alone again)."""
    herd_target = FastTarget()
    try:
        a_tenant, a_md = await api.tenant()
        due = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=30)
        jobs = []
        for i in range(herd):
            schedule = job_pb2.Schedule()
            schedule.once.FromDatetime(due)
            url = f"{herd_target.url}/a"
            jobs.append(job_pb2.Job(name=f"herd-{i}", schedule=schedule, target=http_target(url)))
        await api.create(a_md, jobs)
        await asyncio.sleep(max(0.0, due.timestamp() - time.time() - 1.0))  # until the instant
        if pgwork:
            conn = await asyncpg.connect(database_url)
            try:
                await _pgwork.reset(conn)
            finally:
                await conn.close()
        cpu_before = cpu_by_process()
        # B's runs of the window wait behind the herd: up to its whole drain.
        await run("herd", lambda stop: stop.wait(), 120.0)
        conn = await asyncpg.connect(database_url)
        try:
            # The phase measures B from 1 s after the instant (its ramp) for `seconds`.
            span_s = 1.0 + seconds
            done = await conn.fetchval(
                "SELECT count(*) FROM job_runs WHERE tenant_id = $1 AND status = 'succeeded'"
                " AND finished_at < $2",
                a_tenant,
                due + timedelta(seconds=span_s),
            )
            # What each process used per run of A's that ended in the phase (B's own
            # runs and calls included: the same in every phase, small beside A's).
            ended = await conn.fetchval(
                "SELECT count(*) FROM job_runs WHERE tenant_id = $1 AND status = 'succeeded'",
                a_tenant,
            )
            cpu = {
                kind: round((used - cpu_before.get(kind, 0.0)) * 1e6 / max(1, ended))
                for kind, used in cpu_by_process().items()
            }
            if pgwork:  # what PostgreSQL did in the phase, per run of A's that ended in it
                work = await _pgwork.statements(conn, max(1, ended))
                print("\n".join(f"    {line}" for line in _pgwork.render(work)), flush=True)
        finally:
            await conn.close()
        if drain:
            await drained(database_url, a_tenant, herd)
        return {"a_runs_per_s": round(done / span_s), "cpu_us_per_a_run": cpu}
    finally:
        herd_target.stop()


async def drained(database_url: str, tenant: str, runs: int, deadline_s: float = 600.0) -> None:
    """Wait until ``runs`` runs of ``tenant`` succeeded (polled, at most ``deadline_s``)."""
    conn = await asyncpg.connect(database_url)
    try:
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            done = await conn.fetchval(
                "SELECT count(*) FROM job_runs WHERE tenant_id = $1 AND status = 'succeeded'",
                tenant,
            )
            if done >= runs:
                return
            await asyncio.sleep(1.0)
        raise TimeoutError(f"the herd of {runs} runs did not drain in {deadline_s:g} s")
    finally:
        await conn.close()


def _ratio(pair: dict[str, typing.Any], figure: str) -> float:
    return round(pair["loaded"][figure] / pair["alone"][figure], 2)


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 4)


def _spread(ratios: list[float]) -> str:
    """The median ratio, with the lowest and highest when measured more than once."""
    median = round(statistics.median(ratios), 2)
    return f"{median}" if len(ratios) < 2 else f"{median} ({min(ratios)}-{max(ratios)})"


def _floor_ratio(pair: dict[str, typing.Any], floor: dict[str, typing.Any], figure: str) -> float:
    return round(pair["loaded"][figure] / floor["loaded"][figure], 2)


def report(results: Pairs) -> None:
    """One row per A's load: B's p99s alone (measured just before) and beside it, and
    their ratio: the median of the repetitions, with their range. When the run measured
    ``cores``, each row's loaded p99 is also given beside B's under ``cores`` in the same
    repetition (``/ floor``): what A's load costs B beyond what the machine's busy cores
    cost it, the figure that stays when the machine's own floor is over 1.5."""
    floors = results.get("cores", [])
    print()
    print(
        "| A's load | B API p99 alone / loaded (s) | ratio | / floor"
        " | B lateness p99 alone / loaded (s) | ratio | / floor | B runs missing | A runs/s |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, pairs in results.items():
        alone = [p["alone"] for p in pairs]
        loaded = [p["loaded"] for p in pairs]
        a_rates = [p["a"]["a_runs_per_s"] for p in pairs if "a" in p]
        beside = list(zip(pairs, floors, strict=False))  # a repetition's pair and floor

        def floor_of(figure: str, beside: list[tuple[typing.Any, typing.Any]] = beside) -> str:
            return _spread([_floor_ratio(p, f, figure) for p, f in beside]) if beside else ""

        print(
            f"| {name} | {_median([f['api_p99_s'] for f in alone])}"
            f" / {_median([f['api_p99_s'] for f in loaded])}"
            f" | {_spread([_ratio(p, 'api_p99_s') for p in pairs])}"
            f" | {floor_of('api_p99_s')}"
            f" | {_median([f['run_lateness_p99_s'] for f in alone])}"
            f" / {_median([f['run_lateness_p99_s'] for f in loaded])}"
            f" | {_spread([_ratio(p, 'run_lateness_p99_s') for p in pairs])}"
            f" | {floor_of('run_lateness_p99_s')}"
            f" | {sum(f['runs_missing'] for f in loaded)}"
            f" | {round(statistics.median(a_rates)) if a_rates else ''} |"
        )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--herd", type=int, default=20_000)
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="measure each of A's loads this many times, each beside B alone just before",
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--a-load", choices=A_LOADS, help=argparse.SUPPRESS)
    parser.add_argument("--a-address", help=argparse.SUPPRESS)
    parser.add_argument("--a-url", help=argparse.SUPPRESS)
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="one more setting of every service (repeatable), e.g. SUNDIAL_PACE_LAG_MS=0",
    )
    parser.add_argument(
        "--pgwork",
        action="store_true",
        help="load pg_stat_statements and print what PostgreSQL did in the herd phase",
    )
    parser.add_argument(
        "--phases",
        default="schedule,payload,failing,dns,cores,herd",
        help="A's loads to run (comma-separated), each beside B alone",
    )
    return parser.parse_args()


if __name__ == "__main__":
    arguments = parse_args()
    if arguments.a_load:
        asyncio.run(a_load_main(arguments.a_load, arguments.a_address, arguments.a_url))
        sys.exit(0)
    figures = asyncio.run(main(arguments))
    report(figures)
    if arguments.json:
        print(json.dumps(figures, indent=2, default=str))
