"""Store methods for tenant secrets (migration 0021): sealed values in, metadata out.

The store never sees a value in the clear: the manager seals before a write
(:mod:`sundial.core.sealing`), and only :meth:`SecretStore.sealed_secrets` and the
re-wrap read sealed columns back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

import asyncpg

from sundial.api.model import StoredSecret
from sundial.api.store._base import Row, one, queries, translate
from sundial.core.errors import FailedPrecondition, NotFound, ResourceExhausted, version_mismatch
from sundial.core.sealing import Sealed

_SHOWN_REFERRERS = 10
"""Jobs and channels DeleteSecret's FAILED_PRECONDITION names."""


def secret_from_row(row: Row) -> StoredSecret:
    return StoredSecret(
        name=row["name"],
        description=row["description"],
        version=row["version"],
        create_time=row["created_at"],
        update_time=row["updated_at"],
    )


def sealed_from_row(row: Row) -> Sealed:
    return Sealed(row["kek_id"], row["wrapped_key"], row["nonce"], row["ciphertext"])


class SecretStore:
    """Tenant secrets. Mixed into :class:`sundial.api.store.Store`."""

    _pool: asyncpg.Pool

    @translate
    async def create_secret(
        self,
        tenant_id: str,
        name: str,
        description: str,
        sealed: Sealed,
        now: datetime,
        *,
        limit: int,
    ) -> StoredSecret:
        """Insert a secret (AlreadyExists naming ``secret.name`` when taken;
        ResourceExhausted when the tenant holds ``limit`` already, counted under its row
        lock so concurrent creates cannot pass it)."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(queries.lock_tenant_row, tenant_id)
            count = await conn.fetchval(queries.count_secrets, tenant_id)
            if count >= limit:
                raise ResourceExhausted(
                    f"the tenant's limit of {limit} secrets is reached: delete one first",
                    metadata={"quota": "max_secrets", "limit": str(limit), "usage": str(count)},
                )
            row = await conn.fetchrow(
                queries.insert_secret,
                tenant_id,
                name,
                description,
                sealed.kek_id,
                sealed.wrapped_key,
                sealed.nonce,
                sealed.ciphertext,
                now,
            )
        return secret_from_row(one(row))

    @translate
    async def update_secret(
        self,
        tenant_id: str,
        name: str,
        description: str,
        sealed: Sealed,
        now: datetime,
        *,
        expected_version: int,
    ) -> StoredSecret:
        """Replace a secret's value (NotFound; Aborted at another version than a non-zero
        ``expected_version``)."""
        async with self._pool.acquire() as conn, conn.transaction():
            current = await conn.fetchrow(queries.lock_secret, tenant_id, name)
            if current is None:
                raise NotFound(f"secret {name} not found")
            if expected_version and current["version"] != expected_version:
                # The kit's require_version rule (the kit imports the store: no cycle).
                raise version_mismatch("secret", name, current["version"], expected_version)
            row = await conn.fetchrow(
                queries.update_secret,
                tenant_id,
                name,
                description,
                sealed.kek_id,
                sealed.wrapped_key,
                sealed.nonce,
                sealed.ciphertext,
                now,
            )
        return secret_from_row(one(row))

    @translate
    async def list_secrets(self, tenant_id: str, *, after: str, limit: int) -> list[StoredSecret]:
        rows = await self._pool.fetch(queries.list_secrets, tenant_id, after, limit)
        return [secret_from_row(row) for row in rows]

    @translate
    async def delete_secret(self, tenant_id: str, name: str, *, expected_version: int) -> None:
        """Delete a secret no job or channel references (FAILED_PRECONDITION naming up
        to 10 of them otherwise)."""
        async with self._pool.acquire() as conn, conn.transaction():
            current = await conn.fetchrow(queries.lock_secret, tenant_id, name)
            if current is None:
                raise NotFound(f"secret {name} not found")
            if expected_version and current["version"] != expected_version:
                # The kit's require_version rule (the kit imports the store: no cycle).
                raise version_mismatch("secret", name, current["version"], expected_version)
            rows = await conn.fetch(
                queries.secret_referrers, tenant_id, f"${{secret:{name}}}", _SHOWN_REFERRERS + 1
            )
            shown = [row["shown"] for row in rows]
            if shown:
                listed = ", ".join(shown[:_SHOWN_REFERRERS])
                more = ", ..." if len(shown) > _SHOWN_REFERRERS else ""
                raise FailedPrecondition(
                    f"secret {name} is referenced by the targets of {listed}{more}; "
                    "remove the references first"
                )
            await conn.execute(queries.delete_secret, tenant_id, name)

    @translate
    async def existing_secrets(self, tenant_id: str, names: Sequence[str]) -> set[str]:
        """Which of ``names`` the tenant has."""
        rows = await self._pool.fetch(queries.existing_secrets, tenant_id, list(names))
        return {row["name"] for row in rows}

    @translate
    async def sealed_secrets(
        self, wanted: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], Sealed]:
        """The sealed values of (tenant, name) pairs that exist."""
        rows = await self._pool.fetch(
            queries.sealed_secrets, [t for t, _ in wanted], [n for _, n in wanted]
        )
        return {(row["tenant_id"], row["name"]): sealed_from_row(row) for row in rows}

    @translate
    async def rewrap_secrets(
        self, primary: str, limit: int, rewrap: Callable[[str, str, Sealed], Sealed]
    ) -> tuple[int, int]:
        """Re-wrap up to ``limit`` data keys not under key ``primary`` with ``rewrap``
        (``(tenant, name, Sealed) -> Sealed``), in one transaction; returns how many were
        re-wrapped and how many remain."""
        async with self._pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(queries.secrets_to_rewrap, primary, limit)
            for row in rows:
                sealed = rewrap(row["tenant_id"], row["name"], sealed_from_row(row))
                await conn.execute(
                    queries.rewrap_secret,
                    row["tenant_id"],
                    row["name"],
                    sealed.kek_id,
                    sealed.wrapped_key,
                )
            remaining = await conn.fetchval(queries.count_to_rewrap, primary)
        return len(rows), remaining
