"""Opening a service's database at start: wait for PostgreSQL, migrate, pool."""

from __future__ import annotations

from collections.abc import Mapping

import asyncpg

from sundial.core.config import DatabaseConfig
from sundial.core.db._migrate import migrate
from sundial.core.db._pool import create_pool, database_dependency


async def open_pool(
    config: DatabaseConfig,
    *,
    apply_migrations: bool,
    application_name: str,
    reset_on_release: bool = True,
    settings: Mapping[str, str] | None = None,
) -> asyncpg.Pool:
    """Wait until PostgreSQL accepts connections, apply pending migrations if asked, and
    return the pool (:func:`~sundial.core.db.create_pool`'s arguments).

    Both steps wait for a PostgreSQL that is not up yet (:func:`database_dependency`);
    anything else (a refused password, a migration conflict) is raised.
    """
    postgres = database_dependency(config)
    if apply_migrations:
        await postgres.wait(lambda: migrate(config.database_url, password=config.database_password))
    return await postgres.wait(
        lambda: create_pool(
            config,
            application_name=application_name,
            reset_on_release=reset_on_release,
            settings=settings,
        )
    )
