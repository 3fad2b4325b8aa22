"""A claimed notification and what sending it came to (the notifier's values)."""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass
from datetime import timedelta

import asyncpg

from sundial.core.egress import EgressPolicy, policy_from_document
from sundial.job import target_from_json
from sundial.run import Outcome, Target

log = logging.getLogger("sundial.api.notifier")


@dataclass(frozen=True, slots=True)
class Delivery:
    """One claimed notification and what sending it needs."""

    notification_id: uuid.UUID
    tenant_id: str
    body: bytes
    attempt: int
    target: Target | None
    egress: EgressPolicy | None
    secrets: tuple[bytes, ...]


def delivery_of(row: asyncpg.Record) -> Delivery:
    """A claimed row as what sending it needs; a channel whose stored target or policy
    cannot be read is delivered nowhere (and the notification given up)."""
    try:
        target = target_from_json(json.loads(row["target"])) if row["target"] else None
        egress = policy_from_document(row["egress_policy"]) if row["egress_policy"] else None
    except (ValueError, TypeError, KeyError):
        log.exception(
            "unreadable notification channel",
            extra={"action": "notify", "notification_id": str(row["notification_id"])},
        )
        target, egress = None, None
    return Delivery(
        notification_id=row["notification_id"],
        tenant_id=row["tenant_id"],
        body=row["body"],
        attempt=row["attempt"],
        target=target,
        egress=egress,
        secrets=tuple(row["signing_secrets"] or ()),
    )


@dataclass(frozen=True, slots=True)
class SendResult:
    """What one send came to."""

    ok: bool
    error: str = ""
    error_class: str = ""
    retry_after: timedelta | None = None
    final: bool = False


def sent_result(outcome: Outcome) -> SendResult:
    """A call's outcome as a delivery's result."""
    if not outcome.failed:
        return SendResult(True)
    error_class = outcome.error_class.value if outcome.error_class else ""
    return SendResult(
        False,
        outcome.error,
        error_class,
        retry_after=outcome.retry_after,
        # A target the policy forbids stays forbidden; anything else may pass later.
        final=error_class == "target_forbidden",
    )
