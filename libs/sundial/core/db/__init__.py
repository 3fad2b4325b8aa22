"""PostgreSQL access shared by the services: pool, named queries, errors, schema.

- :func:`create_pool` / :func:`close_pool`: the asyncpg pool with Sundial's session
  settings (UTC, statement and idle-in-transaction timeouts) and JSON codecs;
  :func:`open_pool` waits for a PostgreSQL that is not up yet (:func:`database_dependency`),
  migrates and opens the pool, as the services do at start.
- :class:`Queries`: named SQL blocks loaded from a package's ``queries.sql``.
- :class:`translate_db_errors`: asyncpg errors -> :class:`~sundial.core.errors.SundialError`
  by SQLSTATE, at the store boundary.
- :func:`migrate`: forward-only migrations from ``migrations/``, safe from many
  processes at once.
- :func:`ensure_run_partitions` / :func:`drop_run_partitions_before`: daily
  ``job_runs`` partitions.

Only a service's ``store`` module runs SQL; everything else talks to the store.
"""

from sundial.core.db._errors import map_db_error, translate_db_errors
from sundial.core.db._migrate import (
    MIGRATION_LOCK_KEY,
    Migration,
    MigrationError,
    load_migrations,
    migrate,
)
from sundial.core.db._open import open_pool
from sundial.core.db._partitions import (
    drop_run_partitions_before,
    ensure_run_partitions,
    run_partition_name,
)
from sundial.core.db._pool import (
    CONNECT_ERRORS,
    close_pool,
    create_pool,
    database_dependency,
    init_connection,
    json_text,
    session_settings,
)
from sundial.core.db._queries import (
    Queries,
    Query,
    QueryFileError,
    QueryParamsError,
    UnknownQueryError,
)

__all__ = [
    "CONNECT_ERRORS",
    "MIGRATION_LOCK_KEY",
    "Migration",
    "MigrationError",
    "Queries",
    "Query",
    "QueryFileError",
    "QueryParamsError",
    "UnknownQueryError",
    "close_pool",
    "create_pool",
    "database_dependency",
    "drop_run_partitions_before",
    "ensure_run_partitions",
    "init_connection",
    "json_text",
    "load_migrations",
    "map_db_error",
    "migrate",
    "open_pool",
    "run_partition_name",
    "session_settings",
    "translate_db_errors",
]
