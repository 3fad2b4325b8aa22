"""Composition root of the API service: pool -> store -> servicers -> server."""

from __future__ import annotations

import contextlib

from sundial.api.config import ApiConfig
from sundial.core.db import close_pool, create_pool, migrate
from sundial.core.grpc import build_server
from sundial.core.service import Service
from sundial.v1 import admin_pb2, admin_pb2_grpc, job_service_pb2, job_service_pb2_grpc

SERVICE_NAMES = (
    job_service_pb2.DESCRIPTOR.services_by_name["JobService"].full_name,
    admin_pb2.DESCRIPTOR.services_by_name["AdminService"].full_name,
)


async def build(config: ApiConfig) -> Service:
    """Connect to PostgreSQL and build the API service's graph."""
    if config.migrate_on_start:
        await migrate(config.database_url)
    async with contextlib.AsyncExitStack() as resources:
        pool = await create_pool(config, application_name="sundial-api")
        resources.push_async_callback(close_pool, pool, config.grace_period_s)
        server = build_server(
            config,
            services=[
                (
                    job_service_pb2_grpc.add_JobServiceServicer_to_server,
                    job_service_pb2_grpc.JobServiceServicer(),
                ),
                (
                    admin_pb2_grpc.add_AdminServiceServicer_to_server,
                    admin_pb2_grpc.AdminServiceServicer(),
                ),
            ],
            service_names=SERVICE_NAMES,
        )
        # Built: hand the resources to the service, which closes them after it stops.
        return Service(
            "api",
            server=server,
            grace_period_s=config.grace_period_s,
            resources=resources.pop_all(),
        )
    raise AssertionError("unreachable")  # the with block returns or raises
