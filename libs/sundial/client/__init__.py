"""What a Python program that works with Sundial needs beyond the generated stubs.

- :func:`verify_signature`: check the ``Sundial-Signature`` of a call your target got
  (HTTP header or gRPC metadata), as ``target.proto`` specifies it.
"""

from __future__ import annotations

from sundial.client._signature import SignatureError, verify_signature

__all__ = ["SignatureError", "verify_signature"]
