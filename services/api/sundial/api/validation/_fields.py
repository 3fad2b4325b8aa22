"""The limits of the public API, field paths in refusals, free text, request fields."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from types import TracebackType

from sundial.core.errors import InvalidArgument

MAX_NAME_CHARS = 200


MAX_DESCRIPTION_CHARS = 2000


MAX_PAYLOAD_BYTES = 256 * 1024


MAX_LABELS = 64


MAX_LABEL_VALUE_CHARS = 256


MAX_NOTE_CHARS = 1024


MAX_CRON_CHARS = 256


MAX_URL_CHARS = 2048


MAX_ADDRESS_CHARS = 1024


MAX_HEADERS = 32


MAX_HEADER_BYTES = 8 * 1024


MAX_JITTER = timedelta(hours=1)


JITTER_SAMPLE = 50  # fire times examined for the cron jitter bound


LATEST_INSTANT = datetime(9999, 1, 1, tzinfo=UTC)


MAX_INTERVAL = timedelta(days=366)


MAX_MAX_RUNS = 1_000_000_000


MAX_BATCH = 1000


MAX_PAGE_SIZE = 1000


DEFAULT_PAGE_SIZE = 50


MAX_PREVIEW_COUNT = 1000


DEFAULT_PREVIEW_COUNT = 10


MAX_LABEL_FILTERS = 64


MAX_NAME_PREFIX_CHARS = 200


MAX_REQUEST_ID_CHARS = 128


MAX_TENANT_ID_CHARS = 64  # as stored; CreateTenant allows 63


HTTP_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE"})


_REQUEST_ID = re.compile(r"[\x20-\x7e]+")  # printable ASCII, space included


def _fail(field: str, problem: str) -> InvalidArgument:
    return InvalidArgument(field, problem)


def field_prefix(prefix: str) -> _FieldPrefix:
    """Prepend ``prefix`` (``jobs[3].``) to the field of an InvalidArgument raised inside.

    Lets one job's checks serve CreateJob (``schedule.cron``) and BatchCreateJobs
    (``jobs[3].schedule.cron``) alike.
    """
    return _FieldPrefix(prefix)


class _FieldPrefix:
    """:func:`field_prefix`'s context manager: a class, not a generator, as a batch
    enters one per job twice."""

    __slots__ = ("_prefix",)

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._prefix and isinstance(exc, InvalidArgument):
            raise InvalidArgument(self._prefix + exc.field, exc.problem) from None


def _duration(value: timedelta) -> str:
    seconds = value.total_seconds()
    return f"{seconds:g}s"


# Unicode category Cc is exactly these two ranges; a regex scans far faster than a loop.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


_SPACE_OR_CONTROL = re.compile(r"[\s\x00-\x1f\x7f-\x9f]")


def _has_control(text: str) -> bool:
    return _CONTROL.search(text) is not None


# Free text (descriptions, notes) may span lines; other control characters, NUL above
# all (PostgreSQL text cannot hold it), are refused.
_TEXT_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def check_text(text: str, field: str, limit: int) -> None:
    """Free text: at most ``limit`` characters, no control characters but tab and newlines."""
    if len(text) > limit:
        raise _fail(field, f"longer than {limit} characters ({len(text)})")
    if _TEXT_CONTROL.search(text) is not None:
        raise _fail(field, "must not contain control characters (tab and newlines are fine)")


def check_request_id(request_id: str, field: str = "request_id") -> None:
    """Empty (no idempotency) or 1-128 printable ASCII characters."""
    if not request_id:
        return
    if len(request_id) > MAX_REQUEST_ID_CHARS or not _REQUEST_ID.fullmatch(request_id):
        raise _fail(field, f"must be 1-{MAX_REQUEST_ID_CHARS} printable ASCII characters")


def page_size(requested: int, field: str = "page_size") -> int:
    """The effective page size: 0 -> 50, above 1,000 -> 1,000, negative refused."""
    if requested < 0:
        raise _fail(field, f"must not be negative, got {requested}")
    if requested == 0:
        return DEFAULT_PAGE_SIZE
    return min(requested, MAX_PAGE_SIZE)


MAX_PAUSE = timedelta(days=366)
"""The furthest ahead a timed pause (``pause_until``) may end."""


def check_pause_until(until: datetime | None, now: datetime, field: str = "pause_until") -> None:
    """A timed pause's end: in the future, within :data:`MAX_PAUSE` (None: no end)."""
    if until is None:
        return
    if until <= now:
        raise _fail(field, f"must be in the future (now is {now.isoformat()})")
    if until - now > MAX_PAUSE:
        raise _fail(field, "must be within 366 days")
