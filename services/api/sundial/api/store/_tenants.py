"""Store methods for tenants, API tokens, signing secrets and cluster status."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

import asyncpg

from sundial.api.model import (
    ApiToken,
    Role,
    SigningSecretInfo,
    StoredEgress,
    Tenant,
    TenantChanges,
)
from sundial.api.store._base import (
    Conn,
    one,
    queries,
    tenant_from_row,
    token_from_row,
    translate,
)
from sundial.core.auth import Scope
from sundial.core.egress import EgressPolicy, policy_from_document


class TenantStore:
    """Tenants, tokens, signing secrets, cluster facts, request-id purges."""

    _pool: asyncpg.Pool

    # --- tenants --------------------------------------------------------------------------

    async def _secrets(
        self, conn: Conn | asyncpg.Pool, tenant_ids: Sequence[str]
    ) -> dict[str, list[SigningSecretInfo]]:
        found: dict[str, list[SigningSecretInfo]] = {t: [] for t in tenant_ids}
        for row in await conn.fetch(queries.tenant_secrets, list(tenant_ids)):
            found[row["tenant_id"]].append(
                SigningSecretInfo(row["secret_id"], row["created_at"], row["expires_at"])
            )
        return found

    @translate
    async def create_tenant(
        self,
        tenant_id: str,
        display_name: str,
        *,
        max_jobs: int,
        max_concurrent_runs: int,
        secret: bytes,
        now: datetime,
        overrides: TenantChanges | None = None,
    ) -> Tenant:
        """Create a tenant and its first signing secret.

        Raises:
            AlreadyExists: The tenant_id is taken.
        """
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(
                queries.insert_tenant,
                tenant_id,
                display_name,
                max_jobs,
                max_concurrent_runs,
                secret,
                uuid.uuid4(),
                now,
                (overrides.max_calendars or None) if overrides else None,
                (overrides.max_waiting_requested_runs or None) if overrides else None,
                (overrides.revisions_per_job or None) if overrides else None,
                (overrides.fair_weight or None) if overrides else None,
            )
            row = one(await conn.fetchrow(queries.get_tenant, tenant_id))
            return tenant_from_row(row, (await self._secrets(conn, [tenant_id]))[tenant_id])

    @translate
    async def get_tenant(self, tenant_id: str) -> Tenant | None:
        """The tenant, or None."""
        row = await self._pool.fetchrow(queries.get_tenant, tenant_id)
        if row is None:
            return None
        return tenant_from_row(row, (await self._secrets(self._pool, [tenant_id]))[tenant_id])

    @translate
    async def list_tenants(self, after: str, limit: int) -> list[Tenant]:
        """Up to ``limit`` tenants by id after ``after``."""
        rows = await self._pool.fetch(queries.list_tenants, after, limit)
        secrets = await self._secrets(self._pool, [row["tenant_id"] for row in rows])
        return [tenant_from_row(row, secrets[row["tenant_id"]]) for row in rows]

    @translate
    async def update_tenant(
        self, tenant_id: str, changes: TenantChanges, now: datetime
    ) -> Tenant | None:
        """Apply ``changes``; None when the tenant does not exist."""
        async with self._pool.acquire() as conn, conn.transaction():
            updated = await conn.fetchval(
                queries.update_tenant,
                tenant_id,
                changes.display_name,
                changes.max_jobs,
                changes.max_concurrent_runs,
                now,
                changes.max_calendars,
                changes.max_waiting_requested_runs,
                changes.revisions_per_job,
                changes.fair_weight,
            )
            if updated is None:
                return None
            row = one(await conn.fetchrow(queries.get_tenant, tenant_id))
            return tenant_from_row(row, (await self._secrets(conn, [tenant_id]))[tenant_id])

    @translate
    async def egress_policy(self, tenant_id: str) -> StoredEgress | None:
        """The tenant's own egress policy; None when the tenant does not exist."""
        row = await self._pool.fetchrow(queries.get_egress_policy, tenant_id)
        return None if row is None else _stored_egress(row)

    @translate
    async def set_egress_policy(
        self, tenant_id: str, policy: EgressPolicy | None, now: datetime
    ) -> StoredEgress | None:
        """Set (None: clear) the tenant's egress policy; None when it does not exist."""
        document = None if policy is None else policy.document()
        row = await self._pool.fetchrow(queries.set_egress_policy, tenant_id, document, now)
        return None if row is None else _stored_egress(row)

    @translate
    async def rotate_secret(
        self, tenant_id: str, secret: bytes, now: datetime, old_expire: datetime
    ) -> Tenant | None:
        """Add a new signing secret; the current one stops at ``old_expire``, any older
        one now, and expired ones are deleted: at most two stay valid. None: no tenant."""
        async with self._pool.acquire() as conn, conn.transaction():
            if await conn.fetchrow(queries.lock_tenant_row, tenant_id) is None:
                return None
            await conn.execute(queries.expire_secrets, tenant_id, now, old_expire)
            await conn.execute(queries.delete_expired_secrets, tenant_id, now)
            await conn.execute(queries.add_secret, tenant_id, uuid.uuid4(), secret, now)
            row = one(await conn.fetchrow(queries.get_tenant, tenant_id))
            return tenant_from_row(row, (await self._secrets(conn, [tenant_id]))[tenant_id])

    @translate
    async def create_token(
        self,
        *,
        tenant_id: str | None,
        role: Role,
        token_hash: bytes,
        prefix: str,
        description: str,
        expire_time: datetime | None,
        now: datetime,
        scopes: Sequence[Scope] | None = None,
    ) -> ApiToken:
        """Store a new token (its hash only); ``scopes`` None: every scope."""
        row = await self._pool.fetchrow(
            queries.insert_token,
            uuid.uuid4(),
            tenant_id,
            role.value,
            token_hash,
            prefix,
            description,
            now,
            expire_time,
            None if scopes is None else [s.value for s in scopes],
        )
        return token_from_row(one(row))

    @translate
    async def list_tokens(
        self,
        tenant_id: str | None,
        include_revoked: bool,
        now: datetime,
        *,
        after: tuple[datetime, uuid.UUID] | None,
        limit: int,
    ) -> list[ApiToken]:
        """Up to ``limit`` tokens, newest first, after the cursor ``after``."""
        rows = await self._pool.fetch(
            queries.list_tokens,
            tenant_id,
            now,
            None if after is None else after[0],
            None if after is None else after[1],
            include_revoked,
            limit,
        )
        return [token_from_row(row) for row in rows]

    @translate
    async def revoke_token(self, token_id: uuid.UUID, now: datetime) -> ApiToken | None:
        """Revoke the token (a revoked one keeps its revoke time); None when unknown."""
        row = await self._pool.fetchrow(queries.revoke_token, token_id, now)
        return None if row is None else token_from_row(row)

    @translate
    async def oldest_due(self, now: datetime) -> datetime | None:
        """The oldest next_run_at of a due, unpaused job."""
        return await self._pool.fetchval(queries.oldest_due, now)

    @translate
    async def purge_requests(self, before: datetime, limit: int) -> int:
        """Delete up to ``limit`` idempotency records created before ``before``."""
        status = await self._pool.execute(queries.purge_requests, before, limit)
        return int(status.rsplit(" ", 1)[-1])

    async def purge_revisions(
        self, *, before: datetime, deleted_before: datetime, limit: int
    ) -> int:
        """Delete up to ``limit`` retired revisions: superseded ones made before
        ``before``, and a deleted job's made before ``deleted_before``. A job's newest
        ``revisions_per_job`` are kept where a change is written (migration 0028)."""
        status = await self._pool.execute(
            queries.purge_old_revisions, before, deleted_before, limit
        )
        return int(status.rsplit(" ", 1)[-1])

    async def purge_audit_events(self, before: datetime, limit: int) -> int:
        """Delete up to ``limit`` audit events older than ``before``."""
        status = await self._pool.execute(queries.purge_old_audit_events, before, limit)
        return int(status.rsplit(" ", 1)[-1])


def _stored_egress(row: asyncpg.Record) -> StoredEgress:
    document = row["egress_policy"]
    return StoredEgress(
        policy=None if document is None else policy_from_document(document),
        update_time=row["egress_policy_updated_at"],
    )
