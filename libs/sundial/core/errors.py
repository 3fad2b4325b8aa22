"""Sundial's error hierarchy.

Every error a service raises on purpose is a :class:`SundialError`; each class carries
the gRPC status code it maps to, and one server interceptor
(:mod:`sundial.core.grpc`) turns it into that status, so servicers never contain
status-mapping ``try``/``except`` blocks. Anything that is not a ``SundialError``
becomes ``INTERNAL`` with a generic message and a logged traceback.

Besides code and message an error says what a program needs to react to it, which the
interceptor sends as ``google.rpc.Status`` details (AIP-193): a ``reason`` (an
UPPER_SNAKE_CASE constant, stable across releases) with string ``metadata`` (ErrorInfo,
on every error), the offending field (BadRequest, :class:`InvalidArgument`), how long
to wait before retrying where retrying helps (RetryInfo), and the violated
preconditions (PreconditionFailure, e.g. a stale ``expected_version``).

This module has no I/O and imports nothing heavier than ``grpc``'s status enum, so
pure libraries (``sundial.schedule``) can raise these errors too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import grpc


@dataclass(frozen=True)
class Precondition:
    """One violated precondition (``google.rpc.PreconditionFailure.Violation``)."""

    type: str
    """What kind, e.g. ``VERSION``."""
    subject: str
    """What it is about, e.g. ``jobs/<job_id>``."""
    description: str


class SundialError(Exception):
    """Base of every error Sundial raises deliberately.

    Attributes:
        code: The gRPC status code the error is reported with.
        message: Human-readable text safe to show to the caller.
        reason: ErrorInfo's reason (the class's default unless given).
        metadata: ErrorInfo's metadata: facts a program may act on (no secrets).
        retry_delay_s: RetryInfo's delay, where retrying the same call may succeed.
        preconditions: What a PreconditionFailure detail lists.
    """

    code: grpc.StatusCode = grpc.StatusCode.INTERNAL
    default_reason: ClassVar[str] = "INTERNAL"
    default_retry_delay_s: ClassVar[float | None] = None

    def __init__(
        self,
        message: str,
        *,
        reason: str | None = None,
        metadata: Mapping[str, str] | None = None,
        retry_delay_s: float | None = None,
        preconditions: Sequence[Precondition] = (),
    ) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason or self.default_reason
        self.metadata = dict(metadata or {})
        self.retry_delay_s = self.default_retry_delay_s if retry_delay_s is None else retry_delay_s
        self.preconditions = tuple(preconditions)

    def __reduce__(self) -> tuple[Any, ...]:
        # Subclasses take other arguments than the message (InvalidArgument: field and
        # problem), so the default (the class called with ``args``) cannot rebuild them.
        # An error raised in the API's worker pool (sundial.api.offload) must: one that
        # fails to unpickle there breaks the pool for every tenant.
        return (_rebuilt, (type(self), self.args, self.__dict__))

    def __str__(self) -> str:
        return self.message


def _rebuilt(cls: type[SundialError], args: tuple[Any, ...], state: dict[str, Any]) -> SundialError:
    """A :class:`SundialError` unpickled: its arguments and attributes as they were."""
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


class InvalidArgument(SundialError):
    """The request is malformed; ``field`` names the offending field (dotted path).

    The message always starts with the field, e.g.
    ``schedule.cron: field 2 (hour): value 25 out of range 0-23``.
    """

    code = grpc.StatusCode.INVALID_ARGUMENT
    default_reason = "INVALID_ARGUMENT"

    def __init__(self, field: str, problem: str, *, reason: str | None = None) -> None:
        super().__init__(
            f"{field}: {problem}" if field else problem,
            reason=reason,
            metadata={"field": field} if field else None,
        )
        self.field = field
        self.problem = problem


class NotFound(SundialError):
    """The resource does not exist, or belongs to another tenant (indistinguishable)."""

    code = grpc.StatusCode.NOT_FOUND
    default_reason = "NOT_FOUND"


class AlreadyExists(SundialError):
    """A resource with the same unique name already exists."""

    code = grpc.StatusCode.ALREADY_EXISTS
    default_reason = "ALREADY_EXISTS"


class FailedPrecondition(SundialError):
    """The system is not in the state the operation needs (e.g. replaying a live run)."""

    code = grpc.StatusCode.FAILED_PRECONDITION
    default_reason = "FAILED_PRECONDITION"


class Aborted(SundialError):
    """A concurrency conflict, e.g. a stale ``expected_version``; the caller may retry
    (after re-reading, for a stale version: see :func:`version_mismatch`)."""

    code = grpc.StatusCode.ABORTED
    default_reason = "CONCURRENT_CHANGE"
    default_retry_delay_s = 0.1


class ResourceExhausted(SundialError):
    """A quota is exceeded (max jobs, max concurrent runs, request size)."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED
    default_reason = "QUOTA_EXCEEDED"


class Unauthenticated(SundialError):
    """No credentials, or credentials that are not valid."""

    code = grpc.StatusCode.UNAUTHENTICATED
    default_reason = "UNAUTHENTICATED"


class PermissionDenied(SundialError):
    """Valid credentials without the role the call needs."""

    code = grpc.StatusCode.PERMISSION_DENIED
    default_reason = "PERMISSION_DENIED"


class Unavailable(SundialError):
    """A dependency is temporarily unreachable; the call may be retried."""

    code = grpc.StatusCode.UNAVAILABLE
    default_reason = "UNAVAILABLE"
    default_retry_delay_s = 1.0


class DeadlineExceeded(SundialError):
    """The operation did not finish within its deadline."""

    code = grpc.StatusCode.DEADLINE_EXCEEDED
    default_reason = "DEADLINE_EXCEEDED"


class Internal(SundialError):
    """A bug or invariant violation; the caller sees only a generic message."""

    code = grpc.StatusCode.INTERNAL


def version_mismatch(noun: str, resource_id: object, current: int, expected: int) -> Aborted:
    """ABORTED for a conditional write whose ``expected_version`` is stale, e.g.
    ``version_mismatch("job", job_id, 4, 3)``: re-read the resource and retry, so no
    RetryInfo (the same call would fail again)."""
    error = Aborted(
        f"{noun} {resource_id} is at version {current}, not {expected}; re-read and retry",
        reason="VERSION_MISMATCH",
        metadata={"current_version": str(current), "expected_version": str(expected)},
        preconditions=[
            Precondition(
                "VERSION", f"{noun}s/{resource_id}", f"expected version {expected}, is {current}"
            )
        ],
    )
    error.retry_delay_s = None
    return error
