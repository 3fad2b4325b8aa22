import datetime

from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GapPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    GAP_POLICY_UNSPECIFIED: _ClassVar[GapPolicy]
    GAP_POLICY_AUTO: _ClassVar[GapPolicy]
    GAP_POLICY_SHIFT: _ClassVar[GapPolicy]
    GAP_POLICY_SKIP: _ClassVar[GapPolicy]

class FoldPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FOLD_POLICY_UNSPECIFIED: _ClassVar[FoldPolicy]
    FOLD_POLICY_AUTO: _ClassVar[FoldPolicy]
    FOLD_POLICY_ONCE: _ClassVar[FoldPolicy]
    FOLD_POLICY_TWICE: _ClassVar[FoldPolicy]

class MisfirePolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MISFIRE_POLICY_UNSPECIFIED: _ClassVar[MisfirePolicy]
    MISFIRE_POLICY_RUN_ONCE: _ClassVar[MisfirePolicy]
    MISFIRE_POLICY_SKIP: _ClassVar[MisfirePolicy]
    MISFIRE_POLICY_CATCH_UP: _ClassVar[MisfirePolicy]

class OverlapPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OVERLAP_POLICY_UNSPECIFIED: _ClassVar[OverlapPolicy]
    OVERLAP_POLICY_SKIP: _ClassVar[OverlapPolicy]
    OVERLAP_POLICY_BUFFER_ONE: _ClassVar[OverlapPolicy]
    OVERLAP_POLICY_BUFFER_ALL: _ClassVar[OverlapPolicy]
    OVERLAP_POLICY_ALLOW_ALL: _ClassVar[OverlapPolicy]
    OVERLAP_POLICY_CANCEL_OTHER: _ClassVar[OverlapPolicy]
GAP_POLICY_UNSPECIFIED: GapPolicy
GAP_POLICY_AUTO: GapPolicy
GAP_POLICY_SHIFT: GapPolicy
GAP_POLICY_SKIP: GapPolicy
FOLD_POLICY_UNSPECIFIED: FoldPolicy
FOLD_POLICY_AUTO: FoldPolicy
FOLD_POLICY_ONCE: FoldPolicy
FOLD_POLICY_TWICE: FoldPolicy
MISFIRE_POLICY_UNSPECIFIED: MisfirePolicy
MISFIRE_POLICY_RUN_ONCE: MisfirePolicy
MISFIRE_POLICY_SKIP: MisfirePolicy
MISFIRE_POLICY_CATCH_UP: MisfirePolicy
OVERLAP_POLICY_UNSPECIFIED: OverlapPolicy
OVERLAP_POLICY_SKIP: OverlapPolicy
OVERLAP_POLICY_BUFFER_ONE: OverlapPolicy
OVERLAP_POLICY_BUFFER_ALL: OverlapPolicy
OVERLAP_POLICY_ALLOW_ALL: OverlapPolicy
OVERLAP_POLICY_CANCEL_OTHER: OverlapPolicy

class Job(_message.Message):
    __slots__ = ("job_id", "tenant_id", "name", "description", "schedule", "target", "payload", "policies", "labels", "paused", "pause_note", "next_run_at", "version", "create_time", "update_time", "stats", "uid", "pause_until")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    POLICIES_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    PAUSE_NOTE_FIELD_NUMBER: _ClassVar[int]
    NEXT_RUN_AT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    STATS_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    PAUSE_UNTIL_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    tenant_id: str
    name: str
    description: str
    schedule: Schedule
    target: Target
    payload: bytes
    policies: Policies
    labels: _containers.ScalarMap[str, str]
    paused: bool
    pause_note: str
    next_run_at: _timestamp_pb2.Timestamp
    version: int
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    stats: JobStats
    uid: str
    pause_until: _timestamp_pb2.Timestamp
    def __init__(self, job_id: _Optional[str] = ..., tenant_id: _Optional[str] = ..., name: _Optional[str] = ..., description: _Optional[str] = ..., schedule: _Optional[_Union[Schedule, _Mapping]] = ..., target: _Optional[_Union[Target, _Mapping]] = ..., payload: _Optional[bytes] = ..., policies: _Optional[_Union[Policies, _Mapping]] = ..., labels: _Optional[_Mapping[str, str]] = ..., paused: _Optional[bool] = ..., pause_note: _Optional[str] = ..., next_run_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., version: _Optional[int] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., stats: _Optional[_Union[JobStats, _Mapping]] = ..., uid: _Optional[str] = ..., pause_until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class JobStats(_message.Message):
    __slots__ = ("last_fire_time", "last_success_time", "last_failure_time", "total_runs", "succeeded", "failed", "skipped_misfires", "last_lateness", "skipped_overlaps", "cancelled", "scheduled_occurrences")
    LAST_FIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_SUCCESS_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_FAILURE_TIME_FIELD_NUMBER: _ClassVar[int]
    TOTAL_RUNS_FIELD_NUMBER: _ClassVar[int]
    SUCCEEDED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_MISFIRES_FIELD_NUMBER: _ClassVar[int]
    LAST_LATENESS_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_OVERLAPS_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_OCCURRENCES_FIELD_NUMBER: _ClassVar[int]
    last_fire_time: _timestamp_pb2.Timestamp
    last_success_time: _timestamp_pb2.Timestamp
    last_failure_time: _timestamp_pb2.Timestamp
    total_runs: int
    succeeded: int
    failed: int
    skipped_misfires: int
    last_lateness: _duration_pb2.Duration
    skipped_overlaps: int
    cancelled: int
    scheduled_occurrences: int
    def __init__(self, last_fire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_success_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_failure_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., total_runs: _Optional[int] = ..., succeeded: _Optional[int] = ..., failed: _Optional[int] = ..., skipped_misfires: _Optional[int] = ..., last_lateness: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., skipped_overlaps: _Optional[int] = ..., cancelled: _Optional[int] = ..., scheduled_occurrences: _Optional[int] = ...) -> None: ...

class Schedule(_message.Message):
    __slots__ = ("cron", "interval", "once", "time_zone", "start_time", "end_time", "jitter", "dst", "max_runs", "specs", "calendars")
    CRON_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    ONCE_FIELD_NUMBER: _ClassVar[int]
    TIME_ZONE_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    JITTER_FIELD_NUMBER: _ClassVar[int]
    DST_FIELD_NUMBER: _ClassVar[int]
    MAX_RUNS_FIELD_NUMBER: _ClassVar[int]
    SPECS_FIELD_NUMBER: _ClassVar[int]
    CALENDARS_FIELD_NUMBER: _ClassVar[int]
    cron: str
    interval: IntervalSchedule
    once: _timestamp_pb2.Timestamp
    time_zone: str
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    jitter: _duration_pb2.Duration
    dst: DstPolicy
    max_runs: int
    specs: _containers.RepeatedCompositeFieldContainer[ScheduleSpec]
    calendars: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, cron: _Optional[str] = ..., interval: _Optional[_Union[IntervalSchedule, _Mapping]] = ..., once: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., time_zone: _Optional[str] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., jitter: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., dst: _Optional[_Union[DstPolicy, _Mapping]] = ..., max_runs: _Optional[int] = ..., specs: _Optional[_Iterable[_Union[ScheduleSpec, _Mapping]]] = ..., calendars: _Optional[_Iterable[str]] = ...) -> None: ...

class ScheduleSpec(_message.Message):
    __slots__ = ("cron", "interval", "once")
    CRON_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    ONCE_FIELD_NUMBER: _ClassVar[int]
    cron: str
    interval: IntervalSchedule
    once: _timestamp_pb2.Timestamp
    def __init__(self, cron: _Optional[str] = ..., interval: _Optional[_Union[IntervalSchedule, _Mapping]] = ..., once: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class IntervalSchedule(_message.Message):
    __slots__ = ("every", "offset", "from_end")
    EVERY_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    FROM_END_FIELD_NUMBER: _ClassVar[int]
    every: _duration_pb2.Duration
    offset: _duration_pb2.Duration
    from_end: bool
    def __init__(self, every: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., offset: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., from_end: _Optional[bool] = ...) -> None: ...

class DstPolicy(_message.Message):
    __slots__ = ("gap", "fold")
    GAP_FIELD_NUMBER: _ClassVar[int]
    FOLD_FIELD_NUMBER: _ClassVar[int]
    gap: GapPolicy
    fold: FoldPolicy
    def __init__(self, gap: _Optional[_Union[GapPolicy, str]] = ..., fold: _Optional[_Union[FoldPolicy, str]] = ...) -> None: ...

class Policies(_message.Message):
    __slots__ = ("misfire", "misfire_threshold", "catchup_window", "max_catchup", "overlap", "retry", "run_timeout", "lateness_threshold", "failure", "flow")
    MISFIRE_FIELD_NUMBER: _ClassVar[int]
    MISFIRE_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    CATCHUP_WINDOW_FIELD_NUMBER: _ClassVar[int]
    MAX_CATCHUP_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_FIELD_NUMBER: _ClassVar[int]
    RETRY_FIELD_NUMBER: _ClassVar[int]
    RUN_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    LATENESS_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    FLOW_FIELD_NUMBER: _ClassVar[int]
    misfire: MisfirePolicy
    misfire_threshold: _duration_pb2.Duration
    catchup_window: _duration_pb2.Duration
    max_catchup: int
    overlap: OverlapPolicy
    retry: RetryPolicy
    run_timeout: _duration_pb2.Duration
    lateness_threshold: _duration_pb2.Duration
    failure: FailurePolicy
    flow: FlowPolicy
    def __init__(self, misfire: _Optional[_Union[MisfirePolicy, str]] = ..., misfire_threshold: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., catchup_window: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., max_catchup: _Optional[int] = ..., overlap: _Optional[_Union[OverlapPolicy, str]] = ..., retry: _Optional[_Union[RetryPolicy, _Mapping]] = ..., run_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., lateness_threshold: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., failure: _Optional[_Union[FailurePolicy, _Mapping]] = ..., flow: _Optional[_Union[FlowPolicy, _Mapping]] = ...) -> None: ...

class FlowPolicy(_message.Message):
    __slots__ = ("priority", "rate_limit_key", "concurrency_key")
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    RATE_LIMIT_KEY_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    priority: int
    rate_limit_key: str
    concurrency_key: str
    def __init__(self, priority: _Optional[int] = ..., rate_limit_key: _Optional[str] = ..., concurrency_key: _Optional[str] = ...) -> None: ...

class FailurePolicy(_message.Message):
    __slots__ = ("pause_after_consecutive_dead",)
    PAUSE_AFTER_CONSECUTIVE_DEAD_FIELD_NUMBER: _ClassVar[int]
    pause_after_consecutive_dead: int
    def __init__(self, pause_after_consecutive_dead: _Optional[int] = ...) -> None: ...

class RetryPolicy(_message.Message):
    __slots__ = ("max_attempts", "base_delay", "max_delay")
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    BASE_DELAY_FIELD_NUMBER: _ClassVar[int]
    MAX_DELAY_FIELD_NUMBER: _ClassVar[int]
    max_attempts: int
    base_delay: _duration_pb2.Duration
    max_delay: _duration_pb2.Duration
    def __init__(self, max_attempts: _Optional[int] = ..., base_delay: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., max_delay: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class Target(_message.Message):
    __slots__ = ("http", "grpc")
    HTTP_FIELD_NUMBER: _ClassVar[int]
    GRPC_FIELD_NUMBER: _ClassVar[int]
    http: HttpTarget
    grpc: GrpcTarget
    def __init__(self, http: _Optional[_Union[HttpTarget, _Mapping]] = ..., grpc: _Optional[_Union[GrpcTarget, _Mapping]] = ...) -> None: ...

class HttpTarget(_message.Message):
    __slots__ = ("url", "method", "headers", "auth")
    class HeadersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    URL_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    AUTH_FIELD_NUMBER: _ClassVar[int]
    url: str
    method: str
    headers: _containers.ScalarMap[str, str]
    auth: TargetAuth
    def __init__(self, url: _Optional[str] = ..., method: _Optional[str] = ..., headers: _Optional[_Mapping[str, str]] = ..., auth: _Optional[_Union[TargetAuth, _Mapping]] = ...) -> None: ...

class GrpcTarget(_message.Message):
    __slots__ = ("address", "plaintext", "metadata", "auth")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    PLAINTEXT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    AUTH_FIELD_NUMBER: _ClassVar[int]
    address: str
    plaintext: bool
    metadata: _containers.ScalarMap[str, str]
    auth: TargetAuth
    def __init__(self, address: _Optional[str] = ..., plaintext: _Optional[bool] = ..., metadata: _Optional[_Mapping[str, str]] = ..., auth: _Optional[_Union[TargetAuth, _Mapping]] = ...) -> None: ...

class TargetAuth(_message.Message):
    __slots__ = ("standard_webhooks", "identity_token")
    STANDARD_WEBHOOKS_FIELD_NUMBER: _ClassVar[int]
    IDENTITY_TOKEN_FIELD_NUMBER: _ClassVar[int]
    standard_webhooks: bool
    identity_token: IdentityToken
    def __init__(self, standard_webhooks: _Optional[bool] = ..., identity_token: _Optional[_Union[IdentityToken, _Mapping]] = ...) -> None: ...

class IdentityToken(_message.Message):
    __slots__ = ("audience", "lifetime")
    AUDIENCE_FIELD_NUMBER: _ClassVar[int]
    LIFETIME_FIELD_NUMBER: _ClassVar[int]
    audience: str
    lifetime: _duration_pb2.Duration
    def __init__(self, audience: _Optional[str] = ..., lifetime: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...
