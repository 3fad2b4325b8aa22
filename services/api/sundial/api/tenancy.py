"""AdminService operations: tenants and quotas, API tokens, signing secrets, status.

Secrets (API tokens, signing secrets) are generated here with :mod:`secrets` and
returned exactly once; tokens are stored as their sha256 only.
"""

from __future__ import annotations

import dataclasses
import secrets
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta

from sundial.api import validation
from sundial.api.cluster import MembershipSource
from sundial.api.kit import Pager
from sundial.api.kit.paging import INSTANT, UUID, Text
from sundial.api.model import (
    ApiToken,
    ClusterSnapshot,
    Page,
    Role,
    Tenant,
    TenantChanges,
)
from sundial.api.store import Store
from sundial.core.auth import Scope, token_hash
from sundial.core.clock import Clock
from sundial.core.errors import InvalidArgument, NotFound

TOKEN_PREFIX = "sndl_"
"""Every issued token starts with this, so secret scanners can recognise one."""
SECRET_PREFIX = "whsec_"
"""Every signing secret starts with this."""
TOKEN_PREFIX_CHARS = 12
"""ApiToken.prefix: the token's first characters."""
MAX_OVERLAP = timedelta(days=7)
DEFAULT_OVERLAP = timedelta(hours=24)
_TENANTS = Pager("tenants", (Text(validation.MAX_TENANT_ID_CHARS),))
_TOKENS = Pager("tokens", (INSTANT, UUID))


def _new_signing_secret() -> str:
    # 32 random bytes: 256 bits, printable ASCII (admin.proto).
    return SECRET_PREFIX + secrets.token_urlsafe(32)


class TenantManager:
    """Tenants, tokens, secrets and cluster status.

    Args:
        store: Database access.
        clock: The source of "now".
        membership: Where scheduler membership comes from (see :mod:`sundial.api.cluster`).
        cluster: The cluster's name.
        default_max_jobs: max_jobs of a tenant created without one.
        default_max_concurrent_runs: max_concurrent_runs of a tenant created without one.
        default_fair_weight: The fair weight of a tenant without its own.
    """

    def __init__(
        self,
        store: Store,
        clock: Clock,
        membership: MembershipSource,
        *,
        cluster: str,
        default_max_jobs: int,
        default_max_concurrent_runs: int,
        default_fair_weight: int = 1,
    ) -> None:
        self._store = store
        self._clock = clock
        self._membership = membership
        self._cluster = cluster
        self._default_max_jobs = default_max_jobs
        self._default_max_concurrent_runs = default_max_concurrent_runs
        self.default_fair_weight = default_fair_weight
        """What a tenant's fair weight is while it has none of its own (reads show it)."""

    # --- tenants --------------------------------------------------------------------------

    async def create_tenant(
        self,
        tenant_id: str,
        display_name: str,
        max_jobs: int,
        max_concurrent_runs: int,
        overrides: TenantChanges | None = None,
    ) -> tuple[Tenant, str]:
        """Create a tenant; returns it and its first signing secret (plaintext, once).

        A max_jobs or max_concurrent_runs of 0 takes the cluster default at creation;
        the effective value is stored, so later changes of the default do not move
        existing tenants. The other quotas (``overrides``: calendars, waiting requested
        runs, revisions per job, fair weight) follow the operator's default while 0.
        """
        validation.check_tenant_id(tenant_id)
        validation.check_display_name(display_name, "tenant.display_name")
        validation.check_quotas(max_jobs, max_concurrent_runs)
        if overrides is not None:
            validation.check_quota_overrides(_overrides_of(overrides))
        secret = _new_signing_secret()
        tenant = await self._store.create_tenant(
            tenant_id,
            display_name,
            max_jobs=max_jobs or self._default_max_jobs,
            max_concurrent_runs=max_concurrent_runs or self._default_max_concurrent_runs,
            secret=secret.encode(),
            now=self._clock.now(),
            overrides=overrides,
        )
        return tenant, secret

    async def get_tenant(self, tenant_id: str) -> Tenant:
        """The tenant, NOT_FOUND if unknown."""
        validation.check_tenant_ref(tenant_id)
        tenant = await self._store.get_tenant(tenant_id)
        if tenant is None:
            raise NotFound(f"tenant {tenant_id!r} not found")
        return tenant

    async def list_tenants(self, *, page_size: int, page_token: str) -> Page[Tenant]:
        """A page of tenants ordered by tenant_id."""
        cursor = _TENANTS.open(page_size, page_token)
        after = "" if cursor.after is None else cursor.after[0]
        tenants = await self._store.list_tenants(after, cursor.limit)
        return cursor.page(tenants, lambda tenant: [tenant.tenant_id])

    async def update_tenant(self, tenant_id: str, changes: TenantChanges) -> Tenant:
        """Change display name and/or quotas (0 = the cluster default)."""
        validation.check_tenant_ref(tenant_id, "tenant.tenant_id")
        if changes.display_name is not None:
            validation.check_display_name(changes.display_name, "tenant.display_name")
        validation.check_quotas(changes.max_jobs or 0, changes.max_concurrent_runs or 0)
        validation.check_quota_overrides(_overrides_of(changes))
        resolved = dataclasses.replace(
            changes,
            max_jobs=None
            if changes.max_jobs is None
            else changes.max_jobs or self._default_max_jobs,
            max_concurrent_runs=None
            if changes.max_concurrent_runs is None
            else changes.max_concurrent_runs or self._default_max_concurrent_runs,
        )
        tenant = await self._store.update_tenant(tenant_id, resolved, self._clock.now())
        if tenant is None:
            raise NotFound(f"tenant {tenant_id!r} not found")
        return tenant

    async def rotate_signing_secret(
        self, tenant_id: str, overlap: timedelta | None
    ) -> tuple[Tenant, str]:
        """Issue a new signing secret; older ones keep signing for ``overlap``."""
        validation.check_tenant_ref(tenant_id)
        overlap = DEFAULT_OVERLAP if overlap is None else overlap
        if not timedelta(0) <= overlap <= MAX_OVERLAP:
            raise InvalidArgument(
                "overlap", f"must be 0s to 7 days, got {overlap.total_seconds():g}s"
            )
        secret = _new_signing_secret()
        now = self._clock.now()
        tenant = await self._store.rotate_secret(tenant_id, secret.encode(), now, now + overlap)
        if tenant is None:
            raise NotFound(f"tenant {tenant_id!r} not found")
        return tenant, secret

    # --- tokens ---------------------------------------------------------------------------

    async def create_token(
        self,
        *,
        tenant_id: str,
        role: Role | None,
        description: str,
        expire_time: datetime | None,
        scopes: Sequence[Scope] = (),
    ) -> tuple[ApiToken, str]:
        """Issue a token; returns its metadata and the bearer secret (plaintext, once).
        ``scopes`` empty: every scope (a TENANT token only may name any)."""
        if role is None:
            raise InvalidArgument(
                "role", "is required (TOKEN_ROLE_TENANT, TOKEN_ROLE_ADMIN or TOKEN_ROLE_EXECUTOR)"
            )
        if role is Role.TENANT and not tenant_id:
            raise InvalidArgument("tenant_id", "is required for a TENANT token")
        if role is Role.TENANT:
            validation.check_tenant_ref(tenant_id)
        if role is not Role.TENANT and tenant_id:
            raise InvalidArgument("tenant_id", f"must be empty for an {role.name} token")
        if role is not Role.TENANT and scopes:
            raise InvalidArgument("scopes", f"must be empty for an {role.name} token")
        validation.check_display_name(description, "description")
        now = self._clock.now()
        if expire_time is not None and expire_time <= now:
            raise InvalidArgument("expire_time", "must be in the future")
        if role is Role.TENANT and await self._store.get_tenant(tenant_id) is None:
            raise NotFound(f"tenant {tenant_id!r} not found")
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token = await self._store.create_token(
            tenant_id=tenant_id or None,
            role=role,
            token_hash=token_hash(secret),
            prefix=secret[:TOKEN_PREFIX_CHARS],
            description=description,
            expire_time=expire_time,
            now=now,
            scopes=[s for s in Scope if s in scopes] if scopes else None,
        )
        return token, secret

    async def list_tokens(
        self, *, tenant_id: str, include_revoked: bool, page_size: int, page_token: str
    ) -> Page[ApiToken]:
        """A page of tokens, newest first."""
        cursor = _TOKENS.open(
            page_size, page_token, {"tenant": tenant_id, "revoked": include_revoked}
        )
        if tenant_id:
            validation.check_tenant_ref(tenant_id)
        after = None if cursor.after is None else (cursor.after[0], cursor.after[1])
        tokens = await self._store.list_tokens(
            tenant_id or None, include_revoked, self._clock.now(), after=after, limit=cursor.limit
        )
        return cursor.page(tokens, lambda token: [token.create_time, token.token_id])

    async def revoke_token(self, token_id: uuid.UUID) -> ApiToken:
        """Revoke a token; it stops authenticating at once."""
        token = await self._store.revoke_token(token_id, self._clock.now())
        if token is None:
            raise NotFound(f"token {token_id} not found")
        return token

    # --- cluster --------------------------------------------------------------------------

    async def cluster_status(self) -> ClusterSnapshot:
        """Members and partition owners (from the membership source) and dispatch lag."""
        membership = await self._membership.membership()
        now = self._clock.now()
        oldest = await self._store.oldest_due(now)
        return ClusterSnapshot(
            cluster=self._cluster, membership=membership, oldest_due_time=oldest, observed_at=now
        )


def _overrides_of(changes: TenantChanges) -> dict[str, int | None]:
    """The quotas that follow the operator's default while 0, by name."""
    return {
        "max_calendars": changes.max_calendars,
        "max_waiting_requested_runs": changes.max_waiting_requested_runs,
        "revisions_per_job": changes.revisions_per_job,
        "fair_weight": changes.fair_weight,
    }
