"""What a Python program that works with Sundial needs beyond the generated stubs.

- :class:`Client`: the JobService with the token, retries of UNAVAILABLE (gRPC's retry
  policy) and request ids on writes, ``datetime`` conversions, page iterators,
  get-by-id-or-name, calendars (dates as ``date``) and notification channels
  (:mod:`sundial.client._client`).
- :func:`error_details`: the ``google.rpc.Status`` details of a failed call.
- :func:`verify_signature`: check the ``Sundial-Signature`` of a call your target got
  (HTTP header or gRPC metadata), as ``target.proto`` specifies it, bound to its
  purpose and destination (v2); :func:`key_id` names a signing secret as v2 does;
  :func:`standard_webhook_secret` is the ``whsec_`` secret of a Standard Webhooks
  verifier at one destination.
"""

from __future__ import annotations

from sundial.client._client import (
    CHANNEL_OPTIONS,
    RETRY_SERVICE_CONFIG,
    Client,
    Pages,
    calendar_date,
    calendar_kind,
    duration,
    error_details,
    from_timestamp,
    timestamp,
)
from sundial.client._signature import (
    SignatureError,
    key_id,
    standard_webhook_secret,
    verify_signature,
)

__all__ = [
    "CHANNEL_OPTIONS",
    "RETRY_SERVICE_CONFIG",
    "Client",
    "Pages",
    "SignatureError",
    "calendar_date",
    "calendar_kind",
    "duration",
    "error_details",
    "from_timestamp",
    "key_id",
    "standard_webhook_secret",
    "timestamp",
    "verify_signature",
]
