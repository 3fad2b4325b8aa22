"""The ``Sundial-Signature`` a target verifies (target.proto), computed by the ledger for
each grant and by the API's notifier for each notification (its notification id in place
of the run key).

``t=<unix seconds>,v1=<hex>[,v1=<hex>...]``: each v1 is HMAC-SHA256, keyed with one of
the tenant's currently valid signing secrets (two while a rotation overlaps, newest
first), over ``<t>.<run key>.<attempt>.`` followed by the payload bytes.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from datetime import datetime

__all__ = ["signature"]


def signature(
    secrets: Sequence[bytes], at: datetime, key: str, attempt: int, payload: bytes
) -> str:
    """The Sundial-Signature value of one attempt's call, signed at ``at``."""
    t = str(int(at.timestamp()))
    message = f"{t}.{key}.{attempt}.".encode() + payload
    # hmac.digest: the one-shot C implementation (no HMAC object per secret).
    macs = [hmac.digest(secret, message, hashlib.sha256).hex() for secret in secrets]
    return ",".join([f"t={t}", *(f"v1={mac}" for mac in macs)])
