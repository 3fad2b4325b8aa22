"""What proves a call comes from Sundial (target.proto, docs/design.md section 7,
"Signatures"): computed by the ledger for each grant and by the API's notifier for each
notification (its notification id in place of the run key).

``Sundial-Signature: t=<unix seconds>,v1=<hex>[,...],v2=<kid>:<hex>[,...]``, one ``v1``
and one ``v2`` per currently valid signing secret of the tenant (two while a rotation
overlaps, newest first):

- ``v1`` (kept for verifiers written before v2; a transition): HMAC-SHA256 over
  ``<t>.<key>.<attempt>.`` and the payload. It does not say what the message is nor where
  it was sent, so a notification verifies as a run call at any target of the tenant.
- ``v2``: HMAC-SHA256 over ``sundial-v2\\n<purpose>\\n<destination>\\n<kid>\\n<t>\\n<key>
  \\n<attempt>\\n`` and the payload: the purpose (``run``, ``notification``, ``test``) and
  the destination (the target's URL, or a gRPC target's address, as written in the job or
  channel) are signed, so a call replayed to another target or as another kind does not
  verify there. No field can hold a newline (URLs, addresses and keys are checked), so
  the message is unambiguous. ``kid`` is :func:`key_id` of the secret, which names the
  secret without revealing it (no schema change: it is derived, not stored).

:func:`standard_webhook_headers` signs the same call in the Standard Webhooks format,
keyed per purpose and destination (:func:`standard_webhook_secret`).
"""

from __future__ import annotations

import base64
import enum
import functools
import hashlib
import hmac
from collections.abc import Sequence
from datetime import datetime

from sundial.run import GrpcTarget, HttpTarget, Target

__all__ = [
    "Purpose",
    "destination",
    "key_id",
    "signature",
    "standard_webhook_headers",
    "standard_webhook_secret",
]

_KID_CONTEXT = b"sundial-key-id\n"
_STANDARD_WEBHOOKS_CONTEXT = "sundial-standard-webhooks"


class Purpose(enum.StrEnum):
    """What a signed message is (signed in v2 and in the Standard Webhooks key)."""

    RUN = "run"
    """An attempt of a run, sent to the job's target."""
    NOTIFICATION = "notification"
    """A notification, sent to a notification channel's target."""
    TEST = "test"
    """A test message (nothing to act on)."""


def destination(target: Target) -> str:
    """What a call to ``target`` is signed as sent to: an HTTP target's URL, a gRPC
    target's address, exactly as stored."""
    if isinstance(target, HttpTarget):
        return target.url
    assert isinstance(target, GrpcTarget)
    return target.address


@functools.lru_cache(maxsize=256)
def key_id(secret: bytes) -> str:
    """The key id of a signing secret: 16 lowercase hex digits of a SHA-256 of it (a
    fingerprint: naming the secret, not revealing it). Kept for the last few hundred
    secrets: every grant's signature names the tenant's secrets by it."""
    return hashlib.sha256(_KID_CONTEXT + secret).hexdigest()[:16]


def _v2_message(
    purpose: str, to: str, *, kid: str, t: str, key: str, attempt: int, payload: bytes
) -> bytes:
    return f"sundial-v2\n{purpose}\n{to}\n{kid}\n{t}\n{key}\n{attempt}\n".encode() + payload


def signature(
    secrets: Sequence[bytes],
    at: datetime,
    key: str,
    attempt: int,
    payload: bytes,
    *,
    purpose: Purpose,
    to: str,
) -> str:
    """The Sundial-Signature value of one call, signed at ``at``.

    Args:
        secrets: The tenant's valid signing secrets, newest first.
        at: The signing time (``t``).
        key: The idempotency key (run key, notification id).
        attempt: The attempt number.
        payload: The body.
        purpose: What the message is.
        to: Where it is sent (:func:`destination`).
    """
    t = str(int(at.timestamp()))
    v1 = f"{t}.{key}.{attempt}.".encode() + payload
    # hmac.digest: the one-shot C implementation (no HMAC object per secret).
    parts = [f"t={t}"]
    parts.extend(f"v1={hmac.digest(s, v1, hashlib.sha256).hex()}" for s in secrets)
    for secret in secrets:
        kid = key_id(secret)
        mac = hmac.digest(
            secret,
            _v2_message(purpose, to, kid=kid, t=t, key=key, attempt=attempt, payload=payload),
            hashlib.sha256,
        )
        parts.append(f"v2={kid}:{mac.hex()}")
    return ",".join(parts)


def standard_webhook_secret(secret: bytes, purpose: Purpose | str, to: str) -> str:
    """The Standard Webhooks secret (``whsec_<base64>``) of one destination: the key is
    HMAC-SHA256 of the tenant's signing secret over ``sundial-standard-webhooks\\n
    <purpose>\\n<destination>``, so each endpoint (and each purpose) has a key of its own
    and a message sent to one does not verify at another, as the Standard Webhooks
    libraries expect (one secret per endpoint)."""
    derived = hmac.digest(
        secret, f"{_STANDARD_WEBHOOKS_CONTEXT}\n{purpose}\n{to}".encode(), hashlib.sha256
    )
    return "whsec_" + base64.b64encode(derived).decode()


def standard_webhook_headers(
    secrets: Sequence[bytes],
    at: datetime,
    message_id: str,
    payload: bytes,
    *,
    purpose: Purpose,
    to: str,
) -> dict[str, str]:
    """``webhook-id``, ``webhook-timestamp`` and ``webhook-signature`` (``v1,<base64>``
    per valid secret, space-separated: several during a rotation) of one call."""
    t = str(int(at.timestamp()))
    content = f"{message_id}.{t}.".encode() + payload
    signatures = []
    for secret in secrets:
        key = base64.b64decode(standard_webhook_secret(secret, purpose, to)[len("whsec_") :])
        signatures.append("v1," + base64.b64encode(hmac.digest(key, content, "sha256")).decode())
    return {
        "webhook-id": message_id,
        "webhook-timestamp": t,
        "webhook-signature": " ".join(signatures),
    }
