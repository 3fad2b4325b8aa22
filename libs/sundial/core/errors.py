"""Sundial's error hierarchy.

Every error a service raises on purpose is a :class:`SundialError`; each class carries
the gRPC status code it maps to, and one server interceptor
(:mod:`sundial.core.grpc`) turns it into that status, so servicers never contain
status-mapping ``try``/``except`` blocks. Anything that is not a ``SundialError``
becomes ``INTERNAL`` with a generic message and a logged traceback.

This module has no I/O and imports nothing heavier than ``grpc``'s status enum, so
pure libraries (``sundial.schedule``) can raise these errors too.
"""

from __future__ import annotations

import grpc


class SundialError(Exception):
    """Base of every error Sundial raises deliberately.

    Attributes:
        code: The gRPC status code the error is reported with.
        message: Human-readable text safe to show to the caller.
    """

    code: grpc.StatusCode = grpc.StatusCode.INTERNAL

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class InvalidArgument(SundialError):
    """The request is malformed; ``field`` names the offending field (dotted path).

    The message always starts with the field, e.g.
    ``schedule.cron: field 2 (hour): value 25 out of range 0-23``.
    """

    code = grpc.StatusCode.INVALID_ARGUMENT

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}" if field else problem)
        self.field = field
        self.problem = problem


class NotFound(SundialError):
    """The resource does not exist, or belongs to another tenant (indistinguishable)."""

    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(SundialError):
    """A resource with the same unique name already exists."""

    code = grpc.StatusCode.ALREADY_EXISTS


class FailedPrecondition(SundialError):
    """The system is not in the state the operation needs (e.g. replaying a live run)."""

    code = grpc.StatusCode.FAILED_PRECONDITION


class Aborted(SundialError):
    """A concurrency conflict, e.g. a stale ``expected_version``; the caller may retry."""

    code = grpc.StatusCode.ABORTED


class ResourceExhausted(SundialError):
    """A quota is exceeded (max jobs, max concurrent runs, request size)."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class Unauthenticated(SundialError):
    """No credentials, or credentials that are not valid."""

    code = grpc.StatusCode.UNAUTHENTICATED


class PermissionDenied(SundialError):
    """Valid credentials without the role the call needs."""

    code = grpc.StatusCode.PERMISSION_DENIED


class Unavailable(SundialError):
    """A dependency is temporarily unreachable; the call may be retried."""

    code = grpc.StatusCode.UNAVAILABLE


class DeadlineExceeded(SundialError):
    """The operation did not finish within its deadline."""

    code = grpc.StatusCode.DEADLINE_EXCEEDED


class Internal(SundialError):
    """A bug or invariant violation; the caller sees only a generic message."""

    code = grpc.StatusCode.INTERNAL
