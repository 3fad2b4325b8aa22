import datetime

from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RunKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RUN_KIND_UNSPECIFIED: _ClassVar[RunKind]
    RUN_KIND_SCHEDULED: _ClassVar[RunKind]
    RUN_KIND_MANUAL: _ClassVar[RunKind]
    RUN_KIND_BACKFILL: _ClassVar[RunKind]

class RunStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RUN_STATUS_UNSPECIFIED: _ClassVar[RunStatus]
    RUN_STATUS_PENDING: _ClassVar[RunStatus]
    RUN_STATUS_QUEUED: _ClassVar[RunStatus]
    RUN_STATUS_RUNNING: _ClassVar[RunStatus]
    RUN_STATUS_RETRYING: _ClassVar[RunStatus]
    RUN_STATUS_SUCCEEDED: _ClassVar[RunStatus]
    RUN_STATUS_DEAD: _ClassVar[RunStatus]
    RUN_STATUS_SKIPPED: _ClassVar[RunStatus]
    RUN_STATUS_CANCELLED: _ClassVar[RunStatus]

class ErrorClass(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ERROR_CLASS_UNSPECIFIED: _ClassVar[ErrorClass]
    ERROR_CLASS_RETRYABLE: _ClassVar[ErrorClass]
    ERROR_CLASS_FINAL: _ClassVar[ErrorClass]
    ERROR_CLASS_TIMEOUT: _ClassVar[ErrorClass]
    ERROR_CLASS_CONNECTION: _ClassVar[ErrorClass]
    ERROR_CLASS_REFUSED: _ClassVar[ErrorClass]
    ERROR_CLASS_CANCELLED: _ClassVar[ErrorClass]
    ERROR_CLASS_LEASE_EXPIRED: _ClassVar[ErrorClass]
    ERROR_CLASS_TARGET_FORBIDDEN: _ClassVar[ErrorClass]

class SkipReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SKIP_REASON_UNSPECIFIED: _ClassVar[SkipReason]
    SKIP_REASON_OVERLAP: _ClassVar[SkipReason]
    SKIP_REASON_BUFFER_FULL: _ClassVar[SkipReason]
    SKIP_REASON_MISFIRE: _ClassVar[SkipReason]
RUN_KIND_UNSPECIFIED: RunKind
RUN_KIND_SCHEDULED: RunKind
RUN_KIND_MANUAL: RunKind
RUN_KIND_BACKFILL: RunKind
RUN_STATUS_UNSPECIFIED: RunStatus
RUN_STATUS_PENDING: RunStatus
RUN_STATUS_QUEUED: RunStatus
RUN_STATUS_RUNNING: RunStatus
RUN_STATUS_RETRYING: RunStatus
RUN_STATUS_SUCCEEDED: RunStatus
RUN_STATUS_DEAD: RunStatus
RUN_STATUS_SKIPPED: RunStatus
RUN_STATUS_CANCELLED: RunStatus
ERROR_CLASS_UNSPECIFIED: ErrorClass
ERROR_CLASS_RETRYABLE: ErrorClass
ERROR_CLASS_FINAL: ErrorClass
ERROR_CLASS_TIMEOUT: ErrorClass
ERROR_CLASS_CONNECTION: ErrorClass
ERROR_CLASS_REFUSED: ErrorClass
ERROR_CLASS_CANCELLED: ErrorClass
ERROR_CLASS_LEASE_EXPIRED: ErrorClass
ERROR_CLASS_TARGET_FORBIDDEN: ErrorClass
SKIP_REASON_UNSPECIFIED: SkipReason
SKIP_REASON_OVERLAP: SkipReason
SKIP_REASON_BUFFER_FULL: SkipReason
SKIP_REASON_MISFIRE: SkipReason

class RunRef(_message.Message):
    __slots__ = ("job_id", "scheduled_at")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_AT_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    scheduled_at: _timestamp_pb2.Timestamp
    def __init__(self, job_id: _Optional[str] = ..., scheduled_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Run(_message.Message):
    __slots__ = ("job_id", "scheduled_at", "run_key", "kind", "status", "attempt", "lease_until", "executor_id", "started_at", "finished_at", "lateness", "last_error", "error_class", "skip_reason", "next_attempt_at", "create_time", "due_at", "cancel_requested", "replay_count", "last_http_status", "last_grpc_code")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_AT_FIELD_NUMBER: _ClassVar[int]
    RUN_KEY_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    LEASE_UNTIL_FIELD_NUMBER: _ClassVar[int]
    EXECUTOR_ID_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    LATENESS_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_CLASS_FIELD_NUMBER: _ClassVar[int]
    SKIP_REASON_FIELD_NUMBER: _ClassVar[int]
    NEXT_ATTEMPT_AT_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    DUE_AT_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    REPLAY_COUNT_FIELD_NUMBER: _ClassVar[int]
    LAST_HTTP_STATUS_FIELD_NUMBER: _ClassVar[int]
    LAST_GRPC_CODE_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    scheduled_at: _timestamp_pb2.Timestamp
    run_key: str
    kind: RunKind
    status: RunStatus
    attempt: int
    lease_until: _timestamp_pb2.Timestamp
    executor_id: str
    started_at: _timestamp_pb2.Timestamp
    finished_at: _timestamp_pb2.Timestamp
    lateness: _duration_pb2.Duration
    last_error: str
    error_class: ErrorClass
    skip_reason: SkipReason
    next_attempt_at: _timestamp_pb2.Timestamp
    create_time: _timestamp_pb2.Timestamp
    due_at: _timestamp_pb2.Timestamp
    cancel_requested: bool
    replay_count: int
    last_http_status: int
    last_grpc_code: int
    def __init__(self, job_id: _Optional[str] = ..., scheduled_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., run_key: _Optional[str] = ..., kind: _Optional[_Union[RunKind, str]] = ..., status: _Optional[_Union[RunStatus, str]] = ..., attempt: _Optional[int] = ..., lease_until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., executor_id: _Optional[str] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., finished_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., lateness: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., last_error: _Optional[str] = ..., error_class: _Optional[_Union[ErrorClass, str]] = ..., skip_reason: _Optional[_Union[SkipReason, str]] = ..., next_attempt_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., due_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cancel_requested: _Optional[bool] = ..., replay_count: _Optional[int] = ..., last_http_status: _Optional[int] = ..., last_grpc_code: _Optional[int] = ...) -> None: ...
