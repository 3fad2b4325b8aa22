"""Forward-only SQL migrations, safe to run from every replica at startup.

Migrations are the files ``migrations/NNNN_description.sql`` of this package, applied in
filename order, each in its own transaction together with its row in
``sundial_migrations`` (version, sha256 checksum, applied_at). All of it happens under a
session advisory lock on a dedicated connection, so when several processes start at
once the first applies what is pending and the others wait, then find nothing to do.

A released migration is never edited: :func:`migrate` refuses to run when an applied
file's checksum changed, naming the file. A pending file that sorts before an applied
one (two branches merged out of order) is refused too: forward-only means the order of
application is the order of the files, everywhere.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.resources
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

__all__ = ["Migration", "MigrationError", "load_migrations", "migrate"]

log = logging.getLogger(__name__)

# The session advisory lock that serialises migrators. Fixed forever so every version of
# Sundial agrees on it; it is the first 8 bytes of sha256(b"sundial.migrations") as a
# signed big-endian integer, chosen so no other application's small keys collide.
MIGRATION_LOCK_KEY = -4431510353186466338

_FILENAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")

_BOOTSTRAP = """
CREATE TABLE IF NOT EXISTS sundial_migrations (
    version    text PRIMARY KEY,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""


class MigrationError(RuntimeError):
    """The database's migration history and the migration files disagree."""


@dataclass(frozen=True)
class Migration:
    """One migration file."""

    version: str
    """The file name without ``.sql``, e.g. ``0001_initial``; recorded when applied."""
    filename: str
    sql: str
    checksum: str
    """sha256 of the file's bytes, hex."""

    @classmethod
    def from_text(cls, filename: str, text: str) -> Migration:
        """A migration named ``filename`` (``NNNN_name.sql``) with SQL ``text``."""
        if not _FILENAME.match(filename):
            raise MigrationError(f"{filename}: migration files are named NNNN_lowercase_name.sql")
        return cls(
            version=filename.removesuffix(".sql"),
            filename=filename,
            sql=text,
            checksum=hashlib.sha256(text.encode()).hexdigest(),
        )


def load_migrations(
    package: str = "sundial.core.db", directory: str = "migrations"
) -> list[Migration]:
    """The migration files of ``package``/``directory``, in application order.

    Raises:
        MigrationError: A file is misnamed or two files share a number.
    """
    root = importlib.resources.files(package).joinpath(directory)
    migrations = sorted(
        (
            Migration.from_text(entry.name, entry.read_text(encoding="utf-8"))
            for entry in root.iterdir()
            if entry.name.endswith(".sql")
        ),
        key=lambda m: m.filename,
    )
    numbers = [m.filename[:4] for m in migrations]
    for number in sorted(set(numbers)):
        if numbers.count(number) > 1:
            raise MigrationError(f"two migrations are numbered {number}")
    return migrations


async def migrate(
    dsn: str, *, password: str = "", migrations: Sequence[Migration] | None = None
) -> list[str]:
    """Apply the pending migrations to the database at ``dsn``.

    Args:
        dsn: A PostgreSQL URL; the role needs to create tables and functions.
        password: The role's password when it is not in the URL.
        migrations: What to apply, in order; defaults to :func:`load_migrations` (tests
            pass their own).

    Returns:
        The versions applied by this call, in order (empty when up to date).

    Raises:
        MigrationError: An applied migration's checksum changed, or a pending one sorts
            before an applied one.
    """
    ordered = list(load_migrations() if migrations is None else migrations)
    conn = await asyncpg.connect(
        dsn,
        password=password or None,
        server_settings={
            "application_name": "sundial-migrate",
            "timezone": "UTC",
            # A migration may legitimately run long; the DSN must not cut it short.
            "statement_timeout": "0",
        },
    )
    try:
        # Blocks while another process migrates. Session-level (not xact) so it spans
        # the several transactions below; closing the connection releases it too.
        await conn.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK_KEY)
        try:
            return await _apply(conn, ordered)
        finally:
            # Best effort: if the connection broke, closing it released the lock anyway,
            # and the error that broke it is the one worth reporting.
            with contextlib.suppress(asyncpg.PostgresError, asyncpg.InterfaceError, OSError):
                await conn.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK_KEY)
    finally:
        await conn.close()


async def _apply(conn: asyncpg.Connection, migrations: list[Migration]) -> list[str]:
    await conn.execute(_BOOTSTRAP)
    applied = {
        row["version"]: row["checksum"]
        for row in await conn.fetch("SELECT version, checksum FROM sundial_migrations")
    }
    known = {m.version for m in migrations}
    for migration in migrations:
        recorded = applied.get(migration.version)
        if recorded is not None and recorded != migration.checksum:
            raise MigrationError(
                f"{migration.filename} changed after it was applied (recorded sha256 "
                f"{recorded[:12]}..., file {migration.checksum[:12]}...); released "
                "migrations must never be edited: add a new file instead"
            )
    unknown = sorted(set(applied) - known)
    if unknown:
        # A newer release migrated this database: an older binary may still run against
        # it during a rolling deploy, because migrations only ever add.
        log.warning(
            "database has migrations this build does not know: %s",
            ", ".join(unknown),
            extra={"action": "migrate"},
        )
    pending = [m for m in migrations if m.version not in applied]
    last_applied = max((m.version for m in migrations if m.version in applied), default="")
    for migration in pending:
        if migration.version < last_applied:
            raise MigrationError(
                f"{migration.filename} is not applied but the later {last_applied}.sql is; "
                "renumber it after the latest applied migration"
            )
    done: list[str] = []
    for migration in pending:
        async with conn.transaction():
            # No arguments: the simple query protocol, which runs a multi-statement file.
            await conn.execute(migration.sql)
            await conn.execute(
                "INSERT INTO sundial_migrations (version, checksum) VALUES ($1, $2)",
                migration.version,
                migration.checksum,
            )
        log.info(
            "applied migration %s",
            migration.filename,
            extra={"action": "migrate", "version": migration.version},
        )
        done.append(migration.version)
    return done
