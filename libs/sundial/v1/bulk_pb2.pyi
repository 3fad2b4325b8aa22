import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CountJobsRequest(_message.Message):
    __slots__ = ("selector", "search", "name_prefix", "paused")
    SELECTOR_FIELD_NUMBER: _ClassVar[int]
    SEARCH_FIELD_NUMBER: _ClassVar[int]
    NAME_PREFIX_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    selector: str
    search: str
    name_prefix: str
    paused: bool
    def __init__(self, selector: _Optional[str] = ..., search: _Optional[str] = ..., name_prefix: _Optional[str] = ..., paused: _Optional[bool] = ...) -> None: ...

class CountJobsResponse(_message.Message):
    __slots__ = ("count",)
    COUNT_FIELD_NUMBER: _ClassVar[int]
    count: int
    def __init__(self, count: _Optional[int] = ...) -> None: ...

class PauseJobsRequest(_message.Message):
    __slots__ = ("selector", "search", "name_prefix", "note", "pause_until", "dry_run", "limit")
    SELECTOR_FIELD_NUMBER: _ClassVar[int]
    SEARCH_FIELD_NUMBER: _ClassVar[int]
    NAME_PREFIX_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    PAUSE_UNTIL_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    selector: str
    search: str
    name_prefix: str
    note: str
    pause_until: _timestamp_pb2.Timestamp
    dry_run: bool
    limit: int
    def __init__(self, selector: _Optional[str] = ..., search: _Optional[str] = ..., name_prefix: _Optional[str] = ..., note: _Optional[str] = ..., pause_until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., dry_run: _Optional[bool] = ..., limit: _Optional[int] = ...) -> None: ...

class PauseJobsResponse(_message.Message):
    __slots__ = ("matched", "affected", "remaining", "job_ids")
    MATCHED_FIELD_NUMBER: _ClassVar[int]
    AFFECTED_FIELD_NUMBER: _ClassVar[int]
    REMAINING_FIELD_NUMBER: _ClassVar[int]
    JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    matched: int
    affected: int
    remaining: int
    job_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, matched: _Optional[int] = ..., affected: _Optional[int] = ..., remaining: _Optional[int] = ..., job_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class ResumeJobsRequest(_message.Message):
    __slots__ = ("selector", "search", "name_prefix", "note", "dry_run", "limit")
    SELECTOR_FIELD_NUMBER: _ClassVar[int]
    SEARCH_FIELD_NUMBER: _ClassVar[int]
    NAME_PREFIX_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    selector: str
    search: str
    name_prefix: str
    note: str
    dry_run: bool
    limit: int
    def __init__(self, selector: _Optional[str] = ..., search: _Optional[str] = ..., name_prefix: _Optional[str] = ..., note: _Optional[str] = ..., dry_run: _Optional[bool] = ..., limit: _Optional[int] = ...) -> None: ...

class ResumeJobsResponse(_message.Message):
    __slots__ = ("matched", "affected", "remaining", "job_ids")
    MATCHED_FIELD_NUMBER: _ClassVar[int]
    AFFECTED_FIELD_NUMBER: _ClassVar[int]
    REMAINING_FIELD_NUMBER: _ClassVar[int]
    JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    matched: int
    affected: int
    remaining: int
    job_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, matched: _Optional[int] = ..., affected: _Optional[int] = ..., remaining: _Optional[int] = ..., job_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class DeleteJobsRequest(_message.Message):
    __slots__ = ("selector", "search", "name_prefix", "dry_run", "limit")
    SELECTOR_FIELD_NUMBER: _ClassVar[int]
    SEARCH_FIELD_NUMBER: _ClassVar[int]
    NAME_PREFIX_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    selector: str
    search: str
    name_prefix: str
    dry_run: bool
    limit: int
    def __init__(self, selector: _Optional[str] = ..., search: _Optional[str] = ..., name_prefix: _Optional[str] = ..., dry_run: _Optional[bool] = ..., limit: _Optional[int] = ...) -> None: ...

class DeleteJobsResponse(_message.Message):
    __slots__ = ("matched", "affected", "remaining", "job_ids")
    MATCHED_FIELD_NUMBER: _ClassVar[int]
    AFFECTED_FIELD_NUMBER: _ClassVar[int]
    REMAINING_FIELD_NUMBER: _ClassVar[int]
    JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    matched: int
    affected: int
    remaining: int
    job_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, matched: _Optional[int] = ..., affected: _Optional[int] = ..., remaining: _Optional[int] = ..., job_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class TriggerJobsRequest(_message.Message):
    __slots__ = ("selector", "search", "name_prefix", "dry_run", "limit")
    SELECTOR_FIELD_NUMBER: _ClassVar[int]
    SEARCH_FIELD_NUMBER: _ClassVar[int]
    NAME_PREFIX_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    selector: str
    search: str
    name_prefix: str
    dry_run: bool
    limit: int
    def __init__(self, selector: _Optional[str] = ..., search: _Optional[str] = ..., name_prefix: _Optional[str] = ..., dry_run: _Optional[bool] = ..., limit: _Optional[int] = ...) -> None: ...

class TriggerJobsResponse(_message.Message):
    __slots__ = ("matched", "affected", "run_keys")
    MATCHED_FIELD_NUMBER: _ClassVar[int]
    AFFECTED_FIELD_NUMBER: _ClassVar[int]
    RUN_KEYS_FIELD_NUMBER: _ClassVar[int]
    matched: int
    affected: int
    run_keys: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, matched: _Optional[int] = ..., affected: _Optional[int] = ..., run_keys: _Optional[_Iterable[str]] = ...) -> None: ...
