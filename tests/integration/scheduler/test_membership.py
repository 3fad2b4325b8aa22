"""Partition ownership through etcd: every partition owned once, hand-over on leave."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable

import aetcd
import pytest
from opentelemetry import metrics
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from sundial.core.coord import connect_etcd
from sundial.core.partition import PARTITION_COUNT
from sundial.core.telemetry import PARTITION_CHANGES
from sundial.devstack import Stack
from sundial.scheduler.membership import Membership, assignment
from tests.helpers.eventually import assert_eventually
from tests.helpers.metrics import counts
from tests.integration.scheduler.conftest import scheduler_config


class Running:
    """Membership components running in this process, each with its own etcd client."""

    def __init__(self, stack: Stack, cluster: str) -> None:
        self.stack = stack
        self.cluster = cluster
        self.members: dict[str, tuple[Membership, asyncio.Task[None], aetcd.Client]] = {}

    async def add(
        self,
        node: str,
        monotonic: Callable[[], float] = time.monotonic,
        meter: metrics.Meter | None = None,
    ) -> Membership:
        config = scheduler_config(
            "postgresql://unused/x", self.stack, cluster=self.cluster, node_id=node
        )
        client = await connect_etcd(config)
        member = Membership(client, config, monotonic, meter=meter)
        ready = asyncio.Event()
        task = asyncio.create_task(member.run(ready.set))
        async with asyncio.timeout(10):
            await ready.wait()
        self.members[node] = (member, task, client)
        return member

    async def remove(self, node: str) -> None:
        member, task, client = self.members.pop(node)
        await member.stop()
        async with asyncio.timeout(10):
            await task
        await client.close()

    async def close(self) -> None:
        for node in list(self.members):
            await self.remove(node)


@pytest.fixture
async def cluster(stack: Stack) -> AsyncIterator[Running]:
    running = Running(stack, f"t{uuid.uuid4().hex[:10]}")
    yield running
    with contextlib.suppress(Exception):
        await running.close()


def check_disjoint_cover(members: list[Membership]) -> None:
    seen: dict[int, str] = {}
    for member in members:
        for partition in member.owned():
            assert partition not in seen, (
                f"{partition} owned by {seen[partition]} and {member.node_id}"
            )
            seen[partition] = member.node_id
    assert len(seen) == PARTITION_COUNT, f"{PARTITION_COUNT - len(seen)} partitions unowned"


def check_assigned(members: list[Membership]) -> None:
    """The members own the partitions rendezvous hashing assigns them. A disjoint cover
    alone can be a moment of a handover (node-0 still holding what node-2 has yet to
    claim)."""
    check_disjoint_cover(members)
    nodes = sorted(m.node_id for m in members)
    for member in members:
        assert member.owned() == assignment(nodes, member.node_id), member.node_id


async def test_three_schedulers_own_all_partitions_once(cluster: Running) -> None:
    members = [await cluster.add(f"node-{i}") for i in range(3)]
    await assert_eventually(lambda: check_assigned(members), timeout_s=15, what="assignment")
    # etcd agrees: one key per partition, each naming its owner.
    client = cluster.members["node-0"][2]
    keys = await client.get_prefix(f"/sundial/{cluster.cluster}/partitions/".encode())
    owners = {int(kv.key.rsplit(b"/", 1)[1]): kv.value.decode() for kv in keys}
    assert len(owners) == PARTITION_COUNT
    for member in members:
        assert {p for p, n in owners.items() if n == member.node_id} == member.owned()


async def test_graceful_leave_hands_partitions_over(cluster: Running) -> None:
    members = [await cluster.add(f"node-{i}") for i in range(3)]
    await assert_eventually(lambda: check_assigned(members), timeout_s=15, what="assignment")
    before = {m.node_id: m.owned() for m in members}
    await cluster.remove("node-2")
    rest = members[:2]
    await assert_eventually(lambda: check_disjoint_cover(rest), timeout_s=5, what="takeover")
    # Rendezvous hashing moves only the leaving member's share.
    for member in rest:
        assert before[member.node_id] <= member.owned()
    joined = await cluster.add("node-3")
    await assert_eventually(lambda: check_disjoint_cover([*rest, joined]), timeout_s=10)


def changes(reader: InMemoryMetricReader) -> dict[str, int]:
    """``sundial.partitions.changes`` so far, by ``change``."""
    return {dict(key)["change"]: value for key, value in counts(reader, PARTITION_CHANGES).items()}


async def test_partitions_taken_and_given_up_are_counted(cluster: Running) -> None:
    readers = {node: InMemoryMetricReader() for node in ("node-0", "node-1")}

    async def add(node: str) -> Membership:
        meter = MeterProvider(metric_readers=[readers[node]]).get_meter("test")
        return await cluster.add(node, meter=meter)

    first = await add("node-0")
    assert changes(readers["node-0"]) == {"acquired": PARTITION_COUNT}
    second = await add("node-1")
    share = len(assignment(["node-0", "node-1"], "node-1"))
    assert 0 < share < PARTITION_COUNT

    def handed_over() -> None:
        check_disjoint_cover([first, second])
        assert len(second.owned()) == share

    await assert_eventually(handed_over, timeout_s=15)
    assert changes(readers["node-0"]) == {"acquired": PARTITION_COUNT, "released": share}
    assert changes(readers["node-1"]) == {"acquired": share}
    await cluster.remove("node-1")
    assert changes(readers["node-1"]) == {"acquired": share, "released": share}
    await assert_eventually(lambda: check_disjoint_cover([first]), timeout_s=10)
    assert changes(readers["node-0"]) == {
        "acquired": PARTITION_COUNT + share,
        "released": share,
    }


async def test_ownership_ends_when_the_lease_may_have_expired(cluster: Running) -> None:
    # Without a confirmed keep-alive for a whole TTL (etcd unreachable, or the process was
    # frozen), the member stops dispatching at once, before talking to anyone.
    skew = [0.0]
    member = await cluster.add("node-0", lambda: time.monotonic() + skew[0])
    assert len(member.owned()) == PARTITION_COUNT
    skew[0] = 3.5  # past the 3 s TTL since the last keep-alive
    assert member.owned() == frozenset()


async def test_a_stray_key_under_the_partitions_prefix_is_ignored(cluster: Running) -> None:
    member = await cluster.add("node-0")
    member_task = cluster.members["node-0"][1]
    client = cluster.members["node-0"][2]
    await client.put(f"/sundial/{cluster.cluster}/partitions/notes".encode(), b"operator")
    await client.put(f"/sundial/{cluster.cluster}/partitions/999".encode(), b"old layout")
    joined = await cluster.add("node-1")

    # Reconciling across the stray keys still splits the partitions between both.
    def split() -> None:
        check_disjoint_cover([member, joined])
        assert member.owned() and joined.owned(), "not rebalanced yet"

    await assert_eventually(split, timeout_s=10, what="rebalance")
    assert not member_task.done()


async def test_a_background_task_that_dies_crashes_the_component(
    cluster: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    member = await cluster.add("node-0")
    task = cluster.members["node-0"][1]

    async def broken() -> None:
        raise RuntimeError("injected reconcile bug")

    # An error none of the loops expects: the reconcile loop ends with it.
    monkeypatch.setattr(member, "reconcile", broken)
    await cluster.add("node-1")  # wakes node-0's reconcile loop through the watch

    def crashed() -> None:
        assert task.done(), "membership still running with a dead reconcile loop"

    await assert_eventually(crashed, timeout_s=10, what="crash")
    with pytest.raises(RuntimeError, match="injected reconcile bug"):
        task.result()
    # It left the cluster on the way out (lease revoked): the other member takes all.
    _, _, client = cluster.members.pop("node-0")
    await client.close()
    await assert_eventually(
        lambda: check_disjoint_cover([cluster.members["node-1"][0]]), timeout_s=10
    )
