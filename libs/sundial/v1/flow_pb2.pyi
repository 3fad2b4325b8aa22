import datetime

from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class FlowLimit(_message.Message):
    __slots__ = ("key", "rate_per_second", "burst", "max_running", "waiting_runs", "running_runs", "available_tokens", "blocked_until", "create_time", "update_time")
    KEY_FIELD_NUMBER: _ClassVar[int]
    RATE_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    BURST_FIELD_NUMBER: _ClassVar[int]
    MAX_RUNNING_FIELD_NUMBER: _ClassVar[int]
    WAITING_RUNS_FIELD_NUMBER: _ClassVar[int]
    RUNNING_RUNS_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    BLOCKED_UNTIL_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    key: str
    rate_per_second: float
    burst: int
    max_running: int
    waiting_runs: int
    running_runs: int
    available_tokens: float
    blocked_until: _timestamp_pb2.Timestamp
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, key: _Optional[str] = ..., rate_per_second: _Optional[float] = ..., burst: _Optional[int] = ..., max_running: _Optional[int] = ..., waiting_runs: _Optional[int] = ..., running_runs: _Optional[int] = ..., available_tokens: _Optional[float] = ..., blocked_until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class SetFlowLimitRequest(_message.Message):
    __slots__ = ("limit",)
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    limit: FlowLimit
    def __init__(self, limit: _Optional[_Union[FlowLimit, _Mapping]] = ...) -> None: ...

class SetFlowLimitResponse(_message.Message):
    __slots__ = ("limit",)
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    limit: FlowLimit
    def __init__(self, limit: _Optional[_Union[FlowLimit, _Mapping]] = ...) -> None: ...

class ListFlowLimitsRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListFlowLimitsResponse(_message.Message):
    __slots__ = ("limits", "next_page_token")
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    limits: _containers.RepeatedCompositeFieldContainer[FlowLimit]
    next_page_token: str
    def __init__(self, limits: _Optional[_Iterable[_Union[FlowLimit, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class DeleteFlowLimitRequest(_message.Message):
    __slots__ = ("key",)
    KEY_FIELD_NUMBER: _ClassVar[int]
    key: str
    def __init__(self, key: _Optional[str] = ...) -> None: ...

class DeleteFlowLimitResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
