"""``sundial.v1.AdminService``: tenants, quotas, API tokens, signing secrets, cluster.

Only ADMIN tokens reach these handlers (:mod:`sundial.api.auth`). The wire conversions
of admin messages live here because nothing else uses them.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import grpc

from sundial.api.convert import egress_out
from sundial.api.egress import EgressPolicies
from sundial.api.identity import IdentityKeys
from sundial.api.kit import UpdateMask
from sundial.api.model import (
    ApiToken,
    ClusterSnapshot,
    Role,
    Scope,
    StoredIdentityKey,
    Tenant,
    TenantChanges,
)
from sundial.api.tenancy import TenantManager
from sundial.api.vault import REWRAP_BATCH, SecretManager
from sundial.core import wire
from sundial.core.errors import FailedPrecondition, InvalidArgument
from sundial.core.partition import PARTITION_COUNT
from sundial.v1 import admin_pb2 as pb
from sundial.v1 import admin_pb2_grpc

_ROLE_IN = {
    pb.TOKEN_ROLE_TENANT: Role.TENANT,
    pb.TOKEN_ROLE_ADMIN: Role.ADMIN,
    pb.TOKEN_ROLE_EXECUTOR: Role.EXECUTOR,
}
_ROLE_OUT = {role: number for number, role in _ROLE_IN.items()}
_SCOPE_IN = {
    pb.TOKEN_SCOPE_READ: Scope.READ,
    pb.TOKEN_SCOPE_WRITE: Scope.WRITE,
    pb.TOKEN_SCOPE_MANAGE: Scope.MANAGE,
}
_SCOPE_OUT = {scope: number for number, scope in _SCOPE_IN.items()}
_QUOTA_OVERRIDES = (
    "max_calendars",
    "max_waiting_requested_runs",
    "revisions_per_job",
    "fair_weight",
)
_TENANT_MASK = UpdateMask(
    ("display_name", "quotas"),
    subpaths=(
        "quotas.max_jobs",
        "quotas.max_concurrent_runs",
        *(f"quotas.{name}" for name in _QUOTA_OVERRIDES),
    ),
)


def tenant_out(tenant: Tenant, default_fair_weight: int) -> pb.Tenant:
    """A tenant with its quotas and signing-secret metadata. The fair weight is the
    effective one (admin.proto: reads return it); the other overrides read 0 while they
    follow the operator's default."""
    message = pb.Tenant(
        tenant_id=tenant.tenant_id,
        display_name=tenant.display_name,
        quotas=pb.Quotas(
            max_jobs=tenant.max_jobs,
            max_concurrent_runs=tenant.max_concurrent_runs,
            max_calendars=tenant.max_calendars or 0,
            max_waiting_requested_runs=tenant.max_waiting_requested_runs or 0,
            revisions_per_job=tenant.revisions_per_job or 0,
            fair_weight=tenant.fair_weight or default_fair_weight,
        ),
        create_time=wire.timestamp(tenant.create_time),
        update_time=wire.timestamp(tenant.update_time),
    )
    for secret in tenant.signing_secrets:
        entry = message.signing_secrets.add(
            secret_id=str(secret.secret_id), create_time=wire.timestamp(secret.create_time)
        )
        if secret.expire_time is not None:
            entry.expire_time.CopyFrom(wire.timestamp(secret.expire_time))
    return message


def token_out(token: ApiToken) -> pb.ApiToken:
    """Token metadata (never the secret)."""
    message = pb.ApiToken(
        token_id=str(token.token_id),
        tenant_id=token.tenant_id or "",
        role=_ROLE_OUT[token.role],
        description=token.description,
        prefix=token.prefix,
        create_time=wire.timestamp(token.create_time),
        scopes=[_SCOPE_OUT[s] for s in token.scopes],
    )
    for name, value in (
        ("expire_time", token.expire_time),
        ("last_used_time", token.last_used_time),
        ("revoke_time", token.revoke_time),
    ):
        if value is not None:
            getattr(message, name).CopyFrom(wire.timestamp(value))
    return message


def cluster_out(snapshot: ClusterSnapshot) -> pb.ClusterStatusResponse:
    """The cluster snapshot; one partition entry per partition."""
    membership = snapshot.membership
    response = pb.ClusterStatusResponse(
        cluster=snapshot.cluster,
        partition_count=PARTITION_COUNT,
        observed_at=wire.timestamp(snapshot.observed_at),
    )
    for member in sorted(membership.members, key=lambda m: m.node_id):
        entry = response.members.add(
            node_id=member.node_id,
            address=member.address,
            partitions_owned=member.partitions_owned,
            lease_id=member.lease_id,
            version=member.version,
        )
        if member.since is not None:
            entry.since.CopyFrom(wire.timestamp(member.since))
    for partition in range(PARTITION_COUNT):
        response.partitions.add(partition=partition, node_id=membership.owners.get(partition, ""))
    lag = timedelta(0)
    if snapshot.oldest_due_time is not None:
        response.oldest_due_time.CopyFrom(wire.timestamp(snapshot.oldest_due_time))
        lag = max(snapshot.observed_at - snapshot.oldest_due_time, timedelta(0))
    response.dispatch_lag.CopyFrom(wire.duration(lag))
    return response


def identity_key_out(key: StoredIdentityKey) -> pb.IdentityKey:
    """An identity key's metadata (never its private half)."""
    message = pb.IdentityKey(
        kid=key.kid,
        algorithm=key.algorithm,
        signing=key.signing,
        published=key.published,
        key_id=key.kek_id,
        create_time=wire.timestamp(key.create_time),
    )
    if key.retire_time is not None:
        message.retire_time.CopyFrom(wire.timestamp(key.retire_time))
    return message


class AdminServicer(admin_pb2_grpc.AdminServiceServicer):
    """AdminService on top of :class:`TenantManager`."""

    def __init__(
        self,
        tenants: TenantManager,
        egress: EgressPolicies,
        secrets: SecretManager,
        identity_keys: IdentityKeys | None = None,
    ) -> None:
        self._tenants = tenants
        self._egress = egress
        self._secrets = secrets
        self._identity_keys = identity_keys

    async def RotateIdentityKey(
        self, request: pb.RotateIdentityKeyRequest, context: grpc.aio.ServicerContext
    ) -> pb.RotateIdentityKeyResponse:
        overlap = (
            wire.timedelta_in(request.overlap, "overlap") if request.HasField("overlap") else None
        )
        if self._identity_keys is None:
            raise FailedPrecondition("identity keys are not served by this API")
        return pb.RotateIdentityKeyResponse(kid=await self._identity_keys.rotate(overlap))

    async def ListIdentityKeys(
        self, request: pb.ListIdentityKeysRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListIdentityKeysResponse:
        if self._identity_keys is None:
            raise FailedPrecondition("identity keys are not served by this API")
        return pb.ListIdentityKeysResponse(
            keys=[identity_key_out(k) for k in await self._identity_keys.stored()]
        )

    async def RewrapSecrets(
        self, request: pb.RewrapSecretsRequest, context: grpc.aio.ServicerContext
    ) -> pb.RewrapSecretsResponse:
        # Identity keys first (a few at most), then secrets with what is left of the
        # batch: one bound per call, and a `remaining` of 0 covers both.
        keys_done = keys_left = 0
        if self._identity_keys is not None:
            keys_done, keys_left = await self._identity_keys.rewrap(REWRAP_BATCH)
        done, remaining, key_id = await self._secrets.rewrap(REWRAP_BATCH - keys_done)
        return pb.RewrapSecretsResponse(
            rewrapped=keys_done + done,
            remaining=keys_left + remaining,
            key_id=key_id,
            identity_keys=keys_done,
        )

    def _out(self, tenant: Tenant) -> pb.Tenant:
        return tenant_out(tenant, self._tenants.default_fair_weight)

    async def CreateTenant(
        self, request: pb.CreateTenantRequest, context: grpc.aio.ServicerContext
    ) -> pb.CreateTenantResponse:
        tenant = request.tenant
        created, secret = await self._tenants.create_tenant(
            tenant.tenant_id,
            tenant.display_name,
            tenant.quotas.max_jobs,
            tenant.quotas.max_concurrent_runs,
            TenantChanges(**{name: getattr(tenant.quotas, name) for name in _QUOTA_OVERRIDES}),
        )
        return pb.CreateTenantResponse(tenant=self._out(created), signing_secret=secret)

    async def GetTenant(
        self, request: pb.GetTenantRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetTenantResponse:
        return pb.GetTenantResponse(
            tenant=self._out(await self._tenants.get_tenant(request.tenant_id))
        )

    async def ListTenants(
        self, request: pb.ListTenantsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListTenantsResponse:
        page = await self._tenants.list_tenants(
            page_size=request.page_size, page_token=request.page_token
        )
        return pb.ListTenantsResponse(
            tenants=[self._out(t) for t in page.items], next_page_token=page.next_page_token
        )

    async def UpdateTenant(
        self, request: pb.UpdateTenantRequest, context: grpc.aio.ServicerContext
    ) -> pb.UpdateTenantResponse:
        paths = set(_TENANT_MASK.paths(request.update_mask.paths))
        tenant = request.tenant
        quotas = "quotas" in paths
        changes = TenantChanges(
            display_name=tenant.display_name if "display_name" in paths else None,
            max_jobs=tenant.quotas.max_jobs if quotas or "quotas.max_jobs" in paths else None,
            max_concurrent_runs=tenant.quotas.max_concurrent_runs
            if quotas or "quotas.max_concurrent_runs" in paths
            else None,
            **{
                name: getattr(tenant.quotas, name) if quotas or f"quotas.{name}" in paths else None
                for name in _QUOTA_OVERRIDES
            },
        )
        updated = await self._tenants.update_tenant(tenant.tenant_id, changes)
        return pb.UpdateTenantResponse(tenant=self._out(updated))

    async def CreateApiToken(
        self, request: pb.CreateApiTokenRequest, context: grpc.aio.ServicerContext
    ) -> pb.CreateApiTokenResponse:
        if request.role and request.role not in _ROLE_IN:
            raise InvalidArgument("role", f"unknown value {request.role}")
        scopes = []
        for i, number in enumerate(request.scopes):
            if number not in _SCOPE_IN:
                raise InvalidArgument(f"scopes[{i}]", f"unknown value {number}")
            scopes.append(_SCOPE_IN[number])
        token, secret = await self._tenants.create_token(
            scopes=scopes,
            tenant_id=request.tenant_id,
            role=_ROLE_IN.get(request.role),
            description=request.description,
            expire_time=wire.optional_timestamp(request, "expire_time", "expire_time"),
        )
        return pb.CreateApiTokenResponse(token=token_out(token), secret=secret)

    async def ListApiTokens(
        self, request: pb.ListApiTokensRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListApiTokensResponse:
        page = await self._tenants.list_tokens(
            tenant_id=request.tenant_id,
            include_revoked=request.include_revoked,
            page_size=request.page_size,
            page_token=request.page_token,
        )
        return pb.ListApiTokensResponse(
            tokens=[token_out(t) for t in page.items], next_page_token=page.next_page_token
        )

    async def RevokeApiToken(
        self, request: pb.RevokeApiTokenRequest, context: grpc.aio.ServicerContext
    ) -> pb.RevokeApiTokenResponse:
        if not request.token_id:
            raise InvalidArgument("token_id", "is required")
        try:
            token_id = uuid.UUID(request.token_id)
        except ValueError:
            raise InvalidArgument("token_id", "is not a token id") from None
        return pb.RevokeApiTokenResponse(
            token=token_out(await self._tenants.revoke_token(token_id))
        )

    async def RotateSigningSecret(
        self, request: pb.RotateSigningSecretRequest, context: grpc.aio.ServicerContext
    ) -> pb.RotateSigningSecretResponse:
        overlap = (
            wire.timedelta_in(request.overlap, "overlap") if request.HasField("overlap") else None
        )
        tenant, secret = await self._tenants.rotate_signing_secret(request.tenant_id, overlap)
        return pb.RotateSigningSecretResponse(tenant=self._out(tenant), signing_secret=secret)

    async def ClusterStatus(
        self, request: pb.ClusterStatusRequest, context: grpc.aio.ServicerContext
    ) -> pb.ClusterStatusResponse:
        return cluster_out(await self._tenants.cluster_status())

    async def SetTenantEgressPolicy(
        self, request: pb.SetTenantEgressPolicyRequest, context: grpc.aio.ServicerContext
    ) -> pb.SetTenantEgressPolicyResponse:
        policy = None
        if not request.use_default:
            policy = wire.egress_policy_in(request.policy, "policy")
        view = await self._egress.set(request.tenant_id, policy)
        return pb.SetTenantEgressPolicyResponse(egress=egress_out(view))

    async def GetTenantEgressPolicy(
        self, request: pb.GetTenantEgressPolicyRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetTenantEgressPolicyResponse:
        view = await self._egress.effective(request.tenant_id)
        return pb.GetTenantEgressPolicyResponse(egress=egress_out(view))
