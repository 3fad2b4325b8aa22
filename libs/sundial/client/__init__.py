"""What a Python program that works with Sundial needs beyond the generated stubs.

- :class:`Client`: the JobService with the token, retries of UNAVAILABLE (gRPC's retry
  policy) and request ids on writes, ``datetime`` conversions, page iterators,
  get-by-id-or-name, calendars (dates as ``date``) and notification channels
  (:mod:`sundial.client._client`).
- :func:`error_details`: the ``google.rpc.Status`` details of a failed call.
- :func:`verify_signature`: check the ``Sundial-Signature`` of a call your target got
  (HTTP header or gRPC metadata), as ``target.proto`` specifies it.
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
from sundial.client._signature import SignatureError, verify_signature

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
    "timestamp",
    "verify_signature",
]
