"""What a granted attempt's call carries to prove it comes from Sundial (docs/design.md
section 7, "Signatures"), computed here at grant time, so executors only forward it and
never hold a signing secret or an identity key:

- ``Sundial-Signature`` (:mod:`sundial.core.signing`): purpose ``run``, destination the
  job's target (its stored URL or address, as written).
- the Standard Webhooks headers when the target's ``auth.standard_webhooks`` is on.
- ``Authorization: Bearer <jwt>`` when the target asks for an identity token
  (:mod:`sundial.scheduler.ledger._identity` mints it).
"""

from __future__ import annotations

from datetime import datetime

from sundial.core.signing import (
    Purpose,
    destination,
    signature,
    standard_webhook_headers,
)
from sundial.scheduler.model import LeaseCandidate

__all__ = ["call_headers", "run_signature", "signature"]


def run_signature(candidate: LeaseCandidate, attempt: int, now: datetime) -> str:
    """The Sundial-Signature of one granted attempt (empty for a run without a target,
    which no executor can call anyway)."""
    if candidate.target is None:
        return ""
    return signature(
        candidate.signing_secrets,
        now,
        candidate.state.ref.key,
        attempt,
        candidate.payload,
        purpose=Purpose.RUN,
        to=destination(candidate.target),
    )


def call_headers(
    candidate: LeaseCandidate, now: datetime, token: str | None = None
) -> dict[str, str]:
    """The further headers of a granted attempt's call (``Grant.headers``): the Standard
    Webhooks ones where the target asks for them, ``Authorization`` with ``token``."""
    target = candidate.target
    headers: dict[str, str] = {}
    if target is None:
        return headers
    if target.auth.standard_webhooks:
        headers.update(
            standard_webhook_headers(
                candidate.signing_secrets,
                now,
                candidate.state.ref.key,
                candidate.payload,
                purpose=Purpose.RUN,
                to=destination(target),
            )
        )
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return headers
