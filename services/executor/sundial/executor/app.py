"""Composition root of the executor service.

bus + ledger channel -> runner (HTTP/gRPC callers, breaker) -> in-flight registry ->
heartbeat, completer, consumer -> health-only gRPC server.

Start order (stop is the reverse): heartbeat and completer first, so they exist for the
whole life of every run; the consumer last, so on SIGTERM it stops fetching first and
waits for in-flight runs while outcomes can still be reported and leases extended.
"""

from __future__ import annotations

import contextlib
import secrets

import grpc

from sundial.core.bus import connect_bus
from sundial.core.grpc import build_server
from sundial.core.service import Service
from sundial.executor.completer import Completer
from sundial.executor.config import ExecutorConfig
from sundial.executor.consumer import Consumer
from sundial.executor.heartbeat import Heartbeat
from sundial.executor.inflight import InFlight
from sundial.executor.runner import Runner
from sundial.executor.targets import AddressPolicy, CircuitBreaker, GrpcCaller, HttpCaller
from sundial.v1 import ledger_pb2_grpc

# Keepalive on the ledger channel: a ping every 10 s, the connection declared dead when
# one goes unanswered for 5 s, also while no call is open. Without it a ledger host that
# vanished without closing TCP (power loss, a partition, a NAT dropping the flow) leaves
# the channel "READY" for the kernel's TCP timeout (minutes): LeaseRuns and CompleteRuns
# would only notice by their deadlines, and the Heartbeat stream never. The scheduler's
# server accepts pings this often (sundial.core.grpc.build_server).
LEDGER_CHANNEL_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
    # Keep pinging however long no data flows (the default stops after 2 pings).
    ("grpc.http2.max_pings_without_data", 0),
)


def executor_id(config: ExecutorConfig) -> str:
    """This process's id at the ledger: node id plus a per-start random suffix."""
    return f"{config.node_id}/{secrets.token_hex(4)}"[:128]


async def build(config: ExecutorConfig) -> Service:
    """Connect to NATS and the ledger and build the executor's graph."""
    async with contextlib.AsyncExitStack() as resources:
        bus = await connect_bus(config, name=f"sundial-executor-{config.node_id}")
        resources.push_async_callback(bus.close)
        # The channel connects lazily and reconnects by itself; the ledger may start later.
        ledger_channel = grpc.aio.insecure_channel(
            config.ledger_address, options=list(LEDGER_CHANNEL_OPTIONS)
        )
        resources.push_async_callback(ledger_channel.close)
        stub = ledger_pb2_grpc.RunLedgerStub(ledger_channel)
        policy = AddressPolicy(
            allow_loopback=config.allow_loopback_targets,
            allow_private=config.allow_private_targets,
        )
        http = HttpCaller(policy, max_connections=config.http_max_connections)
        resources.push_async_callback(http.aclose)
        grpc_caller = GrpcCaller(policy)
        resources.push_async_callback(grpc_caller.aclose)
        breaker = CircuitBreaker(failures=config.breaker_failures, open_s=config.breaker_open_s)
        me = executor_id(config)
        completer = Completer(
            stub,
            executor_id=me,
            flush_ms=config.complete_flush_ms,
            batch_size=config.complete_batch_size,
            timeout_s=config.ledger_timeout_s,
        )
        inflight = InFlight(
            Runner(http, grpc_caller, breaker), completer.submit, max_in_flight=config.max_in_flight
        )
        heartbeat = Heartbeat(
            stub,
            inflight,
            executor_id=me,
            interval_s=config.heartbeat_interval_s,
            lease_ttl_s=config.run_lease_s,
        )
        consumer = Consumer(
            bus.jetstream,
            stub,
            inflight,
            executor_id=me,
            durable=config.consumer_name,
            fetch_batch=config.fetch_batch,
            ack_wait_s=config.ack_wait_s,
            lease_ttl_s=config.run_lease_s,
            ledger_timeout_s=config.ledger_timeout_s,
            capacity_retry_s=config.capacity_retry_s,
            pipeline=config.lease_pipeline,
            submit=completer.submit,
        )
        server = build_server(config, services=[], service_names=())
        return Service(
            "executor",
            server=server,
            components=[heartbeat, completer, consumer],
            grace_period_s=config.grace_period_s,
            resources=resources.pop_all(),
        )
    raise AssertionError("unreachable")  # the with block returns or raises
