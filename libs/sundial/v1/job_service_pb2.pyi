import datetime

from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import field_mask_pb2 as _field_mask_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from sundial.v1 import bulk_pb2 as _bulk_pb2
from sundial.v1 import calendar_pb2 as _calendar_pb2
from sundial.v1 import egress_pb2 as _egress_pb2
from sundial.v1 import flow_pb2 as _flow_pb2
from sundial.v1 import job_pb2 as _job_pb2
from sundial.v1 import run_pb2 as _run_pb2
from sundial.v1 import secret_pb2 as _secret_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ApplyOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    APPLY_OUTCOME_UNSPECIFIED: _ClassVar[ApplyOutcome]
    APPLY_OUTCOME_CREATED: _ClassVar[ApplyOutcome]
    APPLY_OUTCOME_UPDATED: _ClassVar[ApplyOutcome]
    APPLY_OUTCOME_UNCHANGED: _ClassVar[ApplyOutcome]

class JobView(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JOB_VIEW_UNSPECIFIED: _ClassVar[JobView]
    JOB_VIEW_BASIC: _ClassVar[JobView]
    JOB_VIEW_FULL: _ClassVar[JobView]

class DstAnnotation(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DST_ANNOTATION_UNSPECIFIED: _ClassVar[DstAnnotation]
    DST_ANNOTATION_NONE: _ClassVar[DstAnnotation]
    DST_ANNOTATION_GAP_SHIFTED: _ClassVar[DstAnnotation]
    DST_ANNOTATION_GAP_SKIPPED: _ClassVar[DstAnnotation]
    DST_ANNOTATION_FOLD_FIRST: _ClassVar[DstAnnotation]
    DST_ANNOTATION_FOLD_SECOND: _ClassVar[DstAnnotation]
    DST_ANNOTATION_FOLD_SKIPPED: _ClassVar[DstAnnotation]

class NotificationEventKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NOTIFICATION_EVENT_KIND_UNSPECIFIED: _ClassVar[NotificationEventKind]
    NOTIFICATION_EVENT_KIND_DEAD_RUN: _ClassVar[NotificationEventKind]
    NOTIFICATION_EVENT_KIND_AUTO_PAUSED: _ClassVar[NotificationEventKind]
    NOTIFICATION_EVENT_KIND_MISFIRE_SKIPPED: _ClassVar[NotificationEventKind]
    NOTIFICATION_EVENT_KIND_LATE_RUN: _ClassVar[NotificationEventKind]
    NOTIFICATION_EVENT_KIND_RECOVERED: _ClassVar[NotificationEventKind]
APPLY_OUTCOME_UNSPECIFIED: ApplyOutcome
APPLY_OUTCOME_CREATED: ApplyOutcome
APPLY_OUTCOME_UPDATED: ApplyOutcome
APPLY_OUTCOME_UNCHANGED: ApplyOutcome
JOB_VIEW_UNSPECIFIED: JobView
JOB_VIEW_BASIC: JobView
JOB_VIEW_FULL: JobView
DST_ANNOTATION_UNSPECIFIED: DstAnnotation
DST_ANNOTATION_NONE: DstAnnotation
DST_ANNOTATION_GAP_SHIFTED: DstAnnotation
DST_ANNOTATION_GAP_SKIPPED: DstAnnotation
DST_ANNOTATION_FOLD_FIRST: DstAnnotation
DST_ANNOTATION_FOLD_SECOND: DstAnnotation
DST_ANNOTATION_FOLD_SKIPPED: DstAnnotation
NOTIFICATION_EVENT_KIND_UNSPECIFIED: NotificationEventKind
NOTIFICATION_EVENT_KIND_DEAD_RUN: NotificationEventKind
NOTIFICATION_EVENT_KIND_AUTO_PAUSED: NotificationEventKind
NOTIFICATION_EVENT_KIND_MISFIRE_SKIPPED: NotificationEventKind
NOTIFICATION_EVENT_KIND_LATE_RUN: NotificationEventKind
NOTIFICATION_EVENT_KIND_RECOVERED: NotificationEventKind

class CreateCalendarRequest(_message.Message):
    __slots__ = ("calendar",)
    CALENDAR_FIELD_NUMBER: _ClassVar[int]
    calendar: _calendar_pb2.Calendar
    def __init__(self, calendar: _Optional[_Union[_calendar_pb2.Calendar, _Mapping]] = ...) -> None: ...

class CreateCalendarResponse(_message.Message):
    __slots__ = ("calendar",)
    CALENDAR_FIELD_NUMBER: _ClassVar[int]
    calendar: _calendar_pb2.Calendar
    def __init__(self, calendar: _Optional[_Union[_calendar_pb2.Calendar, _Mapping]] = ...) -> None: ...

class GetCalendarRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetCalendarResponse(_message.Message):
    __slots__ = ("calendar",)
    CALENDAR_FIELD_NUMBER: _ClassVar[int]
    calendar: _calendar_pb2.Calendar
    def __init__(self, calendar: _Optional[_Union[_calendar_pb2.Calendar, _Mapping]] = ...) -> None: ...

class ListCalendarsRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListCalendarsResponse(_message.Message):
    __slots__ = ("calendars", "next_page_token")
    CALENDARS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    calendars: _containers.RepeatedCompositeFieldContainer[_calendar_pb2.Calendar]
    next_page_token: str
    def __init__(self, calendars: _Optional[_Iterable[_Union[_calendar_pb2.Calendar, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class UpdateCalendarRequest(_message.Message):
    __slots__ = ("calendar", "update_mask", "expected_version")
    CALENDAR_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    calendar: _calendar_pb2.Calendar
    update_mask: _field_mask_pb2.FieldMask
    expected_version: int
    def __init__(self, calendar: _Optional[_Union[_calendar_pb2.Calendar, _Mapping]] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ..., expected_version: _Optional[int] = ...) -> None: ...

class UpdateCalendarResponse(_message.Message):
    __slots__ = ("calendar", "jobs_rescheduled")
    CALENDAR_FIELD_NUMBER: _ClassVar[int]
    JOBS_RESCHEDULED_FIELD_NUMBER: _ClassVar[int]
    calendar: _calendar_pb2.Calendar
    jobs_rescheduled: int
    def __init__(self, calendar: _Optional[_Union[_calendar_pb2.Calendar, _Mapping]] = ..., jobs_rescheduled: _Optional[int] = ...) -> None: ...

class DeleteCalendarRequest(_message.Message):
    __slots__ = ("name", "expected_version")
    NAME_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    name: str
    expected_version: int
    def __init__(self, name: _Optional[str] = ..., expected_version: _Optional[int] = ...) -> None: ...

class DeleteCalendarResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CreateJobRequest(_message.Message):
    __slots__ = ("job", "request_id", "job_id")
    JOB_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    request_id: str
    job_id: str
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ..., request_id: _Optional[str] = ..., job_id: _Optional[str] = ...) -> None: ...

class CreateJobResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ...) -> None: ...

class BatchCreateJobsRequest(_message.Message):
    __slots__ = ("jobs", "request_id")
    JOBS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[_job_pb2.Job]
    request_id: str
    def __init__(self, jobs: _Optional[_Iterable[_Union[_job_pb2.Job, _Mapping]]] = ..., request_id: _Optional[str] = ...) -> None: ...

class BatchCreateJobsResponse(_message.Message):
    __slots__ = ("jobs",)
    JOBS_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[_job_pb2.Job]
    def __init__(self, jobs: _Optional[_Iterable[_Union[_job_pb2.Job, _Mapping]]] = ...) -> None: ...

class ApplyJobRequest(_message.Message):
    __slots__ = ("job", "expected_version", "request_id", "validate_only")
    JOB_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    expected_version: int
    request_id: str
    validate_only: bool
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ..., expected_version: _Optional[int] = ..., request_id: _Optional[str] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class ApplyJobResponse(_message.Message):
    __slots__ = ("job", "outcome")
    JOB_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    outcome: ApplyOutcome
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ..., outcome: _Optional[_Union[ApplyOutcome, str]] = ...) -> None: ...

class BatchApplyJobsRequest(_message.Message):
    __slots__ = ("jobs", "validate_only")
    JOBS_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[_job_pb2.Job]
    validate_only: bool
    def __init__(self, jobs: _Optional[_Iterable[_Union[_job_pb2.Job, _Mapping]]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class BatchApplyJobsResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[BatchApplyJobsResult]
    def __init__(self, results: _Optional[_Iterable[_Union[BatchApplyJobsResult, _Mapping]]] = ...) -> None: ...

class BatchApplyJobsResult(_message.Message):
    __slots__ = ("job_id", "outcome", "job", "error")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    outcome: ApplyOutcome
    job: _job_pb2.Job
    error: BatchApplyJobsError
    def __init__(self, job_id: _Optional[str] = ..., outcome: _Optional[_Union[ApplyOutcome, str]] = ..., job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ..., error: _Optional[_Union[BatchApplyJobsError, _Mapping]] = ...) -> None: ...

class BatchApplyJobsError(_message.Message):
    __slots__ = ("code", "message", "reason", "field")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    FIELD_FIELD_NUMBER: _ClassVar[int]
    code: str
    message: str
    reason: str
    field: str
    def __init__(self, code: _Optional[str] = ..., message: _Optional[str] = ..., reason: _Optional[str] = ..., field: _Optional[str] = ...) -> None: ...

class GetJobRequest(_message.Message):
    __slots__ = ("job_id", "version")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    version: int
    def __init__(self, job_id: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class GetJobResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ...) -> None: ...

class DescribeJobRequest(_message.Message):
    __slots__ = ("job_id", "slo_windows")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SLO_WINDOWS_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    slo_windows: _containers.RepeatedCompositeFieldContainer[_duration_pb2.Duration]
    def __init__(self, job_id: _Optional[str] = ..., slo_windows: _Optional[_Iterable[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]]] = ...) -> None: ...

class DescribeJobResponse(_message.Message):
    __slots__ = ("job", "recent_runs", "upcoming", "active_runs", "slo")
    JOB_FIELD_NUMBER: _ClassVar[int]
    RECENT_RUNS_FIELD_NUMBER: _ClassVar[int]
    UPCOMING_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_RUNS_FIELD_NUMBER: _ClassVar[int]
    SLO_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    recent_runs: _containers.RepeatedCompositeFieldContainer[_run_pb2.Run]
    upcoming: _containers.RepeatedCompositeFieldContainer[FireTime]
    active_runs: int
    slo: _containers.RepeatedCompositeFieldContainer[JobSlo]
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ..., recent_runs: _Optional[_Iterable[_Union[_run_pb2.Run, _Mapping]]] = ..., upcoming: _Optional[_Iterable[_Union[FireTime, _Mapping]]] = ..., active_runs: _Optional[int] = ..., slo: _Optional[_Iterable[_Union[JobSlo, _Mapping]]] = ...) -> None: ...

class JobSlo(_message.Message):
    __slots__ = ("window", "window_start", "as_of", "lateness_threshold", "due", "on_time", "late", "missed", "skipped", "failed", "throttled")
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    WINDOW_START_FIELD_NUMBER: _ClassVar[int]
    AS_OF_FIELD_NUMBER: _ClassVar[int]
    LATENESS_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    DUE_FIELD_NUMBER: _ClassVar[int]
    ON_TIME_FIELD_NUMBER: _ClassVar[int]
    LATE_FIELD_NUMBER: _ClassVar[int]
    MISSED_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    THROTTLED_FIELD_NUMBER: _ClassVar[int]
    window: _duration_pb2.Duration
    window_start: _timestamp_pb2.Timestamp
    as_of: _timestamp_pb2.Timestamp
    lateness_threshold: _duration_pb2.Duration
    due: int
    on_time: int
    late: int
    missed: int
    skipped: int
    failed: int
    throttled: int
    def __init__(self, window: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., window_start: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., lateness_threshold: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., due: _Optional[int] = ..., on_time: _Optional[int] = ..., late: _Optional[int] = ..., missed: _Optional[int] = ..., skipped: _Optional[int] = ..., failed: _Optional[int] = ..., throttled: _Optional[int] = ...) -> None: ...

class ListJobsRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "labels", "name_prefix", "paused", "target_forbidden", "view", "selector", "search")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    NAME_PREFIX_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    TARGET_FORBIDDEN_FIELD_NUMBER: _ClassVar[int]
    VIEW_FIELD_NUMBER: _ClassVar[int]
    SELECTOR_FIELD_NUMBER: _ClassVar[int]
    SEARCH_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    labels: _containers.ScalarMap[str, str]
    name_prefix: str
    paused: bool
    target_forbidden: bool
    view: JobView
    selector: str
    search: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., name_prefix: _Optional[str] = ..., paused: _Optional[bool] = ..., target_forbidden: _Optional[bool] = ..., view: _Optional[_Union[JobView, str]] = ..., selector: _Optional[str] = ..., search: _Optional[str] = ...) -> None: ...

class ListJobsResponse(_message.Message):
    __slots__ = ("jobs", "next_page_token")
    JOBS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[_job_pb2.Job]
    next_page_token: str
    def __init__(self, jobs: _Optional[_Iterable[_Union[_job_pb2.Job, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class UpdateJobRequest(_message.Message):
    __slots__ = ("job", "update_mask", "expected_version")
    JOB_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    update_mask: _field_mask_pb2.FieldMask
    expected_version: int
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ..., expected_version: _Optional[int] = ...) -> None: ...

class UpdateJobResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ...) -> None: ...

class DeleteJobRequest(_message.Message):
    __slots__ = ("job_id", "expected_version", "allow_missing")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    ALLOW_MISSING_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    expected_version: int
    allow_missing: bool
    def __init__(self, job_id: _Optional[str] = ..., expected_version: _Optional[int] = ..., allow_missing: _Optional[bool] = ...) -> None: ...

class DeleteJobResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PauseJobRequest(_message.Message):
    __slots__ = ("job_id", "note", "expected_version", "pause_until")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    PAUSE_UNTIL_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    note: str
    expected_version: int
    pause_until: _timestamp_pb2.Timestamp
    def __init__(self, job_id: _Optional[str] = ..., note: _Optional[str] = ..., expected_version: _Optional[int] = ..., pause_until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class PauseJobResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ...) -> None: ...

class ResumeJobRequest(_message.Message):
    __slots__ = ("job_id", "note", "expected_version")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    note: str
    expected_version: int
    def __init__(self, job_id: _Optional[str] = ..., note: _Optional[str] = ..., expected_version: _Optional[int] = ...) -> None: ...

class ResumeJobResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ...) -> None: ...

class TriggerJobRequest(_message.Message):
    __slots__ = ("job_id", "request_id")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    request_id: str
    def __init__(self, job_id: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class TriggerJobResponse(_message.Message):
    __slots__ = ("run",)
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: _run_pb2.Run
    def __init__(self, run: _Optional[_Union[_run_pb2.Run, _Mapping]] = ...) -> None: ...

class BackfillJobRequest(_message.Message):
    __slots__ = ("job_id", "start_time", "end_time")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    def __init__(self, job_id: _Optional[str] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class BackfillJobResponse(_message.Message):
    __slots__ = ("runs", "existing_count", "truncated", "next_start_time")
    RUNS_FIELD_NUMBER: _ClassVar[int]
    EXISTING_COUNT_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    NEXT_START_TIME_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[_run_pb2.Run]
    existing_count: int
    truncated: bool
    next_start_time: _timestamp_pb2.Timestamp
    def __init__(self, runs: _Optional[_Iterable[_Union[_run_pb2.Run, _Mapping]]] = ..., existing_count: _Optional[int] = ..., truncated: _Optional[bool] = ..., next_start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class PreviewScheduleRequest(_message.Message):
    __slots__ = ("schedule", "count", "after", "job_id")
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    schedule: _job_pb2.Schedule
    count: int
    after: _timestamp_pb2.Timestamp
    job_id: str
    def __init__(self, schedule: _Optional[_Union[_job_pb2.Schedule, _Mapping]] = ..., count: _Optional[int] = ..., after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., job_id: _Optional[str] = ...) -> None: ...

class PreviewScheduleResponse(_message.Message):
    __slots__ = ("fire_times", "exhausted")
    FIRE_TIMES_FIELD_NUMBER: _ClassVar[int]
    EXHAUSTED_FIELD_NUMBER: _ClassVar[int]
    fire_times: _containers.RepeatedCompositeFieldContainer[FireTime]
    exhausted: bool
    def __init__(self, fire_times: _Optional[_Iterable[_Union[FireTime, _Mapping]]] = ..., exhausted: _Optional[bool] = ...) -> None: ...

class FireTime(_message.Message):
    __slots__ = ("at", "local_time", "annotation", "note", "dropped", "due_at", "spec_index", "calendar")
    AT_FIELD_NUMBER: _ClassVar[int]
    LOCAL_TIME_FIELD_NUMBER: _ClassVar[int]
    ANNOTATION_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    DROPPED_FIELD_NUMBER: _ClassVar[int]
    DUE_AT_FIELD_NUMBER: _ClassVar[int]
    SPEC_INDEX_FIELD_NUMBER: _ClassVar[int]
    CALENDAR_FIELD_NUMBER: _ClassVar[int]
    at: _timestamp_pb2.Timestamp
    local_time: str
    annotation: DstAnnotation
    note: str
    dropped: bool
    due_at: _timestamp_pb2.Timestamp
    spec_index: int
    calendar: str
    def __init__(self, at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., local_time: _Optional[str] = ..., annotation: _Optional[_Union[DstAnnotation, str]] = ..., note: _Optional[str] = ..., dropped: _Optional[bool] = ..., due_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., spec_index: _Optional[int] = ..., calendar: _Optional[str] = ...) -> None: ...

class ListRunsRequest(_message.Message):
    __slots__ = ("job_id", "statuses", "scheduled_after", "scheduled_before", "page_size", "page_token", "kinds", "started_after", "started_before", "selector", "late_only")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STATUSES_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_AFTER_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_BEFORE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    KINDS_FIELD_NUMBER: _ClassVar[int]
    STARTED_AFTER_FIELD_NUMBER: _ClassVar[int]
    STARTED_BEFORE_FIELD_NUMBER: _ClassVar[int]
    SELECTOR_FIELD_NUMBER: _ClassVar[int]
    LATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    statuses: _containers.RepeatedScalarFieldContainer[_run_pb2.RunStatus]
    scheduled_after: _timestamp_pb2.Timestamp
    scheduled_before: _timestamp_pb2.Timestamp
    page_size: int
    page_token: str
    kinds: _containers.RepeatedScalarFieldContainer[_run_pb2.RunKind]
    started_after: _timestamp_pb2.Timestamp
    started_before: _timestamp_pb2.Timestamp
    selector: str
    late_only: bool
    def __init__(self, job_id: _Optional[str] = ..., statuses: _Optional[_Iterable[_Union[_run_pb2.RunStatus, str]]] = ..., scheduled_after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., scheduled_before: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., kinds: _Optional[_Iterable[_Union[_run_pb2.RunKind, str]]] = ..., started_after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., started_before: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., selector: _Optional[str] = ..., late_only: _Optional[bool] = ...) -> None: ...

class ListRunsResponse(_message.Message):
    __slots__ = ("runs", "next_page_token")
    RUNS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[_run_pb2.Run]
    next_page_token: str
    def __init__(self, runs: _Optional[_Iterable[_Union[_run_pb2.Run, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetRunRequest(_message.Message):
    __slots__ = ("ref", "run_key")
    REF_FIELD_NUMBER: _ClassVar[int]
    RUN_KEY_FIELD_NUMBER: _ClassVar[int]
    ref: _run_pb2.RunRef
    run_key: str
    def __init__(self, ref: _Optional[_Union[_run_pb2.RunRef, _Mapping]] = ..., run_key: _Optional[str] = ...) -> None: ...

class GetRunResponse(_message.Message):
    __slots__ = ("run",)
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: _run_pb2.Run
    def __init__(self, run: _Optional[_Union[_run_pb2.Run, _Mapping]] = ...) -> None: ...

class ReplayRunRequest(_message.Message):
    __slots__ = ("ref", "run_key")
    REF_FIELD_NUMBER: _ClassVar[int]
    RUN_KEY_FIELD_NUMBER: _ClassVar[int]
    ref: _run_pb2.RunRef
    run_key: str
    def __init__(self, ref: _Optional[_Union[_run_pb2.RunRef, _Mapping]] = ..., run_key: _Optional[str] = ...) -> None: ...

class ReplayRunResponse(_message.Message):
    __slots__ = ("run",)
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: _run_pb2.Run
    def __init__(self, run: _Optional[_Union[_run_pb2.Run, _Mapping]] = ...) -> None: ...

class CancelRunRequest(_message.Message):
    __slots__ = ("ref", "run_key", "reason")
    REF_FIELD_NUMBER: _ClassVar[int]
    RUN_KEY_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ref: _run_pb2.RunRef
    run_key: str
    reason: str
    def __init__(self, ref: _Optional[_Union[_run_pb2.RunRef, _Mapping]] = ..., run_key: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class CancelRunResponse(_message.Message):
    __slots__ = ("run",)
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: _run_pb2.Run
    def __init__(self, run: _Optional[_Union[_run_pb2.Run, _Mapping]] = ...) -> None: ...

class GetEgressPolicyRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetEgressPolicyResponse(_message.Message):
    __slots__ = ("egress",)
    EGRESS_FIELD_NUMBER: _ClassVar[int]
    egress: _egress_pb2.EffectiveEgressPolicy
    def __init__(self, egress: _Optional[_Union[_egress_pb2.EffectiveEgressPolicy, _Mapping]] = ...) -> None: ...

class RotateOwnSigningSecretRequest(_message.Message):
    __slots__ = ("overlap",)
    OVERLAP_FIELD_NUMBER: _ClassVar[int]
    overlap: _duration_pb2.Duration
    def __init__(self, overlap: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class RotateOwnSigningSecretResponse(_message.Message):
    __slots__ = ("signing_secret", "secret_id", "previous_expire_time")
    SIGNING_SECRET_FIELD_NUMBER: _ClassVar[int]
    SECRET_ID_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    signing_secret: str
    secret_id: str
    previous_expire_time: _timestamp_pb2.Timestamp
    def __init__(self, signing_secret: _Optional[str] = ..., secret_id: _Optional[str] = ..., previous_expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class RollbackJobRequest(_message.Message):
    __slots__ = ("job_id", "version", "expected_version")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    version: int
    expected_version: int
    def __init__(self, job_id: _Optional[str] = ..., version: _Optional[int] = ..., expected_version: _Optional[int] = ...) -> None: ...

class RollbackJobResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ...) -> None: ...

class ListJobRevisionsRequest(_message.Message):
    __slots__ = ("job_id", "page_size", "page_token", "view")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    VIEW_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    page_size: int
    page_token: str
    view: JobView
    def __init__(self, job_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., view: _Optional[_Union[JobView, str]] = ...) -> None: ...

class ListJobRevisionsResponse(_message.Message):
    __slots__ = ("revisions", "next_page_token")
    REVISIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    revisions: _containers.RepeatedCompositeFieldContainer[JobRevision]
    next_page_token: str
    def __init__(self, revisions: _Optional[_Iterable[_Union[JobRevision, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class JobRevision(_message.Message):
    __slots__ = ("version", "job", "changed_fields", "changed_by", "request_id", "create_time")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELDS_FIELD_NUMBER: _ClassVar[int]
    CHANGED_BY_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    version: int
    job: _job_pb2.Job
    changed_fields: _containers.RepeatedScalarFieldContainer[str]
    changed_by: str
    request_id: str
    create_time: _timestamp_pb2.Timestamp
    def __init__(self, version: _Optional[int] = ..., job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ..., changed_fields: _Optional[_Iterable[str]] = ..., changed_by: _Optional[str] = ..., request_id: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListAuditEventsRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListAuditEventsResponse(_message.Message):
    __slots__ = ("events", "next_page_token")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[AuditEvent]
    next_page_token: str
    def __init__(self, events: _Optional[_Iterable[_Union[AuditEvent, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class AuditEvent(_message.Message):
    __slots__ = ("time", "actor", "method", "resource", "code", "request_id")
    TIME_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    time: _timestamp_pb2.Timestamp
    actor: str
    method: str
    resource: str
    code: str
    request_id: str
    def __init__(self, time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., actor: _Optional[str] = ..., method: _Optional[str] = ..., resource: _Optional[str] = ..., code: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class NotificationChannel(_message.Message):
    __slots__ = ("channel_id", "display_name", "target", "event_kinds", "digest_window", "version", "create_time", "update_time")
    CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    EVENT_KINDS_FIELD_NUMBER: _ClassVar[int]
    DIGEST_WINDOW_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    channel_id: str
    display_name: str
    target: _job_pb2.Target
    event_kinds: _containers.RepeatedScalarFieldContainer[NotificationEventKind]
    digest_window: _duration_pb2.Duration
    version: int
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, channel_id: _Optional[str] = ..., display_name: _Optional[str] = ..., target: _Optional[_Union[_job_pb2.Target, _Mapping]] = ..., event_kinds: _Optional[_Iterable[_Union[NotificationEventKind, str]]] = ..., digest_window: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., version: _Optional[int] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CreateNotificationChannelRequest(_message.Message):
    __slots__ = ("channel",)
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    channel: NotificationChannel
    def __init__(self, channel: _Optional[_Union[NotificationChannel, _Mapping]] = ...) -> None: ...

class CreateNotificationChannelResponse(_message.Message):
    __slots__ = ("channel",)
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    channel: NotificationChannel
    def __init__(self, channel: _Optional[_Union[NotificationChannel, _Mapping]] = ...) -> None: ...

class GetNotificationChannelRequest(_message.Message):
    __slots__ = ("channel_id",)
    CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    channel_id: str
    def __init__(self, channel_id: _Optional[str] = ...) -> None: ...

class GetNotificationChannelResponse(_message.Message):
    __slots__ = ("channel",)
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    channel: NotificationChannel
    def __init__(self, channel: _Optional[_Union[NotificationChannel, _Mapping]] = ...) -> None: ...

class ListNotificationChannelsRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListNotificationChannelsResponse(_message.Message):
    __slots__ = ("channels", "next_page_token")
    CHANNELS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    channels: _containers.RepeatedCompositeFieldContainer[NotificationChannel]
    next_page_token: str
    def __init__(self, channels: _Optional[_Iterable[_Union[NotificationChannel, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class UpdateNotificationChannelRequest(_message.Message):
    __slots__ = ("channel", "update_mask", "expected_version")
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    channel: NotificationChannel
    update_mask: _field_mask_pb2.FieldMask
    expected_version: int
    def __init__(self, channel: _Optional[_Union[NotificationChannel, _Mapping]] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ..., expected_version: _Optional[int] = ...) -> None: ...

class UpdateNotificationChannelResponse(_message.Message):
    __slots__ = ("channel",)
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    channel: NotificationChannel
    def __init__(self, channel: _Optional[_Union[NotificationChannel, _Mapping]] = ...) -> None: ...

class DeleteNotificationChannelRequest(_message.Message):
    __slots__ = ("channel_id",)
    CHANNEL_ID_FIELD_NUMBER: _ClassVar[int]
    channel_id: str
    def __init__(self, channel_id: _Optional[str] = ...) -> None: ...

class DeleteNotificationChannelResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
