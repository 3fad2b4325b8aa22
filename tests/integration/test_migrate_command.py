"""``sundial migrate`` (what the migrations Job runs) as a real process on real PostgreSQL."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import time
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from sundial.core.db import load_migrations
from sundial.devstack import Stack
from tests.conftest import with_database

VERSIONS = [m.version for m in load_migrations()]


@dataclass(frozen=True)
class Result:
    code: int
    stdout: str
    stderr: str


async def _sundial_migrate(env: dict[str, str], *args: str) -> Result:
    """Run ``sundial migrate`` with only ``env`` as its SUNDIAL_* configuration."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SUNDIAL_")}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sundial.cli",
        "migrate",
        *args,
        env={**clean, "SUNDIAL_LOG_FORMAT": "text", **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode is not None
    return Result(process.returncode, stdout.decode(), stderr.decode())


async def _applied(database_url: str) -> list[tuple[str, object]]:
    conn = await asyncpg.connect(database_url)
    try:
        rows = await conn.fetch("SELECT version, applied_at FROM sundial_migrations ORDER BY 1")
        return [(row["version"], row["applied_at"]) for row in rows]
    finally:
        await conn.close()


async def test_migrates_an_empty_database_and_a_second_run_changes_nothing(
    database_url: str,
) -> None:
    first = await _sundial_migrate({"SUNDIAL_DATABASE_URL": database_url})
    assert first.code == 0, first
    assert f"applied {len(VERSIONS)} migration(s)" in first.stdout
    assert VERSIONS[-1] in first.stdout
    applied = await _applied(database_url)
    assert [version for version, _ in applied] == VERSIONS

    conn = await asyncpg.connect(database_url)
    try:
        # The schema itself, not only the bookkeeping: what every service queries.
        for table in ("tenants", "jobs", "job_runs", "api_tokens"):
            assert await conn.fetchval("SELECT to_regclass($1)", table) is not None, table
    finally:
        await conn.close()

    second = await _sundial_migrate({"SUNDIAL_DATABASE_URL": database_url})
    assert second.code == 0, second
    assert "schema up to date" in second.stdout
    assert await _applied(database_url) == applied, "a second run must apply nothing"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_unreachable_database_fails_within_the_timeout_without_the_password() -> None:
    url_password, env_password = "url-pw-4c1f9b", "env-pw-7d2e3a"
    url = f"postgresql://sundial:{url_password}@127.0.0.1:{_free_port()}/sundial"
    started = time.monotonic()
    result = await _sundial_migrate(
        {"SUNDIAL_DATABASE_URL": url, "SUNDIAL_DATABASE_PASSWORD": env_password},
        "--timeout",
        "1.5",
    )
    assert result.code == 1, result
    assert time.monotonic() - started < 30
    assert "not reachable within 1.5 s" in result.stderr
    for password in (url_password, env_password):
        assert password not in result.stdout + result.stderr


async def test_a_database_that_does_not_exist_fails_at_once(stack: Stack) -> None:
    url = with_database(stack.database_url, "sundial_no_such_database")
    # Not retried: waiting cannot create the database (a 120 s timeout would show).
    result = await _sundial_migrate({"SUNDIAL_DATABASE_URL": url}, "--timeout", "120")
    assert result.code == 1, result
    assert "refused" in result.stderr and "does not exist" in result.stderr


async def test_a_password_in_the_url_is_not_repeated_in_an_error(stack: Stack) -> None:
    parts = urlsplit(with_database(stack.database_url, "sundial_no_such_database"))
    host = parts.netloc.rpartition("@")[2]
    secret = "s3cret-in-url"
    url = urlunsplit(parts._replace(netloc=f"nobody:{secret}@{host}"))
    result = await _sundial_migrate({"SUNDIAL_DATABASE_URL": url}, "--timeout", "0")
    assert result.code == 1, result
    assert result.stderr.startswith("sundial migrate: ")
    assert secret not in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({}, "SUNDIAL_DATABASE_URL"),
        ({"SUNDIAL_DATABASE_URL": "mysql://db/sundial"}, "SUNDIAL_DATABASE_URL"),
    ],
)
async def test_bad_configuration_exits_2_naming_the_variable(
    env: dict[str, str], variable: str
) -> None:
    result = await _sundial_migrate(env)
    assert result.code == 2, result
    assert variable in result.stderr
