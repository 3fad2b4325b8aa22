"""The asyncpg connection pool every service shares."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping

import asyncpg

from sundial.core.config import DatabaseConfig
from sundial.core.dependency import Dependency, safe_address

log = logging.getLogger(__name__)

# What a PostgreSQL that is not up yet (or restarting) answers a connect with: refused,
# reset or unresolvable (OSError), no answer in time, "the database system is starting
# up" / "shutting down" (57P0x), "too many clients" (53xxx), a connection closed during
# the handshake (08xxx). Authentication failures (28xxx) and a missing database (3D000)
# are not here: waiting would not fix them.
CONNECT_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    TimeoutError,
    asyncpg.OperatorInterventionError,
    asyncpg.InsufficientResourcesError,
    asyncpg.PostgresConnectionError,
)


def database_dependency(config: DatabaseConfig) -> Dependency:
    """PostgreSQL as a dependency to wait for at start (see :mod:`sundial.core.dependency`)."""
    return Dependency("PostgreSQL", safe_address(config.database_url), CONNECT_ERRORS)


def session_settings(config: DatabaseConfig, application_name: str) -> dict[str, str]:
    """Server settings applied to every session the pool opens.

    ``timezone=UTC`` makes every ``timestamptz`` rendered or truncated in SQL (``date_trunc``,
    ``::date``) mean the UTC day, whatever the server's default; the timeouts bound what
    a stuck statement or a frozen client can hold.
    """
    settings = {
        "application_name": application_name,
        "timezone": "UTC",
        "statement_timeout": str(round(config.statement_timeout_s * 1000)),
        "idle_in_transaction_session_timeout": str(
            round(config.idle_in_transaction_timeout_s * 1000)
        ),
    }
    if config.transaction_timeout_s:
        # PostgreSQL 17 and later; 0 leaves it out for an older server, which refuses a
        # session naming a setting it does not know.
        settings["transaction_timeout"] = str(round(config.transaction_timeout_s * 1000))
    return settings


def json_text(value: object) -> str:
    """``value`` as compact JSON text, as the connections' ``jsonb`` codec encodes it.

    For a statement that takes JSON as ``text[]`` and casts it: a batch then encodes each
    distinct document once, where a ``jsonb[]`` argument runs the codec for every entry.
    """
    return _COMPACT(value)


# json.dumps builds an encoder per call when given options: one, built once, serves every
# call (a batch encodes a labels document per job).
_COMPACT = json.JSONEncoder(separators=(",", ":")).encode


async def init_connection(conn: asyncpg.Connection) -> None:
    """Decode ``json``/``jsonb`` to Python values and encode them back with :mod:`json`.

    Without this asyncpg hands JSON out as ``str``; with it, a store passes and receives
    dicts and lists. Pass Python values, not JSON text: a ``str`` argument is encoded as
    a JSON string.
    """
    for type_name in ("json", "jsonb"):
        await conn.set_type_codec(
            type_name,
            schema="pg_catalog",
            encoder=json_text,
            decoder=json.loads,
            format="text",
        )


async def _keep_session(conn: asyncpg.Connection) -> None:
    """A pool ``reset`` that does nothing (see ``reset_on_release``)."""


async def create_pool(
    config: DatabaseConfig,
    *,
    application_name: str = "sundial",
    reset_on_release: bool = True,
    settings: Mapping[str, str] | None = None,
) -> asyncpg.Pool:
    """Open a connection pool with Sundial's session settings and JSON codecs.

    Args:
        config: DSN, pool size and timeouts.
        application_name: Shown in ``pg_stat_activity``; services pass their own name.
        reset_on_release: Run asyncpg's reset query (``pg_advisory_unlock_all(); CLOSE
            ALL; UNLISTEN *; RESET ALL``) whenever a connection goes back to the pool.
            A service that never takes session advisory locks, LISTENs, opens cursors
            outside transactions or SETs session settings passes False and saves that
            round trip on every acquire (on ``pool.fetch*`` too).
        settings: More session settings of the service's own (e.g. the API's
            ``sundial.revisions_per_job``, read by a trigger), beside
            :func:`session_settings`.

    Returns:
        An open pool holding ``config.pool_min_size`` connections.

    A connection prepares each statement again ``config.plan_lifetime_s`` after it first
    did: PostgreSQL keeps one generic plan per prepared statement once five calls showed
    it no worse than planning each call, costed for the tables as they were then. Plans
    made while a table held a few hundred rows scanned it whole for every key of a lease
    once a tenant's 20,000 new jobs filled it, until autovacuum analyzed it (B's leases
    70-110 ms instead of 1, ``bench/bench_isolation.py --pgwork``); prepared again, the
    statement is planned for the tables as they are. Planning every call instead
    (``plan_cache_mode``) cost a one-tenant herd 30 % more of PostgreSQL's CPU per run.
    """
    pool = await asyncpg.create_pool(
        config.database_url,
        password=config.database_password or None,
        min_size=config.pool_min_size,
        max_size=config.pool_max_size,
        timeout=config.connect_timeout_s,
        server_settings={**session_settings(config, application_name), **(settings or {})},
        init=init_connection,
        reset=None if reset_on_release else _keep_session,
        max_cached_statement_lifetime=config.plan_lifetime_s,
    )
    assert pool is not None  # asyncpg returns None only when used as `async with`
    return pool


async def close_pool(pool: asyncpg.Pool, timeout_s: float) -> None:
    """Close ``pool`` gracefully within ``timeout_s``, then terminate what is left.

    ``Pool.close()`` waits for every acquired connection to be released, which a stuck
    query could delay forever: a shutdown must stay bounded.
    """
    try:
        async with asyncio.timeout(timeout_s):
            await pool.close()
    except TimeoutError:
        log.warning(
            "database pool did not close within %.1f s; terminating it",
            timeout_s,
            extra={"action": "db_pool"},
        )
        pool.terminate()
