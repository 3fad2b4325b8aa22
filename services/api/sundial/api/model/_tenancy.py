"""Tenants, tokens, secrets, identity keys and the cluster (see the package docstring)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from sundial.core.auth import Role, Scope  # re-exported: a token's role and scopes
from sundial.core.egress import EgressPolicy

# --- tenants and tokens -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SigningSecretInfo:
    """Metadata of one signing secret (never the secret)."""

    secret_id: UUID
    create_time: datetime
    expire_time: datetime | None


@dataclass(frozen=True, slots=True)
class Tenant:
    """A tenant with its effective quotas."""

    tenant_id: str
    display_name: str
    max_jobs: int
    max_concurrent_runs: int
    create_time: datetime
    update_time: datetime
    signing_secrets: Sequence[SigningSecretInfo] = ()
    max_calendars: int | None = None
    """The tenant's own bound (None: the operator's default); likewise the next three."""
    max_waiting_requested_runs: int | None = None
    revisions_per_job: int | None = None
    fair_weight: int | None = None


@dataclass(frozen=True, slots=True)
class StoredEgress:
    """A tenant's own egress policy as stored (None: the operator's default applies)."""

    policy: EgressPolicy | None
    update_time: datetime | None


@dataclass(frozen=True, slots=True)
class TenantEgress:
    """The egress policy in force for a tenant (egress.proto ``EffectiveEgressPolicy``)."""

    policy: EgressPolicy
    tenant_specific: bool
    loopback_allowed: bool
    update_time: datetime | None


@dataclass(frozen=True, slots=True)
class TenantChanges:
    """UpdateTenant's changes; None leaves a field as it is."""

    display_name: str | None = None
    max_jobs: int | None = None
    max_concurrent_runs: int | None = None
    max_calendars: int | None = None
    """0 sets it back to the operator's default; likewise the next three."""
    max_waiting_requested_runs: int | None = None
    revisions_per_job: int | None = None
    fair_weight: int | None = None


@dataclass(frozen=True, slots=True)
class ApiToken:
    """Metadata of an API token (never the token)."""

    token_id: UUID
    tenant_id: str | None
    role: Role
    description: str
    prefix: str
    create_time: datetime
    expire_time: datetime | None = None
    last_used_time: datetime | None = None
    revoke_time: datetime | None = None
    scopes: tuple[Scope, ...] = ()
    """A TENANT token's scopes, sorted (every scope when issued without)."""


@dataclass(frozen=True, slots=True)
class StoredSecret:
    """A tenant secret's metadata (secret.proto ``Secret``): never its value."""

    name: str
    description: str
    version: int
    create_time: datetime
    update_time: datetime


@dataclass(frozen=True, slots=True)
class StoredIdentityKey:
    """An identity-token signing key as an operator sees it (admin.proto
    ``IdentityKey``): never its private half."""

    kid: str
    algorithm: str
    kek_id: str
    create_time: datetime
    retire_time: datetime | None
    signing: bool
    published: bool


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: decided by the bearer token."""

    role: Role
    tenant_id: str | None
    token_id: UUID | None
    """None for the bootstrap admin token from configuration."""


# --- cluster ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClusterMember:
    """A live scheduler (from etcd)."""

    node_id: str
    address: str
    partitions_owned: int
    lease_id: int
    since: datetime | None
    version: str


@dataclass(frozen=True, slots=True)
class Membership:
    """Scheduler members and the owner of every partition (``""`` when unowned)."""

    members: Sequence[ClusterMember]
    owners: Mapping[int, str]


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """ClusterStatus's answer."""

    cluster: str
    membership: Membership
    oldest_due_time: datetime | None
    observed_at: datetime
