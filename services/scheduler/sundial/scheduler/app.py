"""Composition root of the scheduler service.

pool, bus, etcd -> store -> database time -> membership -> stream keeper, maintenance,
dispatcher, sweeper, ledger -> server. Components start in that order (the database's
time first: every later one reads "now" from it; then membership: the others ask it which
partitions are theirs) and stop in reverse, so on SIGTERM the server stops taking RPCs,
dispatch and sweeps finish their batch, and the etcd lease is revoked last, handing the
partitions over at once.
"""

from __future__ import annotations

import contextlib

from sundial.core.auth import Tokens
from sundial.core.bus import Bus, connect_bus, ensure_streams, nats_dependency
from sundial.core.clock import OffsetClock, SystemClock
from sundial.core.coord import connect_etcd, etcd_dependency
from sundial.core.db import close_pool, open_pool
from sundial.core.dbclock import DatabaseTime
from sundial.core.grpc import build_server
from sundial.core.service import Service
from sundial.internal.v1 import ledger_pb2, ledger_pb2_grpc
from sundial.scheduler.config import SchedulerConfig
from sundial.scheduler.dispatcher import Dispatcher
from sundial.scheduler.ledger import LedgerAuthInterceptor, RunLedgerServiceServicer
from sundial.scheduler.maintenance import Maintenance
from sundial.scheduler.membership import Membership
from sundial.scheduler.publisher import RunPublisher
from sundial.scheduler.store import SchedulerStore
from sundial.scheduler.streams import StreamKeeper
from sundial.scheduler.sweeper import Sweeper

SERVICE_NAMES = (ledger_pb2.DESCRIPTOR.services_by_name["RunLedgerService"].full_name,)


async def _connect_bus(config: SchedulerConfig) -> Bus:
    """NATS with the streams in place: one attempt, for the start-up wait to repeat.

    A NATS that just started may accept connections before JetStream answers, so the
    streams are part of the attempt; a failed attempt closes its connection.
    """
    bus = await connect_bus(config, name=f"sundial-scheduler-{config.node_id}")
    try:
        await ensure_streams(
            bus.jetstream,
            replicas=config.stream_replicas,
            dead_letters_per_tenant=config.dead_letters_per_tenant,
        )
    except BaseException:
        with contextlib.suppress(Exception):
            await bus.client.close()
        raise
    return bus


async def build(config: SchedulerConfig) -> Service:
    """Start the server (NOT_SERVING), wait for PostgreSQL, NATS and etcd, and build the
    scheduler's graph."""
    # Listening first: health answers NOT_SERVING while the dependencies are waited for.
    server = build_server(config, services=[], service_names=SERVICE_NAMES)
    async with contextlib.AsyncExitStack() as resources:
        resources.push_async_callback(server.stop, 0.0)
        await server.start()
        # The scheduler takes only transaction-scoped advisory locks and sets nothing per
        # session: skip asyncpg's reset query on every release (a round trip each).
        pool = await open_pool(
            config,
            apply_migrations=config.migrate_on_start,
            application_name=f"sundial-scheduler-{config.node_id}",
            reset_on_release=False,
        )
        resources.push_async_callback(close_pool, pool, config.grace_period_s)
        bus = await nats_dependency(config).wait(lambda: _connect_bus(config))
        resources.push_async_callback(bus.close)
        etcd = await etcd_dependency(config).wait(lambda: connect_etcd(config))
        resources.push_async_callback(etcd.close)

        store = SchedulerStore(pool)
        membership = Membership(etcd, config)
        # Due times and lease deadlines on the database's clock, not this host's.
        clock = OffsetClock()
        database_time = DatabaseTime(pool, clock)
        owned = membership.owned
        streams = StreamKeeper(
            bus.jetstream,
            store,
            owned,
            check_interval_s=config.stream_check_s,
            replicas=config.stream_replicas,
            dead_letters_per_tenant=config.dead_letters_per_tenant,
            clock=clock,
        )
        publisher = RunPublisher(bus.jetstream, config.node_id, streams=streams)
        sweeper = Sweeper(store, publisher, owned, config, clock)
        server.add_services(
            [
                (
                    ledger_pb2_grpc.add_RunLedgerServiceServicer_to_server,
                    RunLedgerServiceServicer(
                        store, bus.jetstream, config, clock, leased=sweeper.runs_leased
                    ),
                )
            ],
            interceptors=[LedgerAuthInterceptor(Tokens(pool, SystemClock()))],
        )
        return Service(
            "scheduler",
            server=server,
            components=[
                database_time,
                membership,
                streams,
                Maintenance(store, owned, config, clock),
                Dispatcher(
                    store, publisher, owned, config, clock, runs_waiting=sweeper.runs_waiting
                ),
                sweeper,
            ],
            grace_period_s=config.grace_period_s,
            resources=resources.pop_all(),
        )
    raise AssertionError("unreachable")  # the with block returns or raises
