"""Verifying ``Sundial-Signature`` on the target's side (``proto/sundial/v1/target.proto``).

``t=<unix seconds>,v1=<hex>[,v1=<hex>...]``: each ``v1`` is the lowercase hex of
HMAC-SHA256, keyed with one of the tenant's signing secrets (its UTF-8 bytes), over
``"<t>.<idempotency key>.<attempt>."`` followed by the raw body (or the gRPC request's
payload). A call is genuine when any ``v1`` matches any secret you hold (constant-time
compare) and ``t`` is within the tolerance of your clock.

Standard library only, so a target can copy this file instead of installing Sundial.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Iterable

__all__ = ["DEFAULT_TOLERANCE_S", "SignatureError", "verify_signature"]

DEFAULT_TOLERANCE_S = 300
"""How far ``t`` may be from the target's clock (target.proto: 5 minutes)."""


class SignatureError(ValueError):
    """The signature is missing, malformed, too old (or new), or matches no secret."""


def verify_signature(
    header: str,
    *,
    secrets: Iterable[str],
    idempotency_key: str,
    attempt: int | str,
    body: bytes,
    now: float | None = None,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
) -> None:
    """Check one call's ``Sundial-Signature``.

    Args:
        header: The ``Sundial-Signature`` value.
        secrets: The tenant's signing secrets you accept (during a rotation, both).
        idempotency_key: The ``Idempotency-Key`` header (the run key).
        attempt: The ``Sundial-Attempt`` header.
        body: The raw request body (gRPC: ``ExecuteRequest.payload``).
        now: Unix time to judge ``t`` by (default: the clock).
        tolerance_s: How far ``t`` may be from ``now``.

    Raises:
        SignatureError: It is not a genuine, current call; the message says why (never a
            secret).
    """
    timestamp = ""
    macs: list[str] = []
    for part in header.split(","):
        name, sep, value = part.strip().partition("=")
        if not sep:
            raise SignatureError("malformed Sundial-Signature: expected t=...,v1=...")
        if name == "t":
            timestamp = value
        elif name == "v1":
            macs.append(value)
    if not timestamp.isdigit() or not macs:
        raise SignatureError("malformed Sundial-Signature: needs t=<unix seconds> and a v1")
    current = time.time() if now is None else now
    if abs(current - int(timestamp)) > tolerance_s:
        raise SignatureError(f"Sundial-Signature t={timestamp} is outside the tolerance")
    message = f"{timestamp}.{idempotency_key}.{attempt}.".encode() + body
    expected = [
        hmac.new(secret.encode(), message, hashlib.sha256).hexdigest() for secret in secrets
    ]
    # Every pair compared, so the time taken does not tell which one matched.
    matched = False
    for mac in macs:
        for candidate in expected:
            matched |= hmac.compare_digest(mac, candidate)
    if not matched:
        raise SignatureError("Sundial-Signature matches none of the secrets")
