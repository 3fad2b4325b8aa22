"""Opaque page tokens for keyset pagination.

A token holds the sort key of the last item returned (the next page starts strictly
after it) and a fingerprint of the request's filters, so a token used with other filters
is refused instead of silently returning a mix. Keyset paging (rather than offsets) is
what keeps pages free of gaps and duplicates while rows are added: every item that
exists throughout the walk is returned exactly once.

Tokens are validated, not signed, and that is the contract. A token is not secret: it
holds the sort key of an item the caller was just shown, and every query is scoped to
the caller's tenant, so a forged token can only skip around in the caller's own data,
which the filters of an ordinary request reach as well. Signing would refuse forged
tokens earlier but protect nothing more, and it needs a key every API replica shares
(stored in the database, rotated, and tokens issued under an old key refused), while
the values decoded from a token must be checked anyway before they reach a query
(defence in depth). So every list declares the kinds of its cursor (:class:`Text`,
:data:`INSTANT`, :data:`UUID`) and :func:`decode` checks each decoded value against its
kind: text PostgreSQL can hold (no NUL, no lone surrogate, bounded length), instants in
UTC within the range the wire accepts, canonical UUIDs. Anything else, a forged,
truncated or corrupted token of any shape, is INVALID_ARGUMENT naming ``page_token``,
never a database error.

Every list pages the same way, through :class:`Pager`: check the page size, decode the
token, fetch one item more than the page holds, keep the page, and encode the last
item's key when there was more. A page also stops at :data:`PAGE_BYTES` (each list says
how large its items are): however large its items, an answer stays a few MiB, and the
rest starts the next page (one item is always returned, so paging always advances).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from sundial.api import validation
from sundial.api.model import Page
from sundial.core import wire
from sundial.core.errors import InvalidArgument

T = TypeVar("T")

_VERSION = 1

PAGE_BYTES = 3 * 1024 * 1024
"""The byte budget of one page of any list (estimated from its items' sizes)."""

MAX_TOKEN_CHARS = 4096
"""The longest token accepted. The longest issued is a 200-character job name of
astral-plane characters, each JSON-escaped as 12 ASCII characters: about 3,300 once
base64-encoded."""

# An instant as encode() writes it: isoformat() in UTC. fromisoformat alone would take
# other spellings, some with other offsets, and even ignores a NUL before the offset.
_INSTANT_TEXT = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{6})?\+00:00"
)


class _Malformed(Exception):
    """A decoded value does not have its kind (turned into InvalidArgument by decode)."""


class Kind(Protocol):
    """What one position of a cursor must hold."""

    def parse(self, value: object) -> Any:
        """The value as the query takes it.

        Raises:
            _Malformed: ``value`` is not of this kind.
        """
        ...


@dataclass(frozen=True, slots=True)
class Text:
    """A string PostgreSQL ``text`` can hold: at most ``max_chars`` characters, no NUL,
    and encodable as UTF-8 (JSON escapes can spell a lone surrogate, which cannot be)."""

    max_chars: int

    def parse(self, value: object) -> str:
        if not isinstance(value, str) or len(value) > self.max_chars or "\x00" in value:
            raise _Malformed
        try:
            value.encode()
        except UnicodeEncodeError:
            raise _Malformed from None
        return value


class _Instant:
    """An instant in UTC, spelled as :func:`encode` writes it (offset +00:00), within
    the range the wire accepts (:data:`sundial.core.wire.MIN_TIME` to ``MAX_TIME``).

    The offset is checked by the spelling, before any conversion: a naive time, or one
    at an offset, could be moved past datetime's range by converting it.
    """

    def parse(self, value: object) -> datetime:
        if not isinstance(value, str) or not _INSTANT_TEXT.fullmatch(value):
            raise _Malformed
        try:
            at = datetime.fromisoformat(value)
        except ValueError:  # month 13, February 30th, hour 24...
            raise _Malformed from None
        if not wire.MIN_TIME <= at <= wire.MAX_TIME:
            raise _Malformed
        return at.astimezone(UTC)


class _Uuid:
    """A UUID in its canonical 36-character form."""

    def parse(self, value: object) -> uuid.UUID:
        if not isinstance(value, str) or len(value) != 36:
            raise _Malformed
        try:
            parsed = uuid.UUID(value)
        except ValueError:
            raise _Malformed from None
        if str(parsed) != value.lower():
            raise _Malformed
        return parsed


_INT64_MAX = 2**63 - 1


class _Number:
    """A non-negative ``bigint`` (a version, an event id), written as decimal text."""

    def parse(self, value: object) -> int:
        if not isinstance(value, str) or not 1 <= len(value) <= 19:
            raise _Malformed
        if not (value.isascii() and value.isdigit()) or int(value) > _INT64_MAX:
            raise _Malformed
        return int(value)


INSTANT: Kind = _Instant()
UUID: Kind = _Uuid()
NUMBER: Kind = _Number()

Key = str | int | datetime | uuid.UUID
"""A cursor value as :func:`encode` takes it."""


def fingerprint(kind: str, filters: Any) -> str:
    """A short digest of a list request's kind and filters (JSON-serialisable)."""
    canonical = json.dumps([kind, filters], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _dump(value: Key) -> str:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    return str(value)


def encode(cursor: Sequence[Key], filters_fingerprint: str) -> str:
    """A page token that resumes after ``cursor`` for these filters.

    Instants are written in UTC and UUIDs in canonical form, as :data:`INSTANT` and
    :data:`UUID` read them back.
    """
    doc = {"v": _VERSION, "c": [_dump(value) for value in cursor], "f": filters_fingerprint}
    raw = json.dumps(doc, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def decode(
    token: str, filters_fingerprint: str, kinds: Sequence[Kind], field: str = "page_token"
) -> tuple[Any, ...] | None:
    """The cursor in ``token``, one value per kind, or None for an empty token.

    Raises:
        InvalidArgument: The token is malformed, holds a value not of its kind, or was
            issued for other filters.
    """
    if not token:
        return None
    invalid = InvalidArgument(field, "is not a valid page token")
    if len(token) > MAX_TOKEN_CHARS:
        raise invalid
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        doc = json.loads(raw)
    except (binascii.Error, ValueError, RecursionError):
        # ValueError covers invalid JSON and UTF-8, non-ASCII base64 input and integers
        # too long to convert; RecursionError deeply nested arrays.
        raise invalid from None
    if not isinstance(doc, dict):
        raise invalid
    version, cursor = doc.get("v"), doc.get("c")
    if type(version) is not int or version != _VERSION or not isinstance(cursor, list):
        raise invalid
    if doc.get("f") != filters_fingerprint:
        raise InvalidArgument(
            field, "was issued for a request with other filters; repeat them unchanged"
        )
    if len(cursor) != len(kinds):
        raise invalid
    try:
        return tuple(kind.parse(value) for kind, value in zip(kinds, cursor, strict=True))
    except _Malformed:
        raise invalid from None


@dataclass(frozen=True, slots=True)
class Cursor:
    """One list call's place: its page size, where it resumes, its filters' digest.

    Attributes:
        size: The effective page size.
        after: The decoded key of the last item of the previous page (one value per
            kind), or None on the first page.
        fingerprint: The digest of the call's kind and filters.
    """

    size: int
    after: tuple[Any, ...] | None
    fingerprint: str

    @property
    def limit(self) -> int:
        """How many items to fetch: one more than a page, to learn whether more exist."""
        return self.size + 1

    def token(self, key: Sequence[Key]) -> str:
        """The token of a next page that resumes after ``key``."""
        return encode(key, self.fingerprint)

    def page(
        self,
        items: Sequence[T],
        key: Callable[[T], Sequence[Key]],
        *,
        size_of: Callable[[T], int] | None = None,
    ) -> Page[T]:
        """The page of ``items`` (fetched with :attr:`limit`) and its next token.

        Args:
            key: An item's sort key, as the list's kinds read it back.
            size_of: An item's size in the answer (an upper estimate, bytes): the page
                stops before the item that would take it past :data:`PAGE_BYTES` (never
                before the first), and the rest starts the next page.
        """
        count = self.size
        if size_of is not None:
            spent = 0
            for i, item in enumerate(items[:count]):
                spent += size_of(item)
                if spent > PAGE_BYTES and i > 0:
                    count = i
                    break
        more = len(items) > count
        shown = list(items[:count])
        return Page(shown, self.token(key(shown[-1])) if more and shown else "")


@dataclass(frozen=True, slots=True)
class Pager:
    """How one list pages: its name and the kinds of its sort key.

    Attributes:
        kind: The list's name, part of every token's fingerprint.
        keys: The kinds of the sort key, in order.
    """

    kind: str
    keys: tuple[Kind, ...]

    def open(
        self, page_size: int, page_token: str, filters: Mapping[str, Any] | None = None
    ) -> Cursor:
        """The cursor of a list call.

        Raises:
            InvalidArgument: A negative page size, or a token that is malformed or was
                issued for other filters.
        """
        size = validation.page_size(page_size)
        digest = fingerprint(self.kind, dict(filters or {}))
        return Cursor(size, decode(page_token, digest, self.keys), digest)
