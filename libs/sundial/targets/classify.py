"""How target answers become outcomes (docs/design.md section 7, run.proto ErrorClass).

HTTP: 2xx succeeded; 408, 425, 429 and 5xx retryable; any other status (3xx included:
redirects are not followed) final. gRPC: OK succeeded; UNAVAILABLE, DEADLINE_EXCEEDED,
RESOURCE_EXHAUSTED, ABORTED, INTERNAL, UNKNOWN retryable; any other code final. A
``Retry-After`` (HTTP header: seconds or an HTTP-date; gRPC trailing metadata: seconds)
is passed on to the ledger, which waits at least that long before the next attempt.
"""

from __future__ import annotations

import email.utils
from datetime import UTC, datetime, timedelta

import grpc

from sundial.run import MAX_RETRY_AFTER, ErrorClass, Outcome, OutcomeStatus

__all__ = [
    "RETRYABLE_GRPC_CODES",
    "RETRYABLE_HTTP_STATUSES",
    "classify_grpc",
    "classify_http",
    "parse_retry_after",
]

RETRYABLE_HTTP_STATUSES = frozenset({408, 425, 429})
RETRYABLE_GRPC_CODES = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNKNOWN,
    }
)


def classify_http(status: int) -> tuple[OutcomeStatus, ErrorClass | None]:
    """The outcome status and error class (None: succeeded) of an HTTP response status."""
    if 200 <= status < 300:
        return OutcomeStatus.SUCCEEDED, None
    if status in RETRYABLE_HTTP_STATUSES or 500 <= status < 600:
        return OutcomeStatus.FAILED_RETRYABLE, ErrorClass.RETRYABLE
    return OutcomeStatus.FAILED_FINAL, ErrorClass.FINAL


def classify_grpc(code: grpc.StatusCode) -> tuple[OutcomeStatus, ErrorClass | None]:
    """The outcome status and error class (None: succeeded) of a gRPC status code."""
    if code == grpc.StatusCode.OK:
        return OutcomeStatus.SUCCEEDED, None
    if code in RETRYABLE_GRPC_CODES:
        return OutcomeStatus.FAILED_RETRYABLE, ErrorClass.RETRYABLE
    return OutcomeStatus.FAILED_FINAL, ErrorClass.FINAL


def parse_retry_after(value: str | None, now: datetime) -> timedelta | None:
    """The wait a ``Retry-After`` value asks for, or None when absent or malformed.

    Accepts a non-negative integer number of seconds (RFC 9110) or an HTTP-date (read
    against ``now``); a date in the past means no wait. The result is capped at
    :data:`~sundial.run.MAX_RETRY_AFTER` (24 h, as the ledger caps it).
    """
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    if value.isdigit():
        # Compared as a number first: timedelta overflows long before a huge header does.
        return min(timedelta(seconds=min(int(value), 10**9)), MAX_RETRY_AFTER)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:  # "-0000" dates parse naive; HTTP-dates are always GMT
        when = when.replace(tzinfo=UTC)
    return min(max(timedelta(0), when - now), MAX_RETRY_AFTER)


def failure(
    started: datetime,
    finished: datetime,
    status: OutcomeStatus,
    error_class: ErrorClass,
    error: str,
) -> Outcome:
    """The outcome of an attempt that failed before the target answered (refused by the
    address policy, a bad request, no connection, a timeout)."""
    return Outcome(
        status=status,
        started_at=started,
        finished_at=finished,
        error=error,
        error_class=error_class,
    )
