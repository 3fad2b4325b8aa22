"""Opaque page tokens for keyset pagination.

A token holds the sort key of the last item returned (the next page starts strictly
after it) and a fingerprint of the request's filters, so a token used with other filters
is refused instead of silently returning a mix. Keyset paging (rather than offsets) is
what keeps pages free of gaps and duplicates while rows are added: every item that
exists throughout the walk is returned exactly once.

Tokens are not secret and need not be: every query is scoped to the caller's tenant,
so a forged token can only skip around in the caller's own data.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from typing import Any

from sundial.core.errors import InvalidArgument

_VERSION = 1


def fingerprint(kind: str, filters: Any) -> str:
    """A short digest of a list request's kind and filters (JSON-serialisable)."""
    canonical = json.dumps([kind, filters], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def encode(cursor: list[Any], filters_fingerprint: str) -> str:
    """A page token that resumes after ``cursor`` (JSON values) for these filters."""
    doc = {"v": _VERSION, "c": cursor, "f": filters_fingerprint}
    raw = json.dumps(doc, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def decode(token: str, filters_fingerprint: str, field: str = "page_token") -> list[Any] | None:
    """The cursor in ``token``, or None for an empty token (the first page).

    Raises:
        InvalidArgument: The token is malformed or was issued for other filters.
    """
    if not token:
        return None
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        doc = json.loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise InvalidArgument(field, "is not a valid page token") from None
    if not isinstance(doc, dict) or doc.get("v") != _VERSION or not isinstance(doc.get("c"), list):
        raise InvalidArgument(field, "is not a valid page token")
    if doc.get("f") != filters_fingerprint:
        raise InvalidArgument(
            field, "was issued for a request with other filters; repeat them unchanged"
        )
    return doc["c"]
