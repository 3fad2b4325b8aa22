"""etcd: the client used for partition ownership (membership lives in the scheduler)."""

from __future__ import annotations

import aetcd

from sundial.core.config import EtcdConfig


async def connect_etcd(config: EtcdConfig, *, timeout_s: float = 5.0) -> aetcd.Client:
    """Connect to the first endpoint and check it answers.

    aetcd talks to one endpoint; in production point ``SUNDIAL_ETCD_ENDPOINTS`` at a
    load-balanced address (or the first reachable member).
    """
    endpoint = config.etcd_endpoints[0].split("://", 1)[-1].rstrip("/")
    host, _, port = endpoint.rpartition(":")
    client = aetcd.Client(host=host, port=int(port), timeout=timeout_s)
    await client.connect()
    try:
        await client.status()
    except BaseException:
        await client.close()
        raise
    return client
