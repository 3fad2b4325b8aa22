"""Where ClusterStatus learns about scheduler members: a seam for the etcd reader.

The schedulers own the etcd layout (``/sundial/<cluster>/members/<node>`` and
``/sundial/<cluster>/partitions/<p>``, docs/design.md section 6) and its reader,
:mod:`sundial.core.cluster`. The API depends only on :class:`MembershipSource`:
:class:`EtcdMembership` when ``SUNDIAL_ETCD_ENDPOINTS`` is set, else
:class:`UnconfiguredMembership`, which answers FAILED_PRECONDITION rather than reporting
"no members" (an empty answer would read as "every scheduler is down"). Member details
the etcd keys do not carry yet (address, lease, since, version) are left empty.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from typing import Protocol

import aetcd
import aetcd.exceptions
import asyncpg

from sundial.api.model import ClusterMember, Membership
from sundial.core.cluster import cluster_status
from sundial.core.config import EtcdConfig
from sundial.core.coord import connect_etcd
from sundial.core.errors import FailedPrecondition, Unavailable


class MembershipSource(Protocol):
    """Live scheduler members and partition owners of one cluster."""

    async def membership(self) -> Membership:
        """A snapshot: members ordered by node_id, the owner of each partition (``""``
        when unowned).

        Raises:
            Unavailable: etcd cannot be reached now.
        """
        ...


class UnconfiguredMembership:
    """The API was built without an etcd membership reader."""

    async def membership(self) -> Membership:
        """Always FAILED_PRECONDITION, with what is missing."""
        raise FailedPrecondition(
            "cluster membership is not available from this API server: it has no etcd "
            "membership reader configured"
        )


class EtcdMembership:
    """Membership read from etcd through :func:`sundial.core.cluster.cluster_status`.

    Connects on first use, not at start: the API's data path must never depend on etcd
    being up, only ClusterStatus does (UNAVAILABLE while etcd is away).

    Args:
        etcd: How to reach etcd (the first endpoint is used, as the schedulers do).
        pool: The API's pool (cluster_status also reads the dispatch lag).
        cluster: The cluster name (etcd prefix ``/sundial/<cluster>/``).
        timeout_s: Bound on connecting and on each read.
    """

    def __init__(
        self,
        etcd: EtcdConfig,
        pool: asyncpg.Pool,
        cluster: str,
        *,
        timeout_s: float = 5.0,
    ) -> None:
        self._config = etcd
        self._pool = pool
        self._cluster = cluster
        self._timeout_s = timeout_s
        self._client: aetcd.Client | None = None
        self._lock = asyncio.Lock()

    async def _drop_client(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):  # it is broken already
                await client.close()

    async def membership(self) -> Membership:
        """Members (node ids; owned-partition counts) and the owner of each partition."""
        try:
            async with asyncio.timeout(self._timeout_s):
                async with self._lock:
                    if self._client is None:
                        self._client = await connect_etcd(self._config, timeout_s=self._timeout_s)
                snapshot = await cluster_status(self._client, self._pool, self._cluster)
        except (aetcd.exceptions.ClientError, OSError, TimeoutError) as exc:
            # The next call connects afresh: etcd forgets authentication tokens when it
            # restarts or after five idle minutes, and aetcd never asks for a new one.
            await self._drop_client()
            raise Unavailable(f"cannot read cluster membership from etcd: {exc}") from exc
        owners = dict(enumerate(snapshot.owners))
        owned = Counter(owner for owner in owners.values() if owner)
        members = [
            ClusterMember(
                node_id=node,
                address="",
                partitions_owned=owned.get(node, 0),
                lease_id=0,
                since=None,
                version="",
            )
            for node in snapshot.members
        ]
        return Membership(members, owners)

    async def close(self) -> None:
        """Close the etcd connection, if one was opened."""
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()
