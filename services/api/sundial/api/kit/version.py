"""``expected_version``: optimistic concurrency on every write that takes it.

The one rule (DeleteJob, UpdateJob, PauseJob, ResumeJob, ApplyJob, RollbackJob,
UpdateCalendar, DeleteCalendar, UpdateNotificationChannel): a negative value is
``INVALID_ARGUMENT`` naming the field; 0 writes whatever the version (last writer wins);
any other value writes only while the resource is at that version, else ``ABORTED``
with reason ``VERSION_MISMATCH`` (re-read, then retry). The check is done on the version
read and again by the write's own ``WHERE version = ...``, so a change in between is
refused too.
"""

from __future__ import annotations

from sundial.core.errors import InvalidArgument, version_mismatch


def check_expected_version(expected: int, field: str = "expected_version") -> int:
    """``expected`` when it is a version or 0.

    Raises:
        InvalidArgument: It is negative.
    """
    if expected < 0:
        raise InvalidArgument(field, f"must not be negative, got {expected}")
    return expected


def require_version(kind: str, name: object, current: int, expected: int) -> None:
    """Refuse a write at ``expected`` (0: any) to a resource read at ``current``.

    Raises:
        Aborted: VERSION_MISMATCH, naming ``kind`` ``name`` and both versions.
    """
    if expected and current != expected:
        raise version_mismatch(kind, name, current, expected)
