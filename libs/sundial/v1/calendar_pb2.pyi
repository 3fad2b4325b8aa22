import datetime

from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CalendarKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CALENDAR_KIND_UNSPECIFIED: _ClassVar[CalendarKind]
    CALENDAR_KIND_EXCLUDE: _ClassVar[CalendarKind]
    CALENDAR_KIND_INCLUDE: _ClassVar[CalendarKind]
CALENDAR_KIND_UNSPECIFIED: CalendarKind
CALENDAR_KIND_EXCLUDE: CalendarKind
CALENDAR_KIND_INCLUDE: CalendarKind

class Calendar(_message.Message):
    __slots__ = ("name", "description", "kind", "dates", "version", "create_time", "update_time")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    DATES_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    kind: CalendarKind
    dates: _containers.RepeatedScalarFieldContainer[str]
    version: int
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., kind: _Optional[_Union[CalendarKind, str]] = ..., dates: _Optional[_Iterable[str]] = ..., version: _Optional[int] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
