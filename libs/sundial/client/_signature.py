"""Verifying ``Sundial-Signature`` on the target's side (``proto/sundial/v1/target.proto``).

``t=<unix seconds>,v1=<hex>[,...],v2=<kid>:<hex>[,...]``, one ``v1`` and one ``v2`` per
signing secret of the tenant that is valid (two during a rotation):

- ``v2`` is the lowercase hex of HMAC-SHA256, keyed with the secret (its UTF-8 bytes),
  over ``"sundial-v2\\n<purpose>\\n<destination>\\n<kid>\\n<t>\\n<idempotency key>\\n
  <attempt>\\n"`` followed by the raw body (gRPC: the request's payload). ``purpose`` is
  ``run`` (a job's call), ``notification`` or ``test``; ``destination`` the URL (gRPC:
  the address) the job or channel was given, as written; ``kid`` :func:`key_id` of the
  secret. A call replayed to another target, or a notification posted to a job's
  target, does not verify.
- ``v1`` (the first format, kept during the transition): the same MAC over
  ``"<t>.<idempotency key>.<attempt>."`` and the body. It names neither purpose nor
  destination: accept it only while your verifier cannot pass them (``accept_v1``).

A call is genuine when a signature matches a secret you hold (constant-time compare) and
``t`` is within the tolerance of your clock.

Standard library only, so a target can copy this file instead of installing Sundial.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import Iterable

__all__ = [
    "DEFAULT_TOLERANCE_S",
    "PURPOSES",
    "SignatureError",
    "key_id",
    "standard_webhook_secret",
    "verify_signature",
]

DEFAULT_TOLERANCE_S = 300
"""How far ``t`` may be from the target's clock (target.proto: 5 minutes)."""

PURPOSES = ("run", "notification", "test")
"""What a signed message can be."""


class SignatureError(ValueError):
    """The signature is missing, malformed, too old (or new), or matches no secret."""


def key_id(secret: str) -> str:
    """The key id (``kid``) of a signing secret, as v2 names it: 16 lowercase hex digits
    of SHA-256 over ``"sundial-key-id\\n"`` and the secret."""
    return hashlib.sha256(b"sundial-key-id\n" + secret.encode()).hexdigest()[:16]


def standard_webhook_secret(secret: str, *, purpose: str, destination: str) -> str:
    """The ``whsec_...`` secret to give a Standard Webhooks verifier at ``destination``:
    HMAC-SHA256 of the tenant's signing secret over
    ``"sundial-standard-webhooks\\n<purpose>\\n<destination>"``, base64 (each endpoint
    and purpose has its own key; during a rotation, verify with both secrets' keys)."""
    _check_purpose(purpose)
    derived = hmac.digest(
        secret.encode(),
        f"sundial-standard-webhooks\n{purpose}\n{destination}".encode(),
        hashlib.sha256,
    )
    return "whsec_" + base64.b64encode(derived).decode()


def _check_purpose(purpose: str) -> None:
    if purpose not in PURPOSES:
        raise ValueError(f"purpose must be one of {', '.join(PURPOSES)}, not {purpose!r}")


def verify_signature(
    header: str,
    *,
    secrets: Iterable[str],
    idempotency_key: str,
    attempt: int | str,
    body: bytes,
    purpose: str | None = None,
    destination: str | None = None,
    accept_v1: bool | None = None,
    now: float | None = None,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
) -> None:
    """Check one call's ``Sundial-Signature``.

    Given ``purpose`` and ``destination``, a matching ``v2`` is required (``v1`` only
    with ``accept_v1=True``, during the transition). Without them only ``v1`` can be
    checked (the behaviour before v2, which does not bind the call to its purpose and
    destination): pass them.

    Args:
        header: The ``Sundial-Signature`` value.
        secrets: The tenant's signing secrets you accept (during a rotation, both).
        idempotency_key: The ``Idempotency-Key`` header (the run key).
        attempt: The ``Sundial-Attempt`` header.
        body: The raw request body (gRPC: ``ExecuteRequest.payload``).
        purpose: What you expect: ``"run"`` at a job's target, ``"notification"`` at a
            notification channel's.
        destination: Your URL (gRPC: address) exactly as the job or channel names it.
        accept_v1: Also accept a ``v1`` (default: only without purpose and destination).
        now: Unix time to judge ``t`` by (default: the clock).
        tolerance_s: How far ``t`` may be from ``now``.

    Raises:
        SignatureError: It is not a genuine, current call; the message says why (never a
            secret).
        ValueError: ``purpose`` without ``destination`` or the reverse, or an unknown
            purpose.
    """
    if (purpose is None) != (destination is None):
        raise ValueError("pass purpose and destination together")
    bound = purpose is not None
    if bound:
        _check_purpose(purpose or "")
    v1_allowed = (not bound) if accept_v1 is None else accept_v1
    timestamp = ""
    v1: list[str] = []
    v2: list[tuple[str, str]] = []
    for part in header.split(","):
        name, sep, value = part.strip().partition("=")
        if not sep:
            raise SignatureError("malformed Sundial-Signature: expected t=...,v1=...")
        if name == "t":
            timestamp = value
        elif name == "v1":
            v1.append(value)
        elif name == "v2":
            kid, _, mac = value.partition(":")
            v2.append((kid, mac))
    if not timestamp.isdigit() or not (v1 or v2):
        raise SignatureError("malformed Sundial-Signature: needs t=<unix seconds> and a v1 or v2")
    current = time.time() if now is None else now
    if abs(current - int(timestamp)) > tolerance_s:
        raise SignatureError(f"Sundial-Signature t={timestamp} is outside the tolerance")
    keys = [secret.encode() for secret in secrets]
    matched = False
    if bound:
        by_kid = {key_id(k.decode()): k for k in keys}
        for kid, mac in v2:
            key = by_kid.get(kid)
            if key is None:
                continue
            message = (
                f"sundial-v2\n{purpose}\n{destination}\n{kid}\n{timestamp}\n"
                f"{idempotency_key}\n{attempt}\n"
            ).encode() + body
            matched |= hmac.compare_digest(mac, hmac.new(key, message, "sha256").hexdigest())
    if v1_allowed:
        message = f"{timestamp}.{idempotency_key}.{attempt}.".encode() + body
        expected = [hmac.new(key, message, hashlib.sha256).hexdigest() for key in keys]
        # Every pair compared, so the time taken does not tell which one matched.
        for mac in v1:
            for candidate in expected:
                matched |= hmac.compare_digest(mac, candidate)
    if not matched:
        if bound and not v1_allowed and not v2:
            raise SignatureError(
                "Sundial-Signature has no v2 (pass accept_v1=True to accept v1 during the "
                "transition)"
            )
        raise SignatureError(
            "Sundial-Signature matches none of the secrets for this purpose and destination"
            if bound
            else "Sundial-Signature matches none of the secrets"
        )
