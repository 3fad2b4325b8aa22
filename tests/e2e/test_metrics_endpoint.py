"""Every service serves Prometheus metrics at ``SUNDIAL_METRICS_LISTEN`` (the OpenTelemetry
Prometheus exporter), with or without OTLP: a scrape during an e2e run finds the outcome
counter equal to the runs that succeeded, the executor's gauges, and the version."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import socket
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from sundial.core.partition import PARTITION_COUNT
from sundial.core.telemetry import service_version
from sundial.devstack import Stack, free_port
from sundial.devstack._services import SERVICE_NAMES
from tests.e2e.test_executor_processes import one_time_jobs, succeeded
from tests.e2e.test_wait_for_dependencies import _run
from tests.helpers.cluster import Cluster, running_cluster
from tests.helpers.eventually import assert_eventually
from tests.helpers.target_server import RecordingTarget

pytestmark = pytest.mark.timeout(120)

RUNS = 5


@dataclass
class Scraped:
    cluster: Cluster
    metrics_ports: dict[str, int]


def free_ports_in_a_row(count: int) -> int:
    """The first of ``count`` consecutive loopback ports that are free now."""
    while True:
        first = free_port()
        with contextlib.ExitStack() as held:
            try:
                for port in range(first + 1, first + count):
                    sock = held.enter_context(socket.socket())
                    sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        return first


def metrics_env(
    executor_processes: int = 1, service_env: dict[str, dict[str, str]] | None = None
) -> tuple[dict[str, int], dict[str, dict[str, str]]]:
    """Each service's /metrics port on loopback (an executor of N workers: N ports in a
    row) and the variables that give it, by service, with ``service_env`` added."""
    ports = {
        name: free_ports_in_a_row(executor_processes if name == "executor" else 1)
        for name in SERVICE_NAMES
    }
    own_env = {
        name: {
            **(service_env or {}).get(name, {}),
            "SUNDIAL_METRICS_LISTEN": f"127.0.0.1:{ports[name]}",
        }
        for name in SERVICE_NAMES
    }
    own_env["executor"]["SUNDIAL_EXECUTOR_PROCESSES"] = str(executor_processes)
    return ports, own_env


@contextlib.asynccontextmanager
async def metrics_cluster(
    stack: Stack,
    database_url: str,
    log_dir: Path,
    *,
    executor_processes: int = 1,
    service_env: dict[str, dict[str, str]] | None = None,
) -> AsyncIterator[Scraped]:
    """API, scheduler and executor, each serving /metrics on a loopback port of its own
    (see :func:`metrics_env`); ``service_env`` adds variables per service."""
    ports, own_env = metrics_env(executor_processes, service_env)
    async with running_cluster(stack, database_url, log_dir, env_by_service=own_env) as cluster:
        yield Scraped(cluster, ports)


@pytest.fixture
async def scraped(
    stack: Stack, migrated_database_url: str, tmp_path: Path
) -> AsyncIterator[Scraped]:
    # Every service also names an OTLP collector (nothing listens there): /metrics works
    # either way, and the exits' flush of spans and metrics gives up in time.
    otlp = {"SUNDIAL_OTLP_ENDPOINT": f"http://127.0.0.1:{free_port()}"}
    async with metrics_cluster(
        stack,
        migrated_database_url,
        tmp_path,
        service_env={"api": otlp, "scheduler": otlp, "executor": otlp},
    ) as running:
        yield running


def scrape(port: int) -> list[Sample]:
    """Every sample at http://127.0.0.1:<port>/metrics (no proxy)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        text = answer.read().decode()
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def value(samples: list[Sample], name: str, **labels: str) -> float | None:
    found = [s.value for s in samples if s.name == name and labels.items() <= s.labels.items()]
    return sum(found) if found else None


async def test_each_service_serves_metrics_counting_the_succeeded_runs(
    scraped: Scraped, target: RecordingTarget
) -> None:
    ports = scraped.metrics_ports
    tenant = await scraped.cluster.tenant()
    jobs = await one_time_jobs(tenant, f"{target.url}/ok", RUNS)
    runs = await assert_eventually(lambda: succeeded(tenant, jobs), timeout_s=40, interval_s=0.5)
    assert len(runs) == RUNS

    def counted() -> list[Sample]:
        samples = scrape(ports["scheduler"])
        completed = value(samples, "sundial_runs_completed_total", outcome="succeeded")
        assert completed == RUNS, f"succeeded counter {completed}, want {RUNS}"
        return samples

    scheduler = await assert_eventually(counted, timeout_s=20, interval_s=0.2)
    assert value(scheduler, "sundial_runs_completed_total", outcome="dead") is None
    assert value(scheduler, "sundial_partitions_owned") == PARTITION_COUNT
    # The only scheduler took every partition once, and gave none up.
    assert value(scheduler, "sundial_partitions_changes_total", change="acquired") == (
        PARTITION_COUNT
    )
    assert value(scheduler, "sundial_partitions_changes_total", change="released") is None
    # Every run dispatched: nothing due is left waiting.
    assert value(scheduler, "sundial_dispatch_lag_seconds") == 0
    assert value(scheduler, "sundial_occurrences_skipped_total") is None
    # The dispatch histogram: one observation per run published at dispatch. A run whose
    # tenant's admission lock another dispatch worker held (the two claimed jobs of
    # this tenant at once) waits instead and is admitted by the sweeper: held once,
    # admitted once, not in the histogram.
    published = value(scheduler, "sundial_dispatch_lateness_seconds_count") or 0
    held = value(scheduler, "sundial_runs_held_total") or 0
    admitted = value(scheduler, "sundial_runs_admitted_total") or 0
    assert (published, held) == (RUNS - admitted, admitted), (published, held, admitted)
    # Each run started once, on time (the jobs' SLO starts; the default 60 s threshold).
    assert value(scheduler, "sundial_occurrences_started_total", outcome="on_time") == RUNS
    assert value(scheduler, "sundial_occurrences_started_total", outcome="late") is None

    def drained() -> tuple[list[Sample], list[Sample]]:
        # Both read the backlog every few seconds: every message acknowledged by now.
        scheduler, executor = scrape(ports["scheduler"]), scrape(ports["executor"])
        assert value(scheduler, "sundial_stream_messages", stream="SUNDIAL_RUNS") == 0
        assert value(scheduler, "sundial_stream_messages", stream="SUNDIAL_DEAD") == 0
        assert value(executor, "sundial_consumer_pending") == 0
        assert value(executor, "sundial_consumer_ack_pending") == 0
        return scheduler, executor

    scheduler, executor = await assert_eventually(drained, timeout_s=20, interval_s=0.5)
    assert value(executor, "sundial_executor_in_flight") == 0
    assert value(executor, "sundial_executor_free_slots") is not None
    assert value(executor, "sundial_target_duration_seconds_count", outcome="succeeded") == RUNS
    assert value(executor, "sundial_run_start_lateness_seconds_count") == RUNS

    version = service_version()
    api = await asyncio.to_thread(scrape, ports["api"])
    # RPC latency by method and status: the test's own CreateJob calls on the API, the
    # executors' LeaseRuns on the ledger.
    created = value(
        api,
        "rpc_server_duration_seconds_count",
        rpc_service="sundial.v1.JobService",
        rpc_method="CreateJob",
        rpc_grpc_status_code="0",
    )
    assert created is not None and created >= RUNS
    assert value(
        scheduler,
        "rpc_server_duration_seconds_count",
        rpc_service="sundial.internal.v1.RunLedgerService",
        rpc_method="LeaseRuns",
    )
    for name, samples in (("api", api), ("scheduler", scheduler), ("executor", executor)):
        [info] = [s for s in samples if s.name == "target_info"]
        assert info.labels["service_name"] == f"sundial-{name}"
        assert info.labels["service_version"] == version
        assert value(samples, "sundial_build_info", version=version) == 1
    # No tenant attribute unless the operator asks for one.
    assert not [s for s in scheduler + executor if "tenant" in s.labels]


async def test_an_operator_who_opts_in_gets_the_run_metrics_by_tenant(
    stack: Stack, migrated_database_url: str, tmp_path: Path, target: RecordingTarget
) -> None:
    by_tenant = {"SUNDIAL_METRICS_TENANT_ATTRIBUTE": "true"}
    async with metrics_cluster(
        stack,
        migrated_database_url,
        tmp_path,
        service_env={"scheduler": by_tenant, "executor": by_tenant},
    ) as running:
        ports = running.metrics_ports
        tenants = [await running.cluster.tenant() for _ in range(2)]
        for count, tenant in enumerate(tenants, start=1):
            jobs = await one_time_jobs(tenant, f"{target.url}/ok", count)
            await assert_eventually(
                functools.partial(succeeded, tenant, jobs), timeout_s=40, interval_s=0.5
            )

        def counted() -> None:
            scheduler, executor = scrape(ports["scheduler"]), scrape(ports["executor"])
            for count, tenant in enumerate(tenants, start=1):
                tid = tenant.tenant_id
                assert value(scheduler, "sundial_runs_completed_total", tenant=tid) == count
                assert value(scheduler, "sundial_occurrences_started_total", tenant=tid) == count
                assert value(executor, "sundial_target_duration_seconds_count", tenant=tid) == count
                assert value(executor, "sundial_run_start_lateness_seconds_count", tenant=tid) == (
                    count
                )

        await assert_eventually(counted, timeout_s=20, interval_s=0.2)


async def test_each_executor_worker_serves_its_own_metrics_at_the_port_plus_its_index(
    stack: Stack, migrated_database_url: str, tmp_path: Path, target: RecordingTarget
) -> None:
    workers = 2
    async with metrics_cluster(
        stack, migrated_database_url, tmp_path, executor_processes=workers
    ) as running:
        base = running.metrics_ports["executor"]
        tenant = await running.cluster.tenant()
        jobs = await one_time_jobs(tenant, f"{target.url}/ok", RUNS)
        await assert_eventually(lambda: succeeded(tenant, jobs), timeout_s=40, interval_s=0.5)

        def per_worker() -> list[list[Sample]]:
            scrapes = [scrape(base + i) for i in range(workers)]
            calls = [
                value(s, "sundial_target_duration_seconds_count", outcome="succeeded") or 0
                for s in scrapes
            ]
            assert sum(calls) == RUNS, f"target calls per worker {calls}, want {RUNS} in all"
            return scrapes

        scrapes = await assert_eventually(per_worker, timeout_s=20, interval_s=0.2)
        for samples in scrapes:
            assert value(samples, "sundial_executor_in_flight") == 0
            [info] = [s for s in samples if s.name == "target_info"]
            assert info.labels["service_name"] == "sundial-executor"


def test_a_metrics_port_already_taken_ends_the_start_with_1_and_says_so(stack: Stack) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _run("api", {**stack.env("api"), "SUNDIAL_METRICS_LISTEN": f"127.0.0.1:{port}"})
    assert result.returncode == 1, result.stderr
    assert "cannot serve /metrics" in result.stderr
    assert "Traceback" not in result.stderr
