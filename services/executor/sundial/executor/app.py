"""Composition root of the executor service.

bus + ledger channel -> ledger client -> runner (HTTP/gRPC callers, breaker) ->
in-flight registry -> heartbeat, completer, consumer -> health-only gRPC server. Every
part is built here from the one :class:`ExecutorConfig` and shares one clock.

Start order (stop is the reverse): heartbeat and completer first, so they exist for the
whole life of every run; the consumer last, so on SIGTERM it stops fetching first and
waits for in-flight runs while outcomes can still be reported and leases extended.
"""

from __future__ import annotations

import contextlib
import secrets

from sundial.core.bus import connect_bus, nats_dependency
from sundial.core.clock import Clock, SystemClock
from sundial.core.grpc import build_server
from sundial.core.service import Service
from sundial.core.tls import ROUND_ROBIN, dial
from sundial.executor.completer import Completer
from sundial.executor.config import ExecutorConfig
from sundial.executor.consumer import Consumer
from sundial.executor.heartbeat import Heartbeat
from sundial.executor.inflight import InFlight
from sundial.executor.ledger import LedgerClient
from sundial.executor.pacing import Pacer
from sundial.executor.runner import Runner
from sundial.internal.v1 import ledger_pb2_grpc
from sundial.targets import AddressPolicy, CircuitBreaker, GrpcCaller, HttpCaller

# Keepalive on the ledger channel: a ping every 10 s, the connection declared dead when
# one goes unanswered for 5 s, also while no call is open. Without it a ledger host that
# vanished without closing TCP (power loss, a partition, a NAT dropping the flow) leaves
# the channel "READY" for the kernel's TCP timeout (minutes): LeaseRuns and CompleteRuns
# would only notice by their deadlines, and the Heartbeat stream never. The scheduler's
# server accepts pings this often (sundial.core.grpc.build_server).
LEDGER_CHANNEL_OPTIONS: tuple[tuple[str, int | str], ...] = (
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
    # Keep pinging however long no data flows (the default stops after 2 pings).
    ("grpc.http2.max_pings_without_data", 0),
    # Every address of the ledger (a name resolving to each scheduler, or a list): each
    # call, and each (re)opened heartbeat stream, goes to the next connected one, so a
    # frozen or lost scheduler costs a retry, not the leases held through it.
    ROUND_ROBIN,
)


def executor_id(config: ExecutorConfig) -> str:
    """This process's id at the ledger: node id plus a per-start random suffix."""
    return f"{config.node_id}/{secrets.token_hex(4)}"[:128]


async def build(config: ExecutorConfig, *, clock: Clock | None = None) -> Service:
    """Start the server (NOT_SERVING), wait for NATS and build the executor's graph.

    Args:
        config: The executor's configuration.
        clock: The time every part reads (the system clock if None).
    """
    clock = clock or SystemClock()
    # Listening first: health answers NOT_SERVING while NATS is waited for.
    server = build_server(config, services=[], service_names=())
    async with contextlib.AsyncExitStack() as resources:
        resources.push_async_callback(server.stop, 0.0)
        await server.start()
        bus = await nats_dependency(config).wait(
            lambda: connect_bus(config, name=f"sundial-executor-{config.node_id}")
        )
        resources.push_async_callback(bus.close)
        # The channel connects lazily and reconnects by itself; the ledger may start later.
        # TLS files are read here, once: a missing or unreadable one fails the start.
        ledger_channel = dial(
            config.ledger_target, config.ledger_channel_tls, LEDGER_CHANNEL_OPTIONS
        )
        resources.push_async_callback(ledger_channel.close)
        ledger = LedgerClient(
            ledger_pb2_grpc.RunLedgerServiceStub(ledger_channel),
            config,
            executor_id=executor_id(config),
            token=config.ledger_token,
            clock=clock,
        )
        policy = AddressPolicy(
            allow_loopback=config.allow_loopback_targets,
            allow_private=config.allow_private_targets,
            resolver=config.resolver(),
        )
        http = HttpCaller(policy, max_connections=config.http_max_connections, clock=clock)
        resources.push_async_callback(http.aclose)
        grpc_caller = GrpcCaller(policy, clock=clock)
        resources.push_async_callback(grpc_caller.aclose)
        breaker = CircuitBreaker(
            failures=config.breaker_failures, open_s=config.breaker_open_s, clock=clock
        )
        runner = Runner(
            http,
            grpc_caller,
            breaker,
            clock=clock,
            tenant_attribute=config.metrics_tenant_attribute,
        )
        completer = Completer(config, ledger, clock=clock)
        pacer = Pacer(config.pace_lag_ms / 1000)
        inflight = InFlight(config, runner, completer.submit, clock=clock, pacer=pacer)
        heartbeat = Heartbeat(config, ledger, inflight, clock=clock)
        consumer = Consumer(
            config, bus.jetstream, ledger, inflight, submit=completer.submit, clock=clock
        )
        return Service(
            "executor",
            server=server,
            components=[heartbeat, completer, consumer, pacer],
            grace_period_s=config.grace_period_s,
            resources=resources.pop_all(),
        )
    raise AssertionError("unreachable")  # the with block returns or raises
