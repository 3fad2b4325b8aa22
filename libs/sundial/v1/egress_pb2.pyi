import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class EgressProtocol(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EGRESS_PROTOCOL_UNSPECIFIED: _ClassVar[EgressProtocol]
    EGRESS_PROTOCOL_HTTP: _ClassVar[EgressProtocol]
    EGRESS_PROTOCOL_GRPC: _ClassVar[EgressProtocol]
EGRESS_PROTOCOL_UNSPECIFIED: EgressProtocol
EGRESS_PROTOCOL_HTTP: EgressProtocol
EGRESS_PROTOCOL_GRPC: EgressProtocol

class EgressRule(_message.Message):
    __slots__ = ("host", "cidr", "protocols")
    HOST_FIELD_NUMBER: _ClassVar[int]
    CIDR_FIELD_NUMBER: _ClassVar[int]
    PROTOCOLS_FIELD_NUMBER: _ClassVar[int]
    host: str
    cidr: str
    protocols: _containers.RepeatedScalarFieldContainer[EgressProtocol]
    def __init__(self, host: _Optional[str] = ..., cidr: _Optional[str] = ..., protocols: _Optional[_Iterable[_Union[EgressProtocol, str]]] = ...) -> None: ...

class EgressPolicy(_message.Message):
    __slots__ = ("rules",)
    RULES_FIELD_NUMBER: _ClassVar[int]
    rules: _containers.RepeatedCompositeFieldContainer[EgressRule]
    def __init__(self, rules: _Optional[_Iterable[_Union[EgressRule, _Mapping]]] = ...) -> None: ...

class EffectiveEgressPolicy(_message.Message):
    __slots__ = ("policy", "tenant_specific", "loopback_allowed", "update_time")
    POLICY_FIELD_NUMBER: _ClassVar[int]
    TENANT_SPECIFIC_FIELD_NUMBER: _ClassVar[int]
    LOOPBACK_ALLOWED_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    policy: EgressPolicy
    tenant_specific: bool
    loopback_allowed: bool
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, policy: _Optional[_Union[EgressPolicy, _Mapping]] = ..., tenant_specific: _Optional[bool] = ..., loopback_allowed: _Optional[bool] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
