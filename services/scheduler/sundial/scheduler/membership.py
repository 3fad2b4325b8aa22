"""Cluster membership and partition ownership through etcd (docs/design.md section 6).

Each scheduler holds one etcd lease (TTL ``lease_ttl_s``, kept alive every third of it)
and registers ``/sundial/<cluster>/members/<node>`` under it. Partition ``p`` belongs to
the live member with the highest rendezvous hash of (member, p); a member takes ``p`` by
creating ``/sundial/<cluster>/partitions/<p>`` bound to its lease only if the key is absent,
and deletes the keys of partitions no longer assigned to it. Joins and departures are
seen through a watch on the cluster prefix (plus a periodic reconcile as a backstop), and
move only the joining or leaving member's share.

Safety does not rest on etcd (PostgreSQL row locks and the run-key primary key do that),
but a member stops dispatching as soon as its lease may have expired: :meth:`owned` is
empty once the last confirmed keep-alive is older than the TTL, measured on the monotonic
clock, so a process frozen by SIGSTOP or cut off from etcd gives up its partitions
without having to talk to anyone.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import Callable

import aetcd
import aetcd.exceptions
import grpc
from opentelemetry import metrics

from sundial.core.partition import PARTITION_COUNT
from sundial.core.telemetry import PARTITION_CHANGES, PARTITIONS_OWNED
from sundial.scheduler.config import SchedulerConfig

log = logging.getLogger(__name__)

# aetcd maps some gRPC codes to ClientError subclasses and re-raises the others as is.
_ETCD_ERRORS = (aetcd.exceptions.ClientError, grpc.aio.AioRpcError, OSError, TimeoutError)


def rendezvous_owner(members: list[str], partition: int) -> str | None:
    """The member with the highest hash of (member, partition); None without members."""
    best: tuple[int, str] | None = None
    for member in members:
        digest = hashlib.blake2b(f"{member}\x00{partition}".encode(), digest_size=8).digest()
        score = (int.from_bytes(digest, "big"), member)
        if best is None or score > best:
            best = score
    return best[1] if best else None


def assignment(members: list[str], me: str) -> frozenset[int]:
    """The partitions rendezvous hashing assigns to ``me`` among ``members``."""
    return frozenset(p for p in range(PARTITION_COUNT) if rendezvous_owner(members, p) == me)


class Membership:
    """Lifecycle component keeping this scheduler's lease, member key and partitions.

    Args:
        etcd: A connected client.
        config: ``cluster``, ``node_id``, ``lease_ttl_s``, ``membership_poll_s``.
        monotonic: The monotonic clock (tests may pass their own).
        meter: Where the ``sundial.partitions.owned`` gauge and the
            ``sundial.partitions.changes`` counter go (default: global).
    """

    name = "membership"

    def __init__(
        self,
        etcd: aetcd.Client,
        config: SchedulerConfig,
        monotonic: Callable[[], float] = time.monotonic,
        *,
        meter: metrics.Meter | None = None,
    ) -> None:
        self._etcd = etcd
        self._config = config
        self._monotonic = monotonic
        self.node_id = config.node_id
        self.prefix = f"/sundial/{config.cluster}/"
        self._members_prefix = f"{self.prefix}members/"
        self._partitions_prefix = f"{self.prefix}partitions/"
        self._lease: aetcd.leases.Lease | None = None
        self._valid_until = 0.0
        self._owned: frozenset[int] = frozenset()
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._rejoin = asyncio.Event()
        self._stale_lease: aetcd.leases.Lease | None = None
        meter = meter or metrics.get_meter("sundial.scheduler")
        self._changes = meter.create_counter(
            PARTITION_CHANGES,
            unit="{partition}",
            description="Partitions taken (acquired) or given up (released, lost)",
        )
        meter.create_observable_gauge(
            PARTITIONS_OWNED,
            callbacks=[lambda _options: [metrics.Observation(len(self.owned()))]],
            unit="{partition}",
            description="Partitions this scheduler owns (may dispatch) now",
        )

    # --- what others ask ------------------------------------------------------------

    def owned(self) -> frozenset[int]:
        """Partitions this member may dispatch now; empty once the lease may be gone."""
        if self._lease is None or self._monotonic() >= self._valid_until:
            return frozenset()
        return self._owned

    def _set_owned(self, owned: frozenset[int], *, lost: bool = False) -> None:
        """Own ``owned`` from now on, counting the partitions taken and given up."""
        taken, given_up = len(owned - self._owned), len(self._owned - owned)
        self._owned = owned
        if taken:
            self._changes.add(taken, {"change": "acquired"})
        if given_up:
            self._changes.add(given_up, {"change": "lost" if lost else "released"})

    def member_key(self, node_id: str | None = None) -> bytes:
        return f"{self._members_prefix}{node_id or self.node_id}".encode()

    def partition_key(self, partition: int) -> bytes:
        return f"{self._partitions_prefix}{partition}".encode()

    # --- lifecycle ------------------------------------------------------------------

    async def run(self, started: Callable[[], None]) -> None:
        """Join, take the assigned partitions, then keep everything current until stopped."""
        await self._join()
        await self.reconcile()
        started()
        tasks = [
            asyncio.create_task(self._keep_alive(), name="membership-keepalive"),
            asyncio.create_task(self._watch(), name="membership-watch"),
            asyncio.create_task(self._reconcile_loop(), name="membership-reconcile"),
        ]
        stopping = asyncio.create_task(self._stopping.wait(), name="membership-stop")
        try:
            # Supervised: a background task that ends on its own (a bug, an error none of
            # them expects) crashes the component, so the lifecycle stops the app and it
            # is restarted, instead of running on with ownership never kept current.
            done, _ = await asyncio.wait([stopping, *tasks], return_when=asyncio.FIRST_COMPLETED)
            for task in tasks:
                if task in done:
                    exc = task.exception()
                    log.error(
                        "membership task %s ended unexpectedly: %r",
                        task.get_name(),
                        exc,
                        extra={"action": "membership.crashed", "node_id": self.node_id},
                    )
                    raise exc or RuntimeError(f"{task.get_name()} returned")
        finally:
            stopping.cancel()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self._leave()

    async def stop(self) -> None:
        """Leave the cluster: revoke the lease so others take the partitions at once."""
        self._stopping.set()

    # --- internals ------------------------------------------------------------------

    async def _join(self) -> None:
        ttl = self._config.lease_ttl_s
        sent = self._monotonic()
        lease = await self._etcd.lease(ttl)
        await self._etcd.put(self.member_key(), self.node_id.encode(), lease=lease)
        self._lease = lease
        self._valid_until = sent + lease.ttl
        log.info(
            "joined cluster %s as %s (lease %x)",
            self._config.cluster,
            self.node_id,
            lease.id,
            extra={"action": "membership.join", "node_id": self.node_id},
        )

    async def _leave(self) -> None:
        owned = self._owned
        self._set_owned(frozenset())
        lease, self._lease = self._lease, None
        if lease is None:
            return
        try:
            await lease.revoke()
        except _ETCD_ERRORS as exc:
            # The keys go when the TTL runs out instead.
            log.warning("could not revoke lease: %s", exc, extra={"action": "membership.leave"})
        log.info(
            "left cluster, released %d partitions",
            len(owned),
            extra={"action": "membership.leave", "node_id": self.node_id},
        )

    def _lose(self, reason: str) -> None:
        # Logged whether or not partitions are still held: a reconcile may have released
        # them all just before (a process resumed from a freeze sees others holding its
        # partitions first), and the operator still needs to know the lease was lost.
        log.warning(
            "lease lost (%s): giving up %d partitions",
            reason,
            len(self._owned),
            extra={"action": "membership.lost", "node_id": self.node_id},
        )
        self._set_owned(frozenset(), lost=True)
        if self._lease is not None:
            self._stale_lease = self._lease
        self._lease = None
        self._rejoin.set()
        self._wake.set()

    async def _keep_alive(self) -> None:
        interval = self._config.lease_ttl_s / 3
        while True:
            lease = self._lease
            if lease is None:
                stale, self._stale_lease = self._stale_lease, None
                if stale is not None:
                    # If etcd still holds it (we only feared it expired), revoking frees
                    # our old partition keys now instead of a TTL later.
                    with contextlib.suppress(*_ETCD_ERRORS):
                        await stale.revoke()
                try:
                    await self._join()
                    self._rejoin.clear()
                    self._wake.set()
                except _ETCD_ERRORS as exc:
                    log.warning("rejoin failed: %s", exc, extra={"action": "membership.join"})
                await asyncio.sleep(interval)
                continue
            sent = self._monotonic()
            try:
                async with asyncio.timeout(interval):
                    reply = await lease.refresh()
            except _ETCD_ERRORS as exc:
                log.warning("keep-alive failed: %s", exc, extra={"action": "membership.keepalive"})
            else:
                if reply is None or reply.TTL <= 0:
                    self._lose("etcd says the lease expired")
                    continue
                self._valid_until = sent + reply.TTL
            if self._monotonic() >= self._valid_until and self._lease is not None:
                # Unreachable past the TTL: the keys are gone by now; start over.
                self._lose("no keep-alive within the TTL")
                continue
            await asyncio.sleep(interval)

    async def _watch(self) -> None:
        while True:
            watch = None
            try:
                watch = await self._etcd.watch_prefix(self.prefix.encode())
                async for _event in watch:
                    self._wake.set()
            except _ETCD_ERRORS as exc:
                log.debug("watch ended: %s", exc, extra={"action": "membership.watch"})
            finally:
                if watch is not None:
                    with contextlib.suppress(*_ETCD_ERRORS):
                        await watch.cancel()
            await asyncio.sleep(1.0)

    async def _reconcile_loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._config.membership_poll_s):
                    await self._wake.wait()
            self._wake.clear()
            try:
                await self.reconcile()
            except _ETCD_ERRORS as exc:
                log.warning("reconcile failed: %s", exc, extra={"action": "membership.reconcile"})

    async def reconcile(self) -> None:
        """Release partitions no longer assigned to this member, take the assigned free ones."""
        lease = self._lease
        if lease is None or self._monotonic() >= self._valid_until:
            return
        members = sorted(
            kv.key.decode().removeprefix(self._members_prefix)
            for kv in await self._etcd.get_prefix(self._members_prefix.encode())
        )
        if self.node_id not in members:
            # Our member key is gone, so our lease is too.
            self._lose("member key missing")
            return
        assigned = assignment(members, self.node_id)
        before = self._owned
        holders: dict[int, tuple[str, int]] = {}
        for kv in await self._etcd.get_prefix(self._partitions_prefix.encode()):
            name = kv.key.decode().removeprefix(self._partitions_prefix)
            if not name.isdigit() or int(name) >= PARTITION_COUNT:
                # Not ours to interpret (an operator's key, another version's layout).
                log.warning(
                    "ignoring unexpected key %s",
                    kv.key.decode(),
                    extra={"action": "membership.reconcile", "node_id": self.node_id},
                )
                continue
            holders[int(name)] = (kv.value.decode(), kv.lease)
        mine = {
            p for p, (node, held) in holders.items() if node == self.node_id and held == lease.id
        }
        to_release = mine - assigned
        if to_release:
            # Stop dispatching them before anyone else can take them.
            self._set_owned(frozenset(mine - to_release))
            for partition in sorted(to_release):
                tx = self._etcd.transactions
                await self._etcd.transaction(
                    compare=[tx.value(self.partition_key(partition)) == self.node_id.encode()],
                    success=[tx.delete(self.partition_key(partition))],
                    failure=[],
                )
            mine -= to_release
        free = sorted(p for p in assigned - mine if p not in holders)

        async def take(partition: int) -> int | None:
            key = self.partition_key(partition)
            tx = self._etcd.transactions
            ok, _ = await self._etcd.transaction(
                compare=[tx.create(key) == 0],
                success=[tx.put(key, self.node_id.encode(), lease=lease)],
                failure=[],
            )
            return partition if ok else None

        taken = await asyncio.gather(*(take(p) for p in free))
        mine |= {p for p in taken if p is not None}
        if self._lease is lease:
            self._set_owned(frozenset(mine))
            if self._owned != before:
                log.info(
                    "owning %d partitions (%d members)",
                    len(mine),
                    len(members),
                    extra={"action": "membership.rebalance", "node_id": self.node_id},
                )
