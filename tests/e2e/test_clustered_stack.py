"""The local stack as a real cluster (issue 11, item 7): three etcd members and three
NATS JetStream nodes with the streams at replicas 3, and the services on them.

Losing one member of each (kill -9, the leaders included) costs no occurrence and runs
none twice; a member that comes back rejoins. The etcd client balances over every
member and renews its token when etcd refuses it as stale.
"""

from __future__ import annotations

import asyncio
import itertools
import signal
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import nats
import pytest

from sundial.core.bus import RUNS_STREAM
from sundial.core.coord import CONNECT_ERRORS, EtcdClient, connect_etcd
from sundial.devstack import Stack
from sundial.devstack._etcd import EtcdServer
from sundial.devstack._nats import NatsServer
from sundial.v1 import job_pb2
from tests.e2e.test_executor_runs import SUCCEEDED, every, http_job, runs_with
from tests.e2e.test_lost_stream import scheduled_at
from tests.helpers.cluster import Cluster, running_cluster
from tests.helpers.eventually import assert_eventually
from tests.helpers.stack import in_server_thread, nats_options
from tests.helpers.target_server import RecordingTarget

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


@pytest.fixture(scope="module")
def clustered(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """Three etcd members and three NATS nodes; PostgreSQL is the session's."""
    with Stack(
        cluster_size=3,
        durable=False,
        database_url=stack.database_url,
        data_dir=tmp_path_factory.mktemp("clustered"),
    ) as running:
        yield running


@pytest.fixture
async def etcd(clustered: Stack) -> AsyncIterator[EtcdClient]:
    client = await connect_etcd(clustered.etcd_config())
    yield client
    await client.close()


def kill(server: EtcdServer | NatsServer) -> None:
    assert server.pid is not None
    server._process.proc.send_signal(signal.SIGKILL)  # type: ignore[union-attr]
    server._process.proc.wait(timeout=10)  # type: ignore[union-attr]


async def test_the_etcd_client_survives_losing_any_member(
    clustered: Stack, etcd: EtcdClient
) -> None:
    for member in clustered.etcd_members:
        kill(member)
        try:
            for i in range(20):  # round robin: every member is asked in turn
                key = f"/sundial/test/{uuid.uuid4().hex}".encode()

                async def put_and_get(key: bytes = key, value: bytes = str(i).encode()) -> None:
                    try:
                        await etcd.put(key, value)
                        got = await etcd.get(key)
                    except CONNECT_ERRORS as exc:  # in flight on the lost member, or an election
                        raise AssertionError(f"etcd call failed: {exc!r}") from exc
                    assert got is not None and got.value == value

                await assert_eventually(put_and_get, timeout_s=15, interval_s=0.1)
        finally:
            await in_server_thread(member.start)


async def test_endpoints_given_by_name_are_resolved_and_balanced(clustered: Stack) -> None:
    named = tuple(f"localhost:{member.port}" for member in clustered.etcd_members)
    client = await connect_etcd(replace(clustered.etcd_config(), etcd_endpoints=named))
    try:
        for i in range(6):
            await client.put(b"/sundial/test/named", str(i).encode())
        got = await client.get(b"/sundial/test/named")
        assert got is not None and got.value == b"5"
    finally:
        await client.close()


async def test_a_token_etcd_calls_stale_is_renewed(clustered: Stack, etcd: EtcdClient) -> None:
    """Writers keep writing, over every member, while etcd forgets the token: each of
    their calls succeeds (among them, calls that passed the token check on a member that
    had not applied the change yet, and calls that met a member not yet knowing the new
    token), and the writers share one renewal."""
    await etcd.put(b"/sundial/test/renew", b"before")
    changed = asyncio.Event()
    written_after = 0

    async def write(writer: int) -> None:
        nonlocal written_after
        for i in itertools.count():
            after = changed.is_set()
            await etcd.put(f"/sundial/test/renew/{writer}".encode(), str(i).encode())
            written_after += after
            if written_after >= 30:
                return

    # Setting a user's password (here: the same one again) makes etcd forget every token
    # it issued to that user, as a restarted member forgets simple tokens.
    member = clustered.etcd_members[0]
    user, password = member.user
    async with asyncio.TaskGroup() as writers:
        for writer in range(4):
            writers.create_task(write(writer))
        await asyncio.to_thread(
            member.etcdctl, "user", "passwd", user, "--interactive=false", stdin=password + "\n"
        )
        changed.set()
    await etcd.put(b"/sundial/test/renew", b"after")
    got = await etcd.get(b"/sundial/test/renew")
    assert got is not None and got.value == b"after"
    assert etcd.renewals >= 1


async def test_jobs_run_once_each_while_an_etcd_member_and_a_nats_node_are_lost(
    clustered: Stack, migrated_database_url: str, tmp_path: Path
) -> None:
    async with (
        RecordingTarget() as target,
        running_cluster(clustered, migrated_database_url, tmp_path) as deployment,
    ):
        await exercise_losses(clustered, deployment, target)


async def exercise_losses(stack: Stack, deployment: Cluster, target: RecordingTarget) -> None:
    tenant = await deployment.tenant()
    # Overlapping runs allowed: an occurrence delayed by the loss (a stream leader
    # election takes seconds) must not make the next ones SKIPPED, every one must run.
    job = await tenant.create_job(
        http_job("tick", f"{target.url}/tick", every(1), overlap=job_pb2.OVERLAP_POLICY_ALLOW_ALL)
    )
    await assert_eventually(
        lambda: runs_with(tenant, job.job_id, SUCCEEDED, 2), timeout_s=30, interval_s=0.2
    )
    admin = await nats.connect(**nats_options(stack))
    try:
        info = await admin.jetstream().stream_info(RUNS_STREAM)
        assert info.config.num_replicas == 3
        assert info.cluster is not None and info.cluster.leader is not None
        # The stream's leader and the first etcd member (the etcd leader or not: losing
        # either kind is survived) go down together.
        nats_node = next(
            n for n in stack.nats_nodes if n.cluster and n.cluster.node == info.cluster.leader
        )
        etcd_member = stack.etcd_members[0]
        kill(nats_node)
        kill(etcd_member)
        lost_at = datetime.now(UTC)
        lost = time.monotonic()

        def executed_after_the_loss() -> None:
            later = [
                c
                for c in target.calls_to("/tick")
                if scheduled_at(c.request.headers["sundial-scheduled-at"]) > lost_at
            ]
            assert len(later) >= 3, f"{len(later)} occurrences after the loss executed"

        await assert_eventually(executed_after_the_loss, timeout_s=30, interval_s=0.1)
        print(f"three occurrences ran within {time.monotonic() - lost:.2f} s of the loss")
        await in_server_thread(nats_node.start)
        await in_server_thread(etcd_member.start)

        async def rejoined() -> None:
            info = await admin.jetstream().stream_info(RUNS_STREAM)
            assert info.cluster is not None
            replicas = info.cluster.replicas or []
            assert len(replicas) == 2 and all(r.current for r in replicas), replicas

        await assert_eventually(rejoined, timeout_s=30, interval_s=0.5)
    finally:
        await admin.close()

    horizon = lost_at + timedelta(seconds=5)

    async def all_done() -> None:
        runs = [
            r for r in await tenant.runs(job.job_id) if r.scheduled_at.ToDatetime(UTC) <= horizon
        ]
        assert len(runs) >= 6, f"{len(runs)} runs up to the horizon"
        assert not [(r.run_key, r.status, r.attempt) for r in runs if r.status != SUCCEEDED]

    await assert_eventually(all_done, timeout_s=30, interval_s=0.2)
    keys = target.keys()
    assert len(keys) == len(set(keys)), "an occurrence was called twice"
    runs = await tenant.runs(job.job_id)
    assert len({r.run_key for r in runs}) == len(runs)
    # One row per occurrence, no gap: the interval's occurrences are a second apart.
    times = sorted(r.scheduled_at.ToDatetime(UTC) for r in runs)
    assert all(b - a == timedelta(seconds=1) for a, b in itertools.pairwise(times))
