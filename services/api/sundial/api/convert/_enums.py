"""The schedule and policy enums by name, and the number <-> member helpers every
conversion uses."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, TypeVar

from google.protobuf.internal.enum_type_wrapper import EnumTypeWrapper

from sundial.core.errors import InvalidArgument
from sundial.job import OverlapPolicy
from sundial.schedule import (
    FoldPolicy,
    GapPolicy,
    MisfirePolicy,
)
from sundial.v1 import job_pb2

E = TypeVar("E", bound=enum.Enum)


def _by_name(kind: type[E], wrapper: EnumTypeWrapper, prefix: str) -> dict[int, E]:
    """Proto number -> member, matched by name (``GapPolicy.SKIP`` <-> ``GAP_POLICY_SKIP``)."""
    return {wrapper.Value(prefix + member.name): member for member in kind}


# The schedule and policy enums are the API's alone (the stored document spells them by
# name, sundial.run); the run vocabulary's are sundial.core.wire's.
_GAP = _by_name(GapPolicy, job_pb2.GapPolicy, "GAP_POLICY_")


_FOLD = _by_name(FoldPolicy, job_pb2.FoldPolicy, "FOLD_POLICY_")


_MISFIRE = _by_name(MisfirePolicy, job_pb2.MisfirePolicy, "MISFIRE_POLICY_")


_OVERLAP = _by_name(OverlapPolicy, job_pb2.OverlapPolicy, "OVERLAP_POLICY_")


def _enum(value: int, table: Mapping[int, Any], default: Any, field: str) -> Any:
    if value == 0:
        return default
    try:
        return table[value]
    except KeyError:
        raise InvalidArgument(field, f"unknown value {value}") from None


def _number(value: Any, table: Mapping[int, Any]) -> Any:
    # Any, as wire.enum_out: an int at run time, which protobuf takes for any enum field,
    # while the generated stubs type each field with its own enum's ValueType.
    return next(number for number, member in table.items() if member is value)
