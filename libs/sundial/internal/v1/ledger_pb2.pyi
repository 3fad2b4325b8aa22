import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from sundial.v1 import egress_pb2 as _egress_pb2
from sundial.v1 import job_pb2 as _job_pb2
from sundial.v1 import run_pb2 as _run_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RejectReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REJECT_REASON_UNSPECIFIED: _ClassVar[RejectReason]
    REJECT_REASON_FINISHED: _ClassVar[RejectReason]
    REJECT_REASON_LEASED_ELSEWHERE: _ClassVar[RejectReason]
    REJECT_REASON_TENANT_AT_CAPACITY: _ClassVar[RejectReason]
    REJECT_REASON_NOT_FOUND: _ClassVar[RejectReason]
    REJECT_REASON_CANCELLED: _ClassVar[RejectReason]
    REJECT_REASON_NOT_DUE: _ClassVar[RejectReason]
    REJECT_REASON_ANSWER_FULL: _ClassVar[RejectReason]
    REJECT_REASON_KEY_AT_CAPACITY: _ClassVar[RejectReason]

class OutcomeStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OUTCOME_STATUS_UNSPECIFIED: _ClassVar[OutcomeStatus]
    OUTCOME_STATUS_SUCCEEDED: _ClassVar[OutcomeStatus]
    OUTCOME_STATUS_FAILED_RETRYABLE: _ClassVar[OutcomeStatus]
    OUTCOME_STATUS_FAILED_FINAL: _ClassVar[OutcomeStatus]
    OUTCOME_STATUS_CANCELLED: _ClassVar[OutcomeStatus]
    OUTCOME_STATUS_TIMED_OUT: _ClassVar[OutcomeStatus]

class FenceReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FENCE_REASON_UNSPECIFIED: _ClassVar[FenceReason]
    FENCE_REASON_STALE_ATTEMPT: _ClassVar[FenceReason]
    FENCE_REASON_NOT_RUNNING: _ClassVar[FenceReason]
    FENCE_REASON_NOT_FOUND: _ClassVar[FenceReason]
    FENCE_REASON_NOT_HOLDER: _ClassVar[FenceReason]
REJECT_REASON_UNSPECIFIED: RejectReason
REJECT_REASON_FINISHED: RejectReason
REJECT_REASON_LEASED_ELSEWHERE: RejectReason
REJECT_REASON_TENANT_AT_CAPACITY: RejectReason
REJECT_REASON_NOT_FOUND: RejectReason
REJECT_REASON_CANCELLED: RejectReason
REJECT_REASON_NOT_DUE: RejectReason
REJECT_REASON_ANSWER_FULL: RejectReason
REJECT_REASON_KEY_AT_CAPACITY: RejectReason
OUTCOME_STATUS_UNSPECIFIED: OutcomeStatus
OUTCOME_STATUS_SUCCEEDED: OutcomeStatus
OUTCOME_STATUS_FAILED_RETRYABLE: OutcomeStatus
OUTCOME_STATUS_FAILED_FINAL: OutcomeStatus
OUTCOME_STATUS_CANCELLED: OutcomeStatus
OUTCOME_STATUS_TIMED_OUT: OutcomeStatus
FENCE_REASON_UNSPECIFIED: FenceReason
FENCE_REASON_STALE_ATTEMPT: FenceReason
FENCE_REASON_NOT_RUNNING: FenceReason
FENCE_REASON_NOT_FOUND: FenceReason
FENCE_REASON_NOT_HOLDER: FenceReason

class LeaseRunsRequest(_message.Message):
    __slots__ = ("executor_id", "runs", "lease_ttl")
    EXECUTOR_ID_FIELD_NUMBER: _ClassVar[int]
    RUNS_FIELD_NUMBER: _ClassVar[int]
    LEASE_TTL_FIELD_NUMBER: _ClassVar[int]
    executor_id: str
    runs: _containers.RepeatedCompositeFieldContainer[_run_pb2.RunRef]
    lease_ttl: _duration_pb2.Duration
    def __init__(self, executor_id: _Optional[str] = ..., runs: _Optional[_Iterable[_Union[_run_pb2.RunRef, _Mapping]]] = ..., lease_ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class LeaseRunsResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[LeaseResult]
    def __init__(self, results: _Optional[_Iterable[_Union[LeaseResult, _Mapping]]] = ...) -> None: ...

class LeaseResult(_message.Message):
    __slots__ = ("run", "grant", "rejection")
    RUN_FIELD_NUMBER: _ClassVar[int]
    GRANT_FIELD_NUMBER: _ClassVar[int]
    REJECTION_FIELD_NUMBER: _ClassVar[int]
    run: _run_pb2.RunRef
    grant: Grant
    rejection: Rejection
    def __init__(self, run: _Optional[_Union[_run_pb2.RunRef, _Mapping]] = ..., grant: _Optional[_Union[Grant, _Mapping]] = ..., rejection: _Optional[_Union[Rejection, _Mapping]] = ...) -> None: ...

class Grant(_message.Message):
    __slots__ = ("attempt", "lease_until", "target", "payload", "run_timeout", "tenant_id", "run_key", "signature", "kind", "job_name", "lease_id", "egress", "traceparent", "headers")
    class HeadersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    LEASE_UNTIL_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    RUN_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_KEY_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    JOB_NAME_FIELD_NUMBER: _ClassVar[int]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    EGRESS_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    lease_until: _timestamp_pb2.Timestamp
    target: _job_pb2.Target
    payload: bytes
    run_timeout: _duration_pb2.Duration
    tenant_id: str
    run_key: str
    signature: str
    kind: _run_pb2.RunKind
    job_name: str
    lease_id: str
    egress: _egress_pb2.EgressPolicy
    traceparent: str
    headers: _containers.ScalarMap[str, str]
    def __init__(self, attempt: _Optional[int] = ..., lease_until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., target: _Optional[_Union[_job_pb2.Target, _Mapping]] = ..., payload: _Optional[bytes] = ..., run_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., tenant_id: _Optional[str] = ..., run_key: _Optional[str] = ..., signature: _Optional[str] = ..., kind: _Optional[_Union[_run_pb2.RunKind, str]] = ..., job_name: _Optional[str] = ..., lease_id: _Optional[str] = ..., egress: _Optional[_Union[_egress_pb2.EgressPolicy, _Mapping]] = ..., traceparent: _Optional[str] = ..., headers: _Optional[_Mapping[str, str]] = ...) -> None: ...

class Rejection(_message.Message):
    __slots__ = ("reason", "retry_after", "detail")
    REASON_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    reason: RejectReason
    retry_after: _duration_pb2.Duration
    detail: str
    def __init__(self, reason: _Optional[_Union[RejectReason, str]] = ..., retry_after: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., detail: _Optional[str] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("executor_id", "runs", "lease_ttl", "draining")
    EXECUTOR_ID_FIELD_NUMBER: _ClassVar[int]
    RUNS_FIELD_NUMBER: _ClassVar[int]
    LEASE_TTL_FIELD_NUMBER: _ClassVar[int]
    DRAINING_FIELD_NUMBER: _ClassVar[int]
    executor_id: str
    runs: _containers.RepeatedCompositeFieldContainer[HeldRun]
    lease_ttl: _duration_pb2.Duration
    draining: bool
    def __init__(self, executor_id: _Optional[str] = ..., runs: _Optional[_Iterable[_Union[HeldRun, _Mapping]]] = ..., lease_ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., draining: _Optional[bool] = ...) -> None: ...

class HeldRun(_message.Message):
    __slots__ = ("run", "attempt", "lease_id")
    RUN_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    run: _run_pb2.RunRef
    attempt: int
    lease_id: str
    def __init__(self, run: _Optional[_Union[_run_pb2.RunRef, _Mapping]] = ..., attempt: _Optional[int] = ..., lease_id: _Optional[str] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ("extended", "cancel", "lost", "heartbeat_interval")
    EXTENDED_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    LOST_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    extended: _containers.RepeatedCompositeFieldContainer[LeaseExtension]
    cancel: _containers.RepeatedCompositeFieldContainer[CancelOrder]
    lost: _containers.RepeatedCompositeFieldContainer[HeldRun]
    heartbeat_interval: _duration_pb2.Duration
    def __init__(self, extended: _Optional[_Iterable[_Union[LeaseExtension, _Mapping]]] = ..., cancel: _Optional[_Iterable[_Union[CancelOrder, _Mapping]]] = ..., lost: _Optional[_Iterable[_Union[HeldRun, _Mapping]]] = ..., heartbeat_interval: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class LeaseExtension(_message.Message):
    __slots__ = ("run", "attempt", "lease_until")
    RUN_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    LEASE_UNTIL_FIELD_NUMBER: _ClassVar[int]
    run: _run_pb2.RunRef
    attempt: int
    lease_until: _timestamp_pb2.Timestamp
    def __init__(self, run: _Optional[_Union[_run_pb2.RunRef, _Mapping]] = ..., attempt: _Optional[int] = ..., lease_until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CancelOrder(_message.Message):
    __slots__ = ("run", "attempt", "reason")
    RUN_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    run: _run_pb2.RunRef
    attempt: int
    reason: str
    def __init__(self, run: _Optional[_Union[_run_pb2.RunRef, _Mapping]] = ..., attempt: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class CompleteRunsRequest(_message.Message):
    __slots__ = ("executor_id", "outcomes")
    EXECUTOR_ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    executor_id: str
    outcomes: _containers.RepeatedCompositeFieldContainer[Outcome]
    def __init__(self, executor_id: _Optional[str] = ..., outcomes: _Optional[_Iterable[_Union[Outcome, _Mapping]]] = ...) -> None: ...

class Outcome(_message.Message):
    __slots__ = ("run", "attempt", "lease_id", "status", "error", "error_class", "retry_after", "started_at", "finished_at", "http_status", "grpc_code")
    RUN_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_CLASS_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    HTTP_STATUS_FIELD_NUMBER: _ClassVar[int]
    GRPC_CODE_FIELD_NUMBER: _ClassVar[int]
    run: _run_pb2.RunRef
    attempt: int
    lease_id: str
    status: OutcomeStatus
    error: str
    error_class: _run_pb2.ErrorClass
    retry_after: _duration_pb2.Duration
    started_at: _timestamp_pb2.Timestamp
    finished_at: _timestamp_pb2.Timestamp
    http_status: int
    grpc_code: int
    def __init__(self, run: _Optional[_Union[_run_pb2.RunRef, _Mapping]] = ..., attempt: _Optional[int] = ..., lease_id: _Optional[str] = ..., status: _Optional[_Union[OutcomeStatus, str]] = ..., error: _Optional[str] = ..., error_class: _Optional[_Union[_run_pb2.ErrorClass, str]] = ..., retry_after: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., finished_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., http_status: _Optional[int] = ..., grpc_code: _Optional[int] = ...) -> None: ...

class CompleteRunsResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[CompletionResult]
    def __init__(self, results: _Optional[_Iterable[_Union[CompletionResult, _Mapping]]] = ...) -> None: ...

class CompletionResult(_message.Message):
    __slots__ = ("run", "accepted", "fence_reason", "next_status", "next_attempt_at")
    RUN_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    FENCE_REASON_FIELD_NUMBER: _ClassVar[int]
    NEXT_STATUS_FIELD_NUMBER: _ClassVar[int]
    NEXT_ATTEMPT_AT_FIELD_NUMBER: _ClassVar[int]
    run: _run_pb2.RunRef
    accepted: bool
    fence_reason: FenceReason
    next_status: _run_pb2.RunStatus
    next_attempt_at: _timestamp_pb2.Timestamp
    def __init__(self, run: _Optional[_Union[_run_pb2.RunRef, _Mapping]] = ..., accepted: _Optional[bool] = ..., fence_reason: _Optional[_Union[FenceReason, str]] = ..., next_status: _Optional[_Union[_run_pb2.RunStatus, str]] = ..., next_attempt_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
