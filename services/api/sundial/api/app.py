"""Composition root of the API service: pool -> store -> managers -> servicers -> server."""

from __future__ import annotations

import contextlib
from datetime import timedelta

from sundial.api.admin import AdminServicer
from sundial.api.audit import AuditInterceptor, AuditLog
from sundial.api.auth import AuthInterceptor
from sundial.api.bulk import BulkActions, TimedPauses
from sundial.api.calendars import CalendarManager
from sundial.api.cluster import EtcdMembership, MembershipSource, UnconfiguredMembership
from sundial.api.config import ApiConfig
from sundial.api.egress import EgressPolicies
from sundial.api.flow import FlowLimits
from sundial.api.identity import IdentityKeys
from sundial.api.jobs import JobManager
from sundial.api.notifications import NotificationChannels
from sundial.api.notifier import Notifier
from sundial.api.offload import Offload
from sundial.api.ratelimit import TenantCallGate, TenantRateLimiter
from sundial.api.retention import Retention, RetentionPolicy
from sundial.api.runs import RunManager
from sundial.api.servicer import JobServicer
from sundial.api.store import Store
from sundial.api.tenancy import TenantManager
from sundial.api.validation import TargetGuard, TargetPolicy
from sundial.api.vault import SecretManager
from sundial.api.web import HttpServer, connect_apps, web_app
from sundial.core.auth import Role, Tokens
from sundial.core.clock import Clock, SystemClock
from sundial.core.db import close_pool, open_pool
from sundial.core.grpc import build_server
from sundial.core.lifecycle import Component
from sundial.core.service import Service
from sundial.targets import AddressPolicy
from sundial.v1 import admin_pb2, admin_pb2_grpc, job_service_pb2, job_service_pb2_grpc

SERVICES = (
    job_service_pb2.DESCRIPTOR.services_by_name["JobService"],
    admin_pb2.DESCRIPTOR.services_by_name["AdminService"],
)
SERVICE_NAMES = tuple(service.full_name for service in SERVICES)


async def build(
    config: ApiConfig,
    *,
    clock: Clock | None = None,
    membership: MembershipSource | None = None,
) -> Service:
    """Start the server (NOT_SERVING), wait for PostgreSQL and build the API's graph.

    Args:
        config: The service's configuration.
        clock: The source of "now" (tests pass a manual one); the system clock by default.
        membership: Where ClusterStatus reads scheduler membership; by default etcd
            when ``config.etcd_endpoints`` is set (see :mod:`sundial.api.cluster`).
    """
    clock = clock or SystemClock()
    # Listening first: health answers NOT_SERVING while PostgreSQL is waited for.
    server = build_server(config, services=[], service_names=SERVICE_NAMES)
    async with contextlib.AsyncExitStack() as resources:
        resources.push_async_callback(server.stop, 0.0)
        await server.start()
        # The API never changes session state (no SET, LISTEN, session advisory locks or
        # cursors outside transactions): skip asyncpg's reset round trip per acquire.
        pool = await open_pool(
            config,
            apply_migrations=config.migrate_on_start,
            application_name="sundial-api",
            reset_on_release=False,
            # The operator's default for the trigger that keeps a job's newest revisions
            # (migration 0028); a tenant's own revisions_per_job comes first.
            settings={"sundial.revisions_per_job": str(config.revisions_per_job)},
        )
        resources.push_async_callback(close_pool, pool, config.grace_period_s)
        store = Store(pool)
        retention = timedelta(seconds=config.request_id_retention_s)
        resolver = config.resolver()  # one per process: the tenants' lookup bounds
        operator = TargetPolicy(
            allow_loopback=config.allow_loopback_targets,
            allow_private=config.allow_private_targets,
            resolver=resolver,
        )
        keyring = config.keyring()
        secrets = SecretManager(store, clock, keyring, max_secrets=config.max_secrets)
        identity_keys = IdentityKeys(store, clock, keyring)
        await identity_keys.ensure()
        guard = TargetGuard(
            operator,
            resolve_timeout_s=config.target_resolve_timeout_s,
            secrets=secrets.existing,
        )
        egress = EgressPolicies(store, operator, clock)
        offload = Offload(share=config.tenant_compute_share, burst_s=config.tenant_compute_burst_s)
        resources.callback(offload.close)
        jobs = JobManager(store, guard, egress, clock, request_retention=retention, offload=offload)
        runs = RunManager(
            store,
            clock,
            request_retention=retention,
            max_waiting=config.max_waiting_requested_runs,
            offload=offload,
        )
        bulk = BulkActions(
            store, clock, offload=offload, max_waiting=config.max_waiting_requested_runs
        )
        if membership is None and config.etcd_endpoints:
            etcd_membership = EtcdMembership(config.etcd(), pool, config.cluster)
            resources.push_async_callback(etcd_membership.close)
            membership = etcd_membership
        tenants = TenantManager(
            store,
            clock,
            membership or UnconfiguredMembership(),
            cluster=config.cluster,
            default_max_jobs=config.default_max_jobs,
            default_max_concurrent_runs=config.default_max_concurrent_runs,
            default_fair_weight=config.fair_weight,
        )
        server.add_services(
            [
                (
                    job_service_pb2_grpc.add_JobServiceServicer_to_server,
                    JobServicer(
                        jobs,
                        runs,
                        egress,
                        tenants,
                        AuditLog(pool),
                        calendars=CalendarManager(store, clock, max_calendars=config.max_calendars),
                        channels=NotificationChannels(pool, guard, egress, clock),
                        secrets=secrets,
                        flow=FlowLimits(store, clock, max_limits=config.max_flow_limits),
                        bulk=bulk,
                    ),
                ),
                (
                    admin_pb2_grpc.add_AdminServiceServicer_to_server,
                    AdminServicer(tenants, egress, secrets, identity_keys),
                ),
            ],
            interceptors=[
                AuthInterceptor(
                    Tokens(pool, clock, bootstrap={config.admin_token: Role.ADMIN}),
                    TenantRateLimiter(config.tenant_rate_per_s, config.tenant_rate_burst, clock),
                    TenantCallGate(config.tenant_concurrent_calls),
                ),
                AuditInterceptor(pool, clock),
            ],
        )
        purger = Retention(
            store,
            clock,
            RetentionPolicy(
                requests=retention,
                revisions=timedelta(days=config.revision_retention_days),
                deleted_job_revisions=timedelta(days=config.deleted_job_revision_days),
                audit_events=timedelta(days=config.audit_retention_days),
            ),
            interval_s=config.request_id_purge_interval_s,
        )
        notifier = Notifier(
            pool,
            AddressPolicy(
                allow_loopback=config.allow_loopback_targets,
                allow_private=config.allow_private_targets,
                resolver=resolver,
            ),
            clock,
            interval_s=config.notify_interval_s,
            timeout_s=config.notify_timeout_s,
            concurrency=config.notify_concurrency,
            secrets=secrets.values,
        )
        resumer = TimedPauses(bulk, store, clock, interval_s=config.pause_until_check_s)
        components: list[Component] = [purger, notifier, resumer]
        if config.http_listen:
            # The same servicers over Connect, through the gRPC server's interceptors.
            apps = connect_apps(server, max_bytes=config.max_message_bytes)
            app = web_app(
                apps, SERVICES, cors_origins=config.http_cors_origins, jwks=identity_keys.jwks
            )
            components.append(HttpServer(config, app))
        # Built: hand the resources to the service, which closes them after it stops.
        return Service(
            "api",
            server=server,
            components=components,
            grace_period_s=config.grace_period_s,
            resources=resources.pop_all(),
        )
    raise AssertionError("unreachable")  # the with block returns or raises
