import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from sundial.v1 import job_pb2 as _job_pb2
from sundial.v1 import run_pb2 as _run_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RunDispatch(_message.Message):
    __slots__ = ("partition", "dispatch_seq", "dispatched_at", "runs", "node_id", "tenants", "run_tenants", "tenant_weights")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    DISPATCH_SEQ_FIELD_NUMBER: _ClassVar[int]
    DISPATCHED_AT_FIELD_NUMBER: _ClassVar[int]
    RUNS_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    TENANTS_FIELD_NUMBER: _ClassVar[int]
    RUN_TENANTS_FIELD_NUMBER: _ClassVar[int]
    TENANT_WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    partition: int
    dispatch_seq: int
    dispatched_at: _timestamp_pb2.Timestamp
    runs: _containers.RepeatedCompositeFieldContainer[_run_pb2.RunRef]
    node_id: str
    tenants: _containers.RepeatedScalarFieldContainer[str]
    run_tenants: _containers.RepeatedScalarFieldContainer[int]
    tenant_weights: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, partition: _Optional[int] = ..., dispatch_seq: _Optional[int] = ..., dispatched_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., runs: _Optional[_Iterable[_Union[_run_pb2.RunRef, _Mapping]]] = ..., node_id: _Optional[str] = ..., tenants: _Optional[_Iterable[str]] = ..., run_tenants: _Optional[_Iterable[int]] = ..., tenant_weights: _Optional[_Iterable[int]] = ...) -> None: ...

class DeadLetter(_message.Message):
    __slots__ = ("run", "tenant_id", "target", "payload", "last_error", "error_class", "died_at", "job_name", "labels", "truncated")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    RUN_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_CLASS_FIELD_NUMBER: _ClassVar[int]
    DIED_AT_FIELD_NUMBER: _ClassVar[int]
    JOB_NAME_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    run: _run_pb2.Run
    tenant_id: str
    target: _job_pb2.Target
    payload: bytes
    last_error: str
    error_class: _run_pb2.ErrorClass
    died_at: _timestamp_pb2.Timestamp
    job_name: str
    labels: _containers.ScalarMap[str, str]
    truncated: bool
    def __init__(self, run: _Optional[_Union[_run_pb2.Run, _Mapping]] = ..., tenant_id: _Optional[str] = ..., target: _Optional[_Union[_job_pb2.Target, _Mapping]] = ..., payload: _Optional[bytes] = ..., last_error: _Optional[str] = ..., error_class: _Optional[_Union[_run_pb2.ErrorClass, str]] = ..., died_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., job_name: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., truncated: _Optional[bool] = ...) -> None: ...
