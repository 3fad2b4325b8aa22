"""Benchmark Sundial end to end: schedule -> dispatch -> lease -> target call -> outcome.

Run: ``python bench/bench_e2e.py [--rates 200,1000] [--seconds 20] [--herd 20000]
[--executors 1] [--executor-processes 1] [--max-in-flight 256] [--concurrency 64]
[--settings fast,durable] [--tracing off,on] [--clients-only] [--profile DIR] [--json]
[--no-bare] [--bare-writes seed,sundial,rows] [--days-kept 30]``.

Everything is real: ``sundial-api``, ``sundial-scheduler`` and ``sundial-executor``
processes on the local stack, and a fast HTTP target in a process of its own (a bare
``asyncio.Protocol`` server on uvloop, ``--serve-target``) that records every call:
its ``Idempotency-Key``, ``Sundial-Scheduled-At`` and arrival time. Reported, all in
the same run against that one target:

* ``client_<name>``: the machine's limit for the last hop. A plain client of each kind
  (httpx when installed, aiohttp on asyncio and on uvloop, pyreqwest when installed, on
  asyncio and on uvloop), each in a fresh process, ``--concurrency`` calls in flight,
  posting for 5 s with the headers a Sundial call carries: calls per second. The best
  of them is the ceiling the end-to-end figures are compared with.
* ``steady_<rate>``: jobs created so that ``rate`` runs fall due every second (interval
  schedules of 10 s with whole-second offsets: ``rate`` jobs per offset). After a warm-up,
  for ``--seconds``: runs per second seen by the target and end-to-end lateness p50/p99
  (arrival at the target minus the run's scheduled time, which includes dispatch,
  leasing and the call).
* ``herd``: ``--herd`` one-time jobs all due at one instant, through ``--executors``
  executors: seconds from that instant until the target saw the last run and until the
  last run was SUCCEEDED in the database (its ``finished_at``), runs per second over the
  latter, and the count of missing (due, never called) and duplicate (called more than
  once) run keys, both expected to be 0; the CPU each process of the stack used from
  the instant to the end, per run (a process with its children: PostgreSQL's backends,
  the executor's workers), and the cores they used together. The ratios to the best
  plain client and to the executor's own client alone follow.
* ``bare``, ``bare_sundial`` and ``bare_rows`` (before each herd unless ``--no-bare``;
  ``--bare-writes`` chooses): the seed's algorithm done bare in one process
  (``bench_bare.py``) on the same PostgreSQL and target, with the seed's writes, with the
  writes Sundial's features make per run on copies of its tables, and with those writes
  on the tables' primary keys alone: runs/s, its own CPU and PostgreSQL's per run, and
  the top statements. The ratios of the herd to each, and of each to the seed's (what
  Sundial's writes cost on their own), are printed last.
* ``herd_postgresql``: what PostgreSQL did for the herd, per run (``_pgwork.py``): the
  top statements by execution time from the instant to the last success (named after
  the named query they are), and each table's inserts, updates with their HOT share,
  deletes and index count from the instant until the services stopped.
* ``stages`` (in ``herd``): where the herd's runs spent their time, from the run rows'
  own instants, p50/p90: admission to lease, lease to the completion's write, and a
  lease (which frees room in the tenant's admission window) to the next pass that
  admitted runs; the passes that admitted runs, the runs each admitted and the time
  between them.

Each database first gets the daily run partitions of the ``--days-kept`` days before
today (30, ``SUNDIAL_RETENTION_DAYS``' default): a deployment that has run a month has
them, and every statement counting runs by tenant or job reads each partition.

The Sundial phases run once per PostgreSQL setting of ``--settings``, each on a new
stack: ``fast`` (fsync, synchronous_commit and full_page_writes off, as the tests run)
and ``durable`` (all three on, PostgreSQL's defaults); the settings in force are printed.
With ``--tracing off,on`` they run a second time on the same stack with every service
exporting its spans (``SUNDIAL_OTLP_ENDPOINT``) to an OTLP sink in this process, which
only counts them (its CPU is not any service's); the phases of that run are named
``<setting>+tracing`` and the spans received per run are reported with their CPU.

With ``--profile DIR`` py-spy (the dev extra) samples the executor and scheduler
processes over each herd, from its due instant to its last success, and writes their
collapsed stacks to ``DIR/<setting>-<process>.txt`` (one line per stack, its sample
count last): where their CPU per run goes. Its own CPU is not any service's, and its
sampling slows them a little, so take a profiled run's figures as a profile only.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import importlib.util
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import typing
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit

import _pgwork  # bench/: the script's folder
import asyncpg
import grpc
from _common import with_database
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from sundial.core.db import ensure_run_partitions, migrate
from sundial.devstack import Services, Stack
from sundial.v1 import admin_pb2, admin_pb2_grpc, job_pb2, job_service_pb2, job_service_pb2_grpc

ADMIN_TOKEN = "bench-admin-token-0123456789abcdef"
PERIOD_S = 10  # interval of the steady-rate jobs; rate jobs share each offset second
WARMUP_S = 12.0
CLIENT_SECONDS = 5.0
RECORDS_PATH = "/_records"

# ---------------------------------------------------------------------------------------
# The fast target (its own process)
# ---------------------------------------------------------------------------------------

_OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
_FAILED = b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n"
FAIL_PATH = "/fail"  # answered 502 and not recorded
SLOW_PATH = "/slow"  # recorded at arrival, answered 200 after SLOW_CALL_S
SLOW_CALL_S = 0.1


class _TargetProtocol(asyncio.Protocol):
    """HTTP/1.1 with Content-Length bodies, keep-alive and pipelining; nothing more.

    Every request is answered 200 at once and recorded as (idempotency key, scheduled-at,
    arrival time); under ``SLOW_PATH`` the answer comes ``SLOW_CALL_S`` later (the
    executors' clients keep one request per connection in flight, so answers stay in
    order); ``GET /_records?from=N`` returns records N.. as tab-separated lines.
    """

    def __init__(self, records: list[tuple[bytes, bytes, float]]) -> None:
        self._records = records
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self._transport = typing.cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        while True:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            lines = bytes(buffer[:end]).split(b"\r\n")
            length = 0
            key = scheduled = b""
            for line in lines[1:]:
                name, _, value = line.partition(b":")
                name = name.strip().lower()
                if name == b"content-length":
                    length = int(value)
                elif name == b"idempotency-key":
                    key = value.strip()
                elif name == b"sundial-scheduled-at":
                    scheduled = value.strip()
                elif name == b"transfer-encoding":  # not needed by any client measured
                    assert self._transport is not None
                    self._transport.close()
                    return
            total = end + 4 + length
            if len(buffer) < total:
                return
            del buffer[:total]
            assert self._transport is not None
            if lines[0].startswith(b"GET " + RECORDS_PATH.encode()):
                self._transport.write(self._dump(lines[0]))
            elif lines[0].startswith(b"POST " + FAIL_PATH.encode()):
                self._transport.write(_FAILED)  # a failing target (bench_isolation.py)
            else:
                self._records.append((key, scheduled, time.time()))
                if lines[0].startswith(b"POST " + SLOW_PATH.encode()):
                    asyncio.get_running_loop().call_later(
                        SLOW_CALL_S, self._answer_late, self._transport
                    )
                else:
                    self._transport.write(_OK)

    @staticmethod
    def _answer_late(transport: asyncio.Transport) -> None:
        if not transport.is_closing():
            transport.write(_OK)

    def _dump(self, request_line: bytes) -> bytes:
        start = int(request_line.split(b"from=", 1)[1].split(b" ", 1)[0])
        body = b"".join(
            b"%s\t%s\t%.6f\n" % record for record in self._records[start : len(self._records)]
        )
        return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


async def _serve_target() -> None:
    records: list[tuple[bytes, bytes, float]] = []
    loop = asyncio.get_running_loop()
    # A deep backlog: executors open many connections at once, and a dropped SYN costs a
    # 1 s retransmit that would look like Sundial being slow.
    server = await loop.create_server(
        lambda: _TargetProtocol(records), "127.0.0.1", 0, backlog=4096
    )
    print(server.sockets[0].getsockname()[1], flush=True)
    await loop.run_in_executor(None, sys.stdin.read)  # until the parent closes stdin


def _run(
    main: Callable[[], Coroutine[typing.Any, typing.Any, object]], *, use_uvloop: bool
) -> object:
    if use_uvloop:
        import uvloop  # noqa: PLC0415 (only where asked for)

        return uvloop.run(main())
    return asyncio.run(main())


class FastTarget:
    """The target process: its URL, and the calls it recorded."""

    def __init__(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, __file__, "--serve-target"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._process.stdout is not None
        port = int(self._process.stdout.readline())
        self.url = f"http://127.0.0.1:{port}"
        self._seen = 0

    async def new_records(self) -> list[tuple[str, str, float]]:
        """The calls recorded since the last time this was asked."""
        host, port = urlsplit(self.url).hostname, urlsplit(self.url).port
        reader, writer = await asyncio.open_connection(host, port)
        try:
            writer.write(f"GET {RECORDS_PATH}?from={self._seen} HTTP/1.1\r\n\r\n".encode())
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(head.split(b"Content-Length: ", 1)[1].split(b"\r\n", 1)[0])
            body = await reader.readexactly(length)
        finally:
            writer.close()
        records = []
        for line in body.decode().splitlines():
            key, scheduled, at = line.split("\t")
            records.append((key, scheduled, float(at)))
        self._seen += len(records)
        return records

    def stop(self) -> None:
        assert self._process.stdin is not None
        self._process.stdin.close()
        self._process.wait(10)


class Recorder:
    """What the target saw: calls per run key, first arrival and lateness."""

    def __init__(self, target: FastTarget) -> None:
        self._target = target
        self.calls: Counter[str] = Counter()
        self.arrivals: dict[str, float] = {}
        self.lateness: dict[str, float] = {}

    async def update(self) -> None:
        for key, scheduled, at in await self._target.new_records():
            self.calls[key] += 1
            if key not in self.arrivals:
                self.arrivals[key] = at
                if scheduled:
                    due = datetime.fromisoformat(scheduled.replace("Z", "+00:00")).timestamp()
                    self.lateness[key] = at - due


# ---------------------------------------------------------------------------------------
# Plain clients (each in a fresh process: python bench_e2e.py --client NAME URL)
# ---------------------------------------------------------------------------------------


def _headers(i: int) -> dict[str, str]:
    """The headers of a Sundial call (bench keys, which the recorder ignores)."""
    return {
        "Content-Type": "application/octet-stream",
        "Idempotency-Key": f"bare-{i}",
        "Sundial-Scheduled-At": "2026-03-08T14:00:00Z",
        "Sundial-Attempt": "1",
        "Sundial-Execution-Id": "f530aeb2-7132-526f-af82-d4a3de8539e1",
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "Sundial-Signature": "t=1772978400,v1=" + "ab" * 32,
        "User-Agent": "sundial-bench/1",
    }


async def _drive(call: Callable[[int], Awaitable[None]], concurrency: int) -> float:
    done = 0
    deadline = time.monotonic() + CLIENT_SECONDS

    async def worker() -> None:
        nonlocal done
        while time.monotonic() < deadline:
            await call(done)
            done += 1

    started = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done / (time.monotonic() - started)


async def _httpx(url: str, concurrency: int) -> float:
    import httpx  # noqa: PLC0415 (optional)

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(trust_env=False, limits=limits) as client:

        async def call(i: int) -> None:
            (await client.post(url, content=b"{}", headers=_headers(i))).raise_for_status()

        return await _drive(call, concurrency)


async def _aiohttp(url: str, concurrency: int) -> float:
    import aiohttp  # noqa: PLC0415

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, trust_env=False) as session:

        async def call(i: int) -> None:
            async with session.post(url, data=b"{}", headers=_headers(i)) as response:
                await response.read()
                response.raise_for_status()

        return await _drive(call, concurrency)


async def _pyreqwest(url: str, concurrency: int) -> float:
    from pyreqwest.client import ClientBuilder  # noqa: PLC0415 (optional)

    client = ClientBuilder().max_connections(concurrency).follow_redirects(False).build()
    async with client:

        async def call(i: int) -> None:
            response = await client.post(url).headers(_headers(i)).body_bytes(b"{}").build().send()
            await response.bytes()
            response.error_for_status()

        return await _drive(call, concurrency)


# name -> (module that must be importable, function, on uvloop)
CLIENTS: dict[
    str, tuple[str, Callable[[str, int], Coroutine[typing.Any, typing.Any, float]], bool]
] = {
    "httpx": ("httpx", _httpx, False),
    "aiohttp": ("aiohttp", _aiohttp, False),
    "aiohttp_uvloop": ("aiohttp", _aiohttp, True),
    "pyreqwest": ("pyreqwest", _pyreqwest, False),
    "pyreqwest_uvloop": ("pyreqwest", _pyreqwest, True),
}


EXECUTOR_CLIENT = "aiohttp_uvloop"
"""The client and loop the executor calls targets with."""


def measure_client(name: str, url: str, concurrency: int) -> dict[str, object]:
    """Calls per second of plain client ``name`` in a fresh process (or why not)."""
    module, _, on_uvloop = CLIENTS[name]
    if importlib.util.find_spec(module) is None or (
        on_uvloop and importlib.util.find_spec("uvloop") is None
    ):
        return {"skipped": "not installed"}
    result = subprocess.run(
        [sys.executable, __file__, "--client", name, url, "--concurrency", str(concurrency)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    printed = result.stdout.split()
    if not printed:
        return {"failed": result.stderr.strip().splitlines()[-1:]}
    values: dict[str, object] = {"calls_per_s": round(float(printed[-1]))}
    if result.returncode != 0:  # measured, then crashed on the way out
        values["exit_status"] = result.returncode
    return values


# ---------------------------------------------------------------------------------------
# Sundial end to end
# ---------------------------------------------------------------------------------------


def quantile(values: list[float], q: int) -> float:
    if len(values) < 2:
        return round(values[0], 3) if values else float("nan")
    return round(statistics.quantiles(values, n=100)[q - 1], 3)


class Api:
    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.admin = admin_pb2_grpc.AdminServiceStub(channel)
        self.jobs = job_service_pb2_grpc.JobServiceStub(channel)

    async def tenant(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        tenant_id = f"bench-{uuid.uuid4().hex[:8]}"
        admin_md = (("authorization", f"Bearer {ADMIN_TOKEN}"),)
        quotas = admin_pb2.Quotas(max_jobs=100_000, max_concurrent_runs=1_000_000)
        await self.admin.CreateTenant(
            admin_pb2.CreateTenantRequest(
                tenant=admin_pb2.Tenant(tenant_id=tenant_id, display_name=tenant_id, quotas=quotas)
            ),
            metadata=admin_md,
        )
        token = await self.admin.CreateApiToken(
            admin_pb2.CreateApiTokenRequest(
                tenant_id=tenant_id, role=admin_pb2.TOKEN_ROLE_TENANT, description="bench"
            ),
            metadata=admin_md,
        )
        return tenant_id, (("authorization", f"Bearer {token.secret}"),)

    async def create(self, metadata: tuple[tuple[str, str], ...], jobs: list[job_pb2.Job]) -> None:
        for start in range(0, len(jobs), 1000):
            await self.jobs.BatchCreateJobs(
                job_service_pb2.BatchCreateJobsRequest(jobs=jobs[start : start + 1000]),
                metadata=metadata,
                timeout=120,
            )


def http_target(url: str) -> job_pb2.Target:
    return job_pb2.Target(http=job_pb2.HttpTarget(url=url))


async def pause_tenant(database_url: str, tenant_id: str) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute("UPDATE jobs SET paused = true WHERE tenant_id = $1", tenant_id)
    finally:
        await conn.close()


async def steady(
    api: Api, recorder: Recorder, url: str, database_url: str, *, rate: int, seconds: float
) -> dict[str, object]:
    tenant_id, md = await api.tenant()
    jobs = []
    for i in range(rate * PERIOD_S):
        schedule = job_pb2.Schedule(interval=job_pb2.IntervalSchedule())
        schedule.interval.every.FromSeconds(PERIOD_S)
        schedule.interval.offset.FromSeconds(i % PERIOD_S)
        jobs.append(job_pb2.Job(name=f"steady-{i}", schedule=schedule, target=http_target(url)))
    await api.create(md, jobs)
    await asyncio.sleep(WARMUP_S)  # the load's ramp-up, not waiting for an outcome
    start = time.time()
    await asyncio.sleep(seconds)  # the measured window
    end = time.time()
    await pause_tenant(database_url, tenant_id)
    await recorder.update()
    window = [
        recorder.lateness[k]
        for k, t in recorder.arrivals.items()
        if start <= t < end and k in recorder.lateness
    ]
    return {
        "target_runs_per_s": round(len(window) / (end - start)),
        "lateness_p50_s": quantile(window, 50),
        "lateness_p99_s": quantile(window, 99),
        "runs_measured": len(window),
    }


async def herd(
    api: Api,
    recorder: Recorder,
    url: str,
    database_url: str,
    count: int,
    *,
    profile: Path | None = None,
) -> dict[str, object]:
    """The herd phase (see the module doc); ``profile``: a path prefix the profiles of
    the services are written under (``<prefix>executor.txt``...), or None."""
    tenant_id, md = await api.tenant()
    due = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=max(30, count // 250))
    jobs = []
    for i in range(count):
        schedule = job_pb2.Schedule()
        schedule.once.FromDatetime(due)
        jobs.append(job_pb2.Job(name=f"herd-{i}", schedule=schedule, target=http_target(url)))
    await api.create(md, jobs)
    created_late = datetime.now(UTC) > due
    key_suffix = "@" + due.strftime("%Y-%m-%dT%H:%M:%SZ")
    conn = await asyncpg.connect(database_url)
    profilers: list[subprocess.Popen[bytes]] = []
    try:
        # PostgreSQL's counters from just before the instant: the creation's table
        # counters are reported by the API's backends within 10 s of its last write.
        await asyncio.sleep(max(0.0, due.timestamp() - time.time() - 1.0))
        await _pgwork.reset(conn)
        await asyncio.sleep(max(0.0, due.timestamp() - time.time()))  # until the instant
        if profile is not None:
            profilers = start_profilers(profile)
        cpu_before = cpu_by_process()
        deadline = time.time() + 900
        # The target's records first (no PostgreSQL work: a count of the tenant's
        # succeeded runs every 0.2 s was about 20 us per run of PostgreSQL's CPU in a
        # 3k herd, charged to Sundial), the database once every run was called.
        while time.time() < deadline:
            await recorder.update()
            if sum(1 for key in recorder.arrivals if key.endswith(key_suffix)) < count:
                await asyncio.sleep(0.2)  # a poll interval, as below
                continue
            succeeded = await conn.fetchval(
                "SELECT count(*) FROM job_runs WHERE tenant_id = $1 AND status = 'succeeded'",
                tenant_id,
            )
            if succeeded >= count:
                break
            await asyncio.sleep(0.2)  # a poll interval: the figures are read from timestamps
        # Before this benchmark's own reads below (PostgreSQL's work, not Sundial's).
        cpu_after = cpu_by_process()
        statements = await _pgwork.statements(conn, count)
        keys = {
            f"{job_id}{key_suffix}"
            for job_id in await conn.fetchval(
                "SELECT array_agg(job_id::text) FROM jobs WHERE tenant_id = $1", tenant_id
            )
        }
        last_finished = await conn.fetchval(
            "SELECT max(finished_at) FROM job_runs WHERE tenant_id = $1", tenant_id
        )
        stages = await herd_stages(conn, tenant_id)
    finally:
        await conn.close()
        await asyncio.to_thread(stop_profilers, profilers)
    # Once-jobs: nothing is left to pause (a pause would count as PostgreSQL's writes).
    await recorder.update()
    called = [recorder.arrivals[k] for k in keys if k in recorder.arrivals]
    finished_s = (last_finished.timestamp() if last_finished else time.time()) - due.timestamp()
    return {
        "runs": count,
        "succeeded": succeeded,
        "all_called_s": round(max(called, default=float("nan")) - due.timestamp(), 2),
        "all_succeeded_s": round(finished_s, 2),
        "runs_per_s": round(count / max(finished_s, 1e-9)),
        "missing": len(keys) - len(called),
        "duplicate": sum(1 for k in keys if recorder.calls[k] > 1),
        "created_after_due": created_late,
        # CPU time each process (with its children) used from the instant to the end.
        "cpu_us_per_run": {
            kind: round((cpu_after[kind] - cpu_before.get(kind, 0.0)) / count * 1e6)
            for kind in sorted(cpu_after)
        },
        "cores_used": round(
            (sum(cpu_after.values()) - sum(cpu_before.values())) / max(finished_s, 1e-9), 2
        ),
        "postgresql": statements,
        "stages": stages,
    }


async def herd_stages(conn: asyncpg.Connection, tenant_id: str) -> dict[str, object]:
    """Where a herd's runs spent their time, from the run rows' own instants (p50/p90
    in ms): from admission (the run's due time plus its lateness, both written by the
    pass or dispatch that admitted it) to its lease (``started_at``), from the lease to
    the completion's write (``finished_at``), and from a lease (which frees room in the
    tenant's window) to the next pass that admitted runs; the passes that admitted runs,
    the runs each admitted (median) and the time between them."""
    rows = await conn.fetch(
        """SELECT scheduled_at + make_interval(secs => lateness_ms / 1000.0) AS admitted,
                  started_at, finished_at
             FROM job_runs WHERE tenant_id = $1 AND status = 'succeeded'""",
        tenant_id,
    )
    if not rows:
        return {}

    def spread(values: list[float]) -> str:
        return f"{quantile(values, 50) * 1000:.0f}/{quantile(values, 90) * 1000:.0f}ms"

    admitted = Counter(r["admitted"] for r in rows)
    passes = sorted(admitted)
    waits = []
    for r in rows:
        k = bisect.bisect_right(passes, r["started_at"])
        if k < len(passes):
            waits.append((passes[k] - r["started_at"]).total_seconds())
    between = [(b - a).total_seconds() for a, b in itertools.pairwise(passes)]

    def step(start: str, end: str) -> str:
        return spread([(r[end] - r[start]).total_seconds() for r in rows])

    return {
        "admit_to_lease": step("admitted", "started_at"),
        "lease_to_done": step("started_at", "finished_at"),
        "lease_to_next_pass": spread(waits) if waits else "-",
        "passes": len(passes),
        "runs_per_pass_p50": round(quantile([float(n) for n in admitted.values()], 50)),
        "between_passes": spread(between) if between else "-",
    }


_KINDS = (
    ("bench_bare", "bare"),
    ("sundial.executor", "executor"),
    ("sundial.scheduler", "scheduler"),
    ("sundial.api", "api"),
    ("--serve-target", "target"),
    ("postgres", "postgres"),
    ("nats-server", "nats"),
    ("etcd", "etcd"),
)


def _service_pids() -> dict[str, int]:
    """The pid of each executor and scheduler process this benchmark started (the
    supervisor's, when the executor has workers: py-spy follows its subprocesses)."""
    pids: dict[str, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if int(stat[1]) != os.getpid():
            continue
        for needle in ("sundial.executor", "sundial.scheduler"):
            if needle.encode() in argv:
                pids[needle.rsplit(".", 1)[1]] = int(entry)
    return pids


def start_profilers(prefix: Path) -> list[subprocess.Popen[bytes]]:
    """py-spy recording each service process into ``<prefix><name>.txt`` until stopped."""
    prefix.parent.mkdir(parents=True, exist_ok=True)
    profilers = []
    for name, pid in sorted(_service_pids().items()):
        out = prefix.with_name(f"{prefix.name}{name}.txt")
        profilers.append(
            subprocess.Popen(
                [
                    str(Path(sys.executable).with_name("py-spy")),
                    "record",
                    "--pid",
                    str(pid),
                    "--rate",
                    "250",
                    "--subprocesses",
                    "--nonblocking",
                    "--format",
                    "raw",
                    "--output",
                    str(out),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
    return profilers


def stop_profilers(profilers: list[subprocess.Popen[bytes]]) -> None:
    """Stop each recording (SIGINT: py-spy writes its file then)."""
    for profiler in profilers:
        profiler.send_signal(signal.SIGINT)
    for profiler in profilers:
        try:
            profiler.wait(60)
        except subprocess.TimeoutExpired:
            profiler.kill()


def cpu_by_process() -> dict[str, float]:
    """CPU seconds used so far by each kind of process this benchmark started, each
    with its descendants (PostgreSQL's backends count as PostgreSQL). Linux (/proc)."""
    hz = os.sysconf("SC_CLK_TCK")
    stats: dict[int, tuple[int, float, str]] = {}  # pid -> (parent, cpu seconds, command)
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:  # gone meanwhile
            continue
        # utime + stime, and cutime + cstime: the children it reaped (PostgreSQL's
        # autovacuum workers and closed backends), whose CPU would otherwise vanish
        # from the tree between two readings (a negative figure for PostgreSQL).
        cpu_s = sum(int(f) for f in fields[11:15]) / hz
        stats[int(entry)] = (int(fields[1]), cpu_s, argv.decode(errors="replace"))
    children: dict[int, list[int]] = {}
    for pid, (parent, _, _) in stats.items():
        children.setdefault(parent, []).append(pid)

    def tree(pid: int) -> float:
        return stats[pid][1] + sum(tree(child) for child in children.get(pid, ()))

    used: dict[str, float] = {}
    for pid in children.get(os.getpid(), ()):
        kind = next((k for needle, k in _KINDS if needle in stats[pid][2]), "other")
        used[kind] = used.get(kind, 0.0) + tree(pid)
    return used


async def main(args: argparse.Namespace) -> dict[str, object]:
    results: dict[str, object] = {}
    target = FastTarget()
    try:
        url = f"{target.url}/bench"
        for name in CLIENTS:
            results[f"client_{name}"] = await asyncio.to_thread(
                measure_client, name, url, args.concurrency
            )
        if args.clients_only:
            return results
        recorder = Recorder(target)
        await recorder.update()  # the plain clients' calls are not runs
        for setting in args.settings:
            with Stack(durable=setting == "durable", postgres_settings=_pgwork.SETTINGS) as stack:
                for tracing in args.tracing:
                    phases: dict[str, object] = {}
                    label = setting if tracing == "off" else f"{setting}+tracing"
                    async with SpanSink() if tracing == "on" else _no_sink() as sink:
                        await sundial_phases(
                            args, stack, recorder, url, phases, sink=sink, label=label
                        )
                    results.update({f"{label}.{phase}": values for phase, values in phases.items()})
    finally:
        target.stop()
    return results


async def sundial_phases(
    args: argparse.Namespace,
    stack: Stack,
    recorder: Recorder,
    url: str,
    results: dict[str, object],
    *,
    sink: SpanSink | None = None,
    label: str = "",
) -> None:
    name = f"bench_e2e_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(stack.database_url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        # Planning time too in pg_stat_statements (its own setting, off by default).
        await admin.execute(f'ALTER DATABASE "{name}" SET pg_stat_statements.track_planning = on')
        settings = await admin.fetch(
            "SELECT name, setting FROM pg_settings WHERE name = ANY($1) ORDER BY name",
            ["fsync", "synchronous_commit", "full_page_writes", "shared_buffers"],
        )
    finally:
        await admin.close()
    results["postgresql"] = {row["name"]: row["setting"] for row in settings}
    database_url = with_database(stack.database_url, name)
    with tempfile.TemporaryDirectory(prefix="bench-e2e-") as logs:
        services = Services(
            stack,
            Path(logs),
            extra_env={
                "SUNDIAL_DATABASE_URL": database_url,
                "SUNDIAL_ADMIN_TOKEN": ADMIN_TOKEN,
                "SUNDIAL_ALLOW_LOOPBACK_TARGETS": "1",
                "SUNDIAL_LOG_LEVEL": "WARNING",
                "SUNDIAL_MAX_IN_FLIGHT": str(args.max_in_flight),
                "SUNDIAL_EXECUTOR_PROCESSES": str(args.executor_processes),
                **dict(setting.split("=", 1) for setting in args.env),
                # Spans exported every 0.5 s (the SDK's default is 5 s), so that their
                # export happens within the measured herd, not after it.
                **(
                    {"SUNDIAL_OTLP_ENDPOINT": sink.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "500"}
                    if sink is not None
                    else {}
                ),
            },
        )
        # Sundial's schema first (the services would apply it at start): the bare
        # pipeline with Sundial's writes copies its tables; and the daily run partitions
        # of the days a deployment keeps (--days-kept), which every statement counting
        # runs by tenant or job reads.
        await migrate(database_url)
        if args.days_kept:
            today = datetime.now(UTC).date()
            await ensure_run_partitions_at(
                database_url, today - timedelta(days=args.days_kept), today
            )
        if args.bare and args.herd:
            for writes in args.bare_writes:
                phase = "bare" if writes == "seed" else f"bare_{writes}"
                results[phase] = await bare_pipeline(database_url, url, args.herd, writes)
        try:
            await asyncio.to_thread(services.start)
            for _ in range(args.executors - 1):
                await asyncio.to_thread(services.add, "executor")
            async with grpc.aio.insecure_channel(services.processes["api"].address) as channel:
                api = Api(channel)
                for rate in args.rates:
                    results[f"steady_{rate}"] = await steady(
                        api, recorder, url, database_url, rate=rate, seconds=args.seconds
                    )
                if args.herd:
                    before = sink.spans if sink is not None else 0
                    results["herd"] = await herd(
                        api,
                        recorder,
                        url,
                        database_url,
                        args.herd,
                        profile=args.profile / f"{label}-" if args.profile else None,
                    )
                    if sink is not None:
                        spans = await sink.settled() - before
                        results["herd"]["spans_per_run"] = round(spans / args.herd, 2)  # type: ignore[index]
        finally:
            await asyncio.to_thread(services.stop)
        herd_values = results.get("herd")
        if isinstance(herd_values, dict):
            # The services stopped: their backends reported every write.
            conn = await asyncpg.connect(database_url)
            try:
                work = herd_values.pop("postgresql")
                work["tables"] = await _pgwork.tables(conn, args.herd)
                results["herd_postgresql"] = work
            finally:
                await conn.close()


async def ensure_run_partitions_at(database_url: str, start: date, end: date) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        await ensure_run_partitions(conn, start, end)
    finally:
        await conn.close()


async def bare_pipeline(
    database_url: str, url: str, count: int, writes: str = "seed"
) -> dict[str, object]:
    """The bare pipeline's herd (``bench_bare.py``, with the seed's writes or Sundial's)
    on the same PostgreSQL and target: its runs/s, its own CPU per run and PostgreSQL's
    over the same span."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(Path(__file__).with_name("bench_bare.py")),
        database_url,
        url,
        str(count),
        writes,
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    ready = await asyncio.wait_for(process.stdout.readline(), 300)
    if ready.strip() != b"ready":
        await process.wait()
        return {"failed": ready.decode(errors="replace")}
    conn = await asyncpg.connect(database_url)
    try:
        await _pgwork.reset(conn)
        before = cpu_by_process()
        await asyncio.wait_for(process.stdout.readline(), 900)  # "done"
        after = cpu_by_process()
        statements = await _pgwork.statements(conn, count)
    finally:
        await conn.close()
    line = await asyncio.wait_for(process.stdout.readline(), 300)
    await process.wait()
    values: dict[str, object] = json.loads(line)
    values.pop("due", None)
    values["postgresql"] = statements
    values["cpu_us_per_run"] = {
        kind: round((after[kind] - before.get(kind, 0.0)) / count * 1e6)
        for kind in ("bare", "postgres")
        if kind in after
    }
    return values


class SpanSink(trace_service_pb2_grpc.TraceServiceServicer):
    """An OTLP/gRPC collector on loopback that counts the spans it is sent (and drops
    metrics): what tracing costs the services, not what a backend costs."""

    def __init__(self) -> None:
        self.spans = 0
        self._server = grpc.aio.server()
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self, self._server)
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(
            metrics_service_pb2_grpc.MetricsServiceServicer(), self._server
        )
        self.endpoint = f"http://127.0.0.1:{self._server.add_insecure_port('127.0.0.1:0')}"

    async def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: object
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        self.spans += sum(
            len(scope.spans) for spans in request.resource_spans for scope in spans.scope_spans
        )
        return trace_service_pb2.ExportTraceServiceResponse()

    async def settled(self, quiet_s: float = 2.0, most_s: float = 30.0) -> int:
        """The spans received once none came for ``quiet_s`` (or after ``most_s``)."""
        deadline = time.monotonic() + most_s
        while time.monotonic() < deadline:
            seen = self.spans
            await asyncio.sleep(quiet_s)
            if self.spans == seen:
                break
        return self.spans

    async def __aenter__(self) -> SpanSink:
        await self._server.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._server.stop(0)


@contextlib.asynccontextmanager
async def _no_sink() -> typing.AsyncIterator[None]:
    yield None


def best_client(results: dict[str, object]) -> tuple[str, float] | None:
    rates = [
        (name.removeprefix("client_"), float(values["calls_per_s"]))
        for name, values in results.items()
        if name.startswith("client_") and isinstance(values, dict) and "calls_per_s" in values
    ]
    return max(rates, key=lambda item: item[1]) if rates else None


def report(results: dict[str, object], args: argparse.Namespace) -> None:
    print(
        f"end to end through {args.executors} executor(s) "
        f"(SUNDIAL_MAX_IN_FLIGHT={args.max_in_flight}, "
        f"SUNDIAL_EXECUTOR_PROCESSES={args.executor_processes}); plain clients with "
        f"{args.concurrency} calls in flight, {CLIENT_SECONDS:g} s each; one target process"
    )
    for phase, values in results.items():
        if phase.endswith(".herd_postgresql") and isinstance(values, dict):
            print(f"  {phase}")
            print("\n".join(f"    {line}" for line in _pgwork.render(values)))
            continue
        if isinstance(values, dict):
            text = "  ".join(f"{k}={v}" for k, v in values.items() if k != "postgresql")
            if isinstance(values.get("postgresql"), dict):
                text += "\n" + "\n".join(
                    f"    {line}" for line in _pgwork.render(values["postgresql"])
                )
        else:
            text = str(values)
        print(f"  {phase:24s} {text}")
    best = best_client(results)
    own = results.get(f"client_{EXECUTOR_CLIENT}")
    for setting in args.settings:
        herd_values = results.get(f"{setting}.herd")
        bare = results.get(f"{setting}.bare")
        if isinstance(herd_values, dict) and isinstance(bare, dict) and "runs_per_s" in bare:
            print(f"  herd ({setting}) beside the bare pipeline: " + bare_ratios(herd_values, bare))
        for writes, label in BARE_WRITES.items():
            other = results.get(f"{setting}.bare_{writes}")
            if not isinstance(other, dict) or "runs_per_s" not in other:
                continue
            if isinstance(herd_values, dict):
                ratios = bare_ratios(herd_values, other)
                print(f"  herd ({setting}) beside the bare pipeline with {label}: {ratios}")
            if isinstance(bare, dict) and "runs_per_s" in bare:
                ratios = bare_ratios(other, bare)
                print(f"  the bare pipeline with {label} beside the seed's: {ratios}")
        if best is None or not isinstance(herd_values, dict):
            continue
        rate = float(herd_values["runs_per_s"])
        line = (
            f"  herd ({setting}): {rate:.0f} runs/s = {rate / best[1]:.2f} x the best plain "
            f"client ({best[0]}, {best[1]:.0f} calls/s)"
        )
        if isinstance(own, dict) and "calls_per_s" in own:
            line += f", {rate / float(own['calls_per_s']):.2f} x {EXECUTOR_CLIENT} alone"
        print(line)


def bare_ratios(herd_values: dict[str, typing.Any], bare: dict[str, typing.Any]) -> str:
    """Sundial's herd beside the bare pipeline's (issue 29's targets: runs/s >= 0.70x,
    CPU per run <= 1.6x, PostgreSQL's <= 1.5x)."""
    ours = herd_values["cpu_us_per_run"]
    theirs = bare["cpu_us_per_run"]
    sundial_cpu, bare_cpu = _pipeline_cpu(ours), _pipeline_cpu(theirs)
    return (
        f"runs/s {herd_values['runs_per_s']} vs {bare['runs_per_s']} "
        f"({herd_values['runs_per_s'] / bare['runs_per_s']:.2f}x); CPU per run "
        f"{sundial_cpu} vs {bare_cpu} us ({sundial_cpu / max(bare_cpu, 1):.2f}x); "
        f"PostgreSQL {ours.get('postgres', 0)} vs {theirs.get('postgres', 0)} us "
        f"({ours.get('postgres', 0) / max(theirs.get('postgres', 1), 1):.2f}x)"
    )


BARE_WRITES = {
    "sundial": "Sundial's writes",
    "rows": "Sundial's row writes on primary keys alone",
}
"""The bare pipeline's variants beside the seed's (``bench_bare.py``), as reported."""


def _pipeline_cpu(cpu_us_per_run: dict[str, int]) -> int:
    """A pipeline's CPU per run: its services' (or the bare process's), PostgreSQL's and
    NATS's; not the target's, nor the machine's other processes'."""
    kinds = ("api", "scheduler", "executor", "postgres", "nats", "bare")
    return sum(v for k, v in cpu_us_per_run.items() if k in kinds)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rates", default="200,1000")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--herd", type=int, default=20_000)
    parser.add_argument("--executors", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--max-in-flight", type=int, default=256)
    parser.add_argument("--executor-processes", type=int, default=1)
    parser.add_argument("--settings", default="fast,durable")
    parser.add_argument("--tracing", default="off")
    parser.add_argument("--clients-only", action="store_true")
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="one more setting of every service (repeatable), e.g. SUNDIAL_TENANT_WINDOW=512",
    )
    parser.add_argument(
        "--no-bare",
        dest="bare",
        action="store_false",
        help="skip the bare-pipeline reference (bench_bare.py) before each herd",
    )
    parser.add_argument(
        "--days-kept",
        type=int,
        default=30,
        help=(
            "daily run partitions made before the runs, for the days before today a "
            "deployment keeps (SUNDIAL_RETENTION_DAYS, 30); 0: only those the scheduler "
            "makes"
        ),
    )
    parser.add_argument(
        "--bare-writes",
        default="seed,sundial,rows",
        help=(
            "the bare pipelines run before each herd: seed (the seed's two tables), "
            "sundial (the same loop writing what Sundial writes per run, on copies of "
            "its tables) and rows (those writes on the tables' primary keys alone)"
        ),
    )
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        metavar="DIR",
        help="sample the executor and scheduler with py-spy over each herd into DIR",
    )
    parser.add_argument("--json", action="store_true")
    # Internal: the target process, and one plain client's process.
    parser.add_argument("--serve-target", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--client", nargs=2, metavar=("NAME", "URL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.rates = [int(r) for r in args.rates.split(",") if r]
    args.settings = [x for x in args.settings.split(",") if x]
    args.bare_writes = [x for x in args.bare_writes.split(",") if x]
    if unknown := set(args.bare_writes) - {"seed", *BARE_WRITES}:
        parser.error(f"--bare-writes: unknown {', '.join(sorted(unknown))} (seed, sundial, rows)")
    args.tracing = [x for x in args.tracing.split(",") if x]
    if not set(args.tracing) <= {"off", "on"}:
        parser.error("--tracing: a list of off and on")
    if not set(args.settings) <= {"fast", "durable"}:
        parser.error("--settings: a list of fast and durable")
    return args


if __name__ == "__main__":
    options = parse_args()
    if options.serve_target:
        with contextlib.suppress(KeyboardInterrupt):
            _run(_serve_target, use_uvloop=importlib.util.find_spec("uvloop") is not None)
        raise SystemExit(0)
    if options.client:
        client_name, client_url = options.client
        _, function, uvloop_wanted = CLIENTS[client_name]
        rate = _run(lambda: function(client_url, options.concurrency), use_uvloop=uvloop_wanted)
        print(rate, flush=True)
        raise SystemExit(0)
    figures = asyncio.run(main(options))
    if options.json:
        json.dump(figures, sys.stdout, indent=2, default=str)
        print()
    else:
        report(figures, options)
