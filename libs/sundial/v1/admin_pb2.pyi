import datetime

from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import field_mask_pb2 as _field_mask_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from sundial.v1 import egress_pb2 as _egress_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TokenRole(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TOKEN_ROLE_UNSPECIFIED: _ClassVar[TokenRole]
    TOKEN_ROLE_TENANT: _ClassVar[TokenRole]
    TOKEN_ROLE_ADMIN: _ClassVar[TokenRole]
    TOKEN_ROLE_EXECUTOR: _ClassVar[TokenRole]

class TokenScope(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TOKEN_SCOPE_UNSPECIFIED: _ClassVar[TokenScope]
    TOKEN_SCOPE_READ: _ClassVar[TokenScope]
    TOKEN_SCOPE_WRITE: _ClassVar[TokenScope]
    TOKEN_SCOPE_MANAGE: _ClassVar[TokenScope]
TOKEN_ROLE_UNSPECIFIED: TokenRole
TOKEN_ROLE_TENANT: TokenRole
TOKEN_ROLE_ADMIN: TokenRole
TOKEN_ROLE_EXECUTOR: TokenRole
TOKEN_SCOPE_UNSPECIFIED: TokenScope
TOKEN_SCOPE_READ: TokenScope
TOKEN_SCOPE_WRITE: TokenScope
TOKEN_SCOPE_MANAGE: TokenScope

class Tenant(_message.Message):
    __slots__ = ("tenant_id", "display_name", "quotas", "create_time", "update_time", "signing_secrets")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    QUOTAS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    SIGNING_SECRETS_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    display_name: str
    quotas: Quotas
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    signing_secrets: _containers.RepeatedCompositeFieldContainer[SigningSecret]
    def __init__(self, tenant_id: _Optional[str] = ..., display_name: _Optional[str] = ..., quotas: _Optional[_Union[Quotas, _Mapping]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., signing_secrets: _Optional[_Iterable[_Union[SigningSecret, _Mapping]]] = ...) -> None: ...

class Quotas(_message.Message):
    __slots__ = ("max_jobs", "max_concurrent_runs", "max_calendars", "max_waiting_requested_runs", "revisions_per_job", "fair_weight")
    MAX_JOBS_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENT_RUNS_FIELD_NUMBER: _ClassVar[int]
    MAX_CALENDARS_FIELD_NUMBER: _ClassVar[int]
    MAX_WAITING_REQUESTED_RUNS_FIELD_NUMBER: _ClassVar[int]
    REVISIONS_PER_JOB_FIELD_NUMBER: _ClassVar[int]
    FAIR_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    max_jobs: int
    max_concurrent_runs: int
    max_calendars: int
    max_waiting_requested_runs: int
    revisions_per_job: int
    fair_weight: int
    def __init__(self, max_jobs: _Optional[int] = ..., max_concurrent_runs: _Optional[int] = ..., max_calendars: _Optional[int] = ..., max_waiting_requested_runs: _Optional[int] = ..., revisions_per_job: _Optional[int] = ..., fair_weight: _Optional[int] = ...) -> None: ...

class SigningSecret(_message.Message):
    __slots__ = ("secret_id", "create_time", "expire_time")
    SECRET_ID_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    secret_id: str
    create_time: _timestamp_pb2.Timestamp
    expire_time: _timestamp_pb2.Timestamp
    def __init__(self, secret_id: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CreateTenantRequest(_message.Message):
    __slots__ = ("tenant",)
    TENANT_FIELD_NUMBER: _ClassVar[int]
    tenant: Tenant
    def __init__(self, tenant: _Optional[_Union[Tenant, _Mapping]] = ...) -> None: ...

class CreateTenantResponse(_message.Message):
    __slots__ = ("tenant", "signing_secret")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    SIGNING_SECRET_FIELD_NUMBER: _ClassVar[int]
    tenant: Tenant
    signing_secret: str
    def __init__(self, tenant: _Optional[_Union[Tenant, _Mapping]] = ..., signing_secret: _Optional[str] = ...) -> None: ...

class GetTenantRequest(_message.Message):
    __slots__ = ("tenant_id",)
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    def __init__(self, tenant_id: _Optional[str] = ...) -> None: ...

class GetTenantResponse(_message.Message):
    __slots__ = ("tenant",)
    TENANT_FIELD_NUMBER: _ClassVar[int]
    tenant: Tenant
    def __init__(self, tenant: _Optional[_Union[Tenant, _Mapping]] = ...) -> None: ...

class ListTenantsRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListTenantsResponse(_message.Message):
    __slots__ = ("tenants", "next_page_token")
    TENANTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    tenants: _containers.RepeatedCompositeFieldContainer[Tenant]
    next_page_token: str
    def __init__(self, tenants: _Optional[_Iterable[_Union[Tenant, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class UpdateTenantRequest(_message.Message):
    __slots__ = ("tenant", "update_mask")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    tenant: Tenant
    update_mask: _field_mask_pb2.FieldMask
    def __init__(self, tenant: _Optional[_Union[Tenant, _Mapping]] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ...) -> None: ...

class UpdateTenantResponse(_message.Message):
    __slots__ = ("tenant",)
    TENANT_FIELD_NUMBER: _ClassVar[int]
    tenant: Tenant
    def __init__(self, tenant: _Optional[_Union[Tenant, _Mapping]] = ...) -> None: ...

class ApiToken(_message.Message):
    __slots__ = ("token_id", "tenant_id", "role", "description", "prefix", "create_time", "expire_time", "last_used_time", "revoke_time", "scopes")
    TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_USED_TIME_FIELD_NUMBER: _ClassVar[int]
    REVOKE_TIME_FIELD_NUMBER: _ClassVar[int]
    SCOPES_FIELD_NUMBER: _ClassVar[int]
    token_id: str
    tenant_id: str
    role: TokenRole
    description: str
    prefix: str
    create_time: _timestamp_pb2.Timestamp
    expire_time: _timestamp_pb2.Timestamp
    last_used_time: _timestamp_pb2.Timestamp
    revoke_time: _timestamp_pb2.Timestamp
    scopes: _containers.RepeatedScalarFieldContainer[TokenScope]
    def __init__(self, token_id: _Optional[str] = ..., tenant_id: _Optional[str] = ..., role: _Optional[_Union[TokenRole, str]] = ..., description: _Optional[str] = ..., prefix: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_used_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., revoke_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., scopes: _Optional[_Iterable[_Union[TokenScope, str]]] = ...) -> None: ...

class CreateApiTokenRequest(_message.Message):
    __slots__ = ("tenant_id", "role", "description", "expire_time", "scopes")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    SCOPES_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    role: TokenRole
    description: str
    expire_time: _timestamp_pb2.Timestamp
    scopes: _containers.RepeatedScalarFieldContainer[TokenScope]
    def __init__(self, tenant_id: _Optional[str] = ..., role: _Optional[_Union[TokenRole, str]] = ..., description: _Optional[str] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., scopes: _Optional[_Iterable[_Union[TokenScope, str]]] = ...) -> None: ...

class CreateApiTokenResponse(_message.Message):
    __slots__ = ("token", "secret")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    token: ApiToken
    secret: str
    def __init__(self, token: _Optional[_Union[ApiToken, _Mapping]] = ..., secret: _Optional[str] = ...) -> None: ...

class ListApiTokensRequest(_message.Message):
    __slots__ = ("tenant_id", "include_revoked", "page_size", "page_token")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_REVOKED_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    include_revoked: bool
    page_size: int
    page_token: str
    def __init__(self, tenant_id: _Optional[str] = ..., include_revoked: _Optional[bool] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListApiTokensResponse(_message.Message):
    __slots__ = ("tokens", "next_page_token")
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    tokens: _containers.RepeatedCompositeFieldContainer[ApiToken]
    next_page_token: str
    def __init__(self, tokens: _Optional[_Iterable[_Union[ApiToken, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class RevokeApiTokenRequest(_message.Message):
    __slots__ = ("token_id",)
    TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    token_id: str
    def __init__(self, token_id: _Optional[str] = ...) -> None: ...

class RevokeApiTokenResponse(_message.Message):
    __slots__ = ("token",)
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    token: ApiToken
    def __init__(self, token: _Optional[_Union[ApiToken, _Mapping]] = ...) -> None: ...

class RotateSigningSecretRequest(_message.Message):
    __slots__ = ("tenant_id", "overlap")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    overlap: _duration_pb2.Duration
    def __init__(self, tenant_id: _Optional[str] = ..., overlap: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class RotateSigningSecretResponse(_message.Message):
    __slots__ = ("tenant", "signing_secret")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    SIGNING_SECRET_FIELD_NUMBER: _ClassVar[int]
    tenant: Tenant
    signing_secret: str
    def __init__(self, tenant: _Optional[_Union[Tenant, _Mapping]] = ..., signing_secret: _Optional[str] = ...) -> None: ...

class ClusterStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ClusterStatusResponse(_message.Message):
    __slots__ = ("cluster", "members", "partitions", "dispatch_lag", "oldest_due_time", "partition_count", "observed_at")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    DISPATCH_LAG_FIELD_NUMBER: _ClassVar[int]
    OLDEST_DUE_TIME_FIELD_NUMBER: _ClassVar[int]
    PARTITION_COUNT_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_AT_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    members: _containers.RepeatedCompositeFieldContainer[ClusterMember]
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionOwner]
    dispatch_lag: _duration_pb2.Duration
    oldest_due_time: _timestamp_pb2.Timestamp
    partition_count: int
    observed_at: _timestamp_pb2.Timestamp
    def __init__(self, cluster: _Optional[str] = ..., members: _Optional[_Iterable[_Union[ClusterMember, _Mapping]]] = ..., partitions: _Optional[_Iterable[_Union[PartitionOwner, _Mapping]]] = ..., dispatch_lag: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., oldest_due_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., partition_count: _Optional[int] = ..., observed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ClusterMember(_message.Message):
    __slots__ = ("node_id", "address", "partitions_owned", "lease_id", "since", "version")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_OWNED_FIELD_NUMBER: _ClassVar[int]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    address: str
    partitions_owned: int
    lease_id: int
    since: _timestamp_pb2.Timestamp
    version: str
    def __init__(self, node_id: _Optional[str] = ..., address: _Optional[str] = ..., partitions_owned: _Optional[int] = ..., lease_id: _Optional[int] = ..., since: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., version: _Optional[str] = ...) -> None: ...

class PartitionOwner(_message.Message):
    __slots__ = ("partition", "node_id")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    partition: int
    node_id: str
    def __init__(self, partition: _Optional[int] = ..., node_id: _Optional[str] = ...) -> None: ...

class SetTenantEgressPolicyRequest(_message.Message):
    __slots__ = ("tenant_id", "policy", "use_default")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    USE_DEFAULT_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    policy: _egress_pb2.EgressPolicy
    use_default: bool
    def __init__(self, tenant_id: _Optional[str] = ..., policy: _Optional[_Union[_egress_pb2.EgressPolicy, _Mapping]] = ..., use_default: _Optional[bool] = ...) -> None: ...

class SetTenantEgressPolicyResponse(_message.Message):
    __slots__ = ("egress",)
    EGRESS_FIELD_NUMBER: _ClassVar[int]
    egress: _egress_pb2.EffectiveEgressPolicy
    def __init__(self, egress: _Optional[_Union[_egress_pb2.EffectiveEgressPolicy, _Mapping]] = ...) -> None: ...

class GetTenantEgressPolicyRequest(_message.Message):
    __slots__ = ("tenant_id",)
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    def __init__(self, tenant_id: _Optional[str] = ...) -> None: ...

class GetTenantEgressPolicyResponse(_message.Message):
    __slots__ = ("egress",)
    EGRESS_FIELD_NUMBER: _ClassVar[int]
    egress: _egress_pb2.EffectiveEgressPolicy
    def __init__(self, egress: _Optional[_Union[_egress_pb2.EffectiveEgressPolicy, _Mapping]] = ...) -> None: ...

class RewrapSecretsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RewrapSecretsResponse(_message.Message):
    __slots__ = ("rewrapped", "remaining", "key_id", "identity_keys")
    REWRAPPED_FIELD_NUMBER: _ClassVar[int]
    REMAINING_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    IDENTITY_KEYS_FIELD_NUMBER: _ClassVar[int]
    rewrapped: int
    remaining: int
    key_id: str
    identity_keys: int
    def __init__(self, rewrapped: _Optional[int] = ..., remaining: _Optional[int] = ..., key_id: _Optional[str] = ..., identity_keys: _Optional[int] = ...) -> None: ...

class RotateIdentityKeyRequest(_message.Message):
    __slots__ = ("overlap",)
    OVERLAP_FIELD_NUMBER: _ClassVar[int]
    overlap: _duration_pb2.Duration
    def __init__(self, overlap: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class RotateIdentityKeyResponse(_message.Message):
    __slots__ = ("kid",)
    KID_FIELD_NUMBER: _ClassVar[int]
    kid: str
    def __init__(self, kid: _Optional[str] = ...) -> None: ...

class ListIdentityKeysRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListIdentityKeysResponse(_message.Message):
    __slots__ = ("keys",)
    KEYS_FIELD_NUMBER: _ClassVar[int]
    keys: _containers.RepeatedCompositeFieldContainer[IdentityKey]
    def __init__(self, keys: _Optional[_Iterable[_Union[IdentityKey, _Mapping]]] = ...) -> None: ...

class IdentityKey(_message.Message):
    __slots__ = ("kid", "algorithm", "create_time", "retire_time", "signing", "published", "key_id")
    KID_FIELD_NUMBER: _ClassVar[int]
    ALGORITHM_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    RETIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    SIGNING_FIELD_NUMBER: _ClassVar[int]
    PUBLISHED_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    kid: str
    algorithm: str
    create_time: _timestamp_pb2.Timestamp
    retire_time: _timestamp_pb2.Timestamp
    signing: bool
    published: bool
    key_id: str
    def __init__(self, kid: _Optional[str] = ..., algorithm: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., retire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., signing: _Optional[bool] = ..., published: _Optional[bool] = ..., key_id: _Optional[str] = ...) -> None: ...
