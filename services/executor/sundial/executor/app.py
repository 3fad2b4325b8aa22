"""Composition root of the executor service: bus, ledger channel -> consumer -> server."""

from __future__ import annotations

import contextlib

import grpc

from sundial.core.bus import connect_bus
from sundial.core.grpc import build_server
from sundial.core.service import Service
from sundial.executor.config import ExecutorConfig


async def build(config: ExecutorConfig) -> Service:
    """Connect to NATS and the ledger and build the executor's graph."""
    async with contextlib.AsyncExitStack() as resources:
        bus = await connect_bus(config, name=f"sundial-executor-{config.node_id}")
        resources.push_async_callback(bus.close)
        # The channel connects lazily and reconnects by itself; the ledger may start later.
        ledger_channel = grpc.aio.insecure_channel(config.ledger_address)
        resources.push_async_callback(ledger_channel.close)
        server = build_server(config, services=[], service_names=())
        return Service(
            "executor",
            server=server,
            grace_period_s=config.grace_period_s,
            resources=resources.pop_all(),
        )
    raise AssertionError("unreachable")  # the with block returns or raises
