"""``sundial migrate``: apply the pending schema migrations, then exit.

What a Kubernetes migrations Job runs (``deploy/k8s/components/migrations``), so the
services can start with ``SUNDIAL_MIGRATE_ON_START=false``. It reads the services'
variables (``SUNDIAL_DATABASE_URL``, ``SUNDIAL_DATABASE_PASSWORD``, ``SUNDIAL_LOG_*``)
and applies migrations exactly as a starting service does (:func:`sundial.core.db.migrate`:
under an advisory lock, so it may run beside starting services or a second Job).

Exit status: 0 when the schema is up to date (whether this run applied anything or not),
1 when it is not (PostgreSQL unreachable within ``--timeout``, a refused login, a
migration conflict), 2 for a missing or invalid variable. Messages name the database by
host, port and name only; a password never appears in them.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable
from typing import Annotated
from urllib.parse import unquote, urlsplit

import asyncpg
import typer

from sundial.core.config import ConfigError, DatabaseConfig, LogConfig
from sundial.core.db import MigrationError, database_dependency
from sundial.core.db import migrate as apply_migrations
from sundial.core.dependency import safe_address
from sundial.core.logging import configure_logging


class _Failed(Exception):
    """Migrating failed; the message says why, for the operator."""


def migrate(
    *,
    timeout: Annotated[
        float,
        typer.Option(
            min=0,
            help="Seconds to wait for PostgreSQL to become reachable (0: try once).",
        ),
    ] = 60.0,
) -> None:
    """Apply pending schema migrations to SUNDIAL_DATABASE_URL, then exit.

    The password comes from SUNDIAL_DATABASE_PASSWORD (or the URL).

    Safe beside running services and other migrators: one migrator runs at a time.
    """
    try:
        config = DatabaseConfig.from_env()
        configure_logging(LogConfig.from_env())
    except ConfigError as exc:
        # A ConfigError names the variable and never holds a secret's value.
        print(f"sundial migrate: {exc}", file=sys.stderr)
        raise typer.Exit(2) from None
    address = safe_address(config.database_url)
    try:
        applied = asyncio.run(_migrate(config, address, timeout))
    except _Failed as exc:
        print(f"sundial migrate: {_redact(str(exc), config)}", file=sys.stderr)
        raise typer.Exit(1) from None
    if applied:
        print(f"applied {len(applied)} migration(s) to {address}: {', '.join(applied)}")
    else:
        print(f"{address}: schema up to date, nothing to apply")


async def _migrate(config: DatabaseConfig, address: str, timeout_s: float) -> list[str]:
    def attempt() -> Awaitable[list[str]]:
        return apply_migrations(config.database_url, password=config.database_password)

    postgres = database_dependency(config)
    deadline = asyncio.timeout(timeout_s if timeout_s > 0 else None)
    try:
        async with deadline:
            # wait() retries only "not reachable yet" (refused, reset, starting up);
            # anything else is raised at once.
            return await (postgres.wait(attempt) if timeout_s > 0 else attempt())
    except postgres.transient as exc:  # TimeoutError among them
        if deadline.expired():
            raise _Failed(f"PostgreSQL at {address} not reachable within {timeout_s:g} s") from None
        raise _Failed(f"PostgreSQL at {address} not reachable: {_describe(exc)}") from None
    except MigrationError as exc:
        raise _Failed(f"migrations refused at {address}: {exc}") from None
    except asyncpg.PostgresError as exc:
        raise _Failed(f"PostgreSQL at {address} refused: {_describe(exc)}") from None
    except Exception as exc:  # an operator needs one line, not a traceback
        raise _Failed(f"migrating {address} failed: {_describe(exc)}") from None


def _describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _redact(message: str, config: DatabaseConfig) -> str:
    """``message`` with every password the configuration holds replaced by ``***``.

    The messages above name the database by :func:`safe_address` already; this catches
    a driver error that quotes the URL it was given.
    """
    secrets = {config.database_password}
    try:
        in_url = urlsplit(config.database_url).password
    except ValueError:
        in_url = None
    if in_url:
        secrets |= {in_url, unquote(in_url)}
    for secret in sorted(filter(None, secrets), key=len, reverse=True):
        message = message.replace(secret, "***")
    return message
