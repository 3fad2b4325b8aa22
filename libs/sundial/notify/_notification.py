"""How a channel's due events become notifications, and when a failed one is retried.

A channel without a digest window gets one notification per event. A channel with one
gets one notification for every event it has waiting once the first of them is due (its
window after it passed): a herd of a thousand dead runs in one window is one
notification. A notification lists at most :data:`MAX_EVENTS_PER_NOTIFICATION` events;
``event_count`` says how many it stands for and ``omitted`` how many are not listed.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

__all__ = [
    "MAX_ATTEMPTS",
    "MAX_EVENTS_PER_NOTIFICATION",
    "OutboxEvent",
    "PlannedNotification",
    "group_events",
    "notification_body",
    "retry_delay",
]

MAX_EVENTS_PER_NOTIFICATION = 100
"""Most events one notification lists (the body stays bounded)."""

MAX_ATTEMPTS = 20
"""Deliveries tried before a notification is given up (``failed``): some 10 hours of
:func:`retry_delay`'s backoff."""

_BASE_DELAY = timedelta(seconds=1)
_MAX_DELAY = timedelta(hours=2)


@dataclass(frozen=True, slots=True)
class OutboxEvent:
    """One ``notification_events`` row."""

    event_id: int
    channel_id: uuid.UUID
    tenant_id: str
    kind: str
    occurred_at: datetime
    detail: Mapping[str, Any]
    digest: bool
    """Whether its channel has a digest window."""


@dataclass(frozen=True, slots=True)
class PlannedNotification:
    """A notification to make from some events of one channel."""

    notification_id: uuid.UUID
    channel_id: uuid.UUID
    tenant_id: str
    events: tuple[OutboxEvent, ...]


def group_events(
    events: Iterable[OutboxEvent], new_id: Any = uuid.uuid4
) -> list[PlannedNotification]:
    """The notifications the events make: one per event of a channel without a digest
    window, one per channel with one (events in id order)."""
    digests: dict[uuid.UUID, list[OutboxEvent]] = {}
    planned: list[PlannedNotification] = []
    for event in sorted(events, key=lambda e: e.event_id):
        if event.digest:
            digests.setdefault(event.channel_id, []).append(event)
        else:
            planned.append(
                PlannedNotification(new_id(), event.channel_id, event.tenant_id, (event,))
            )
    for channel_id, grouped in digests.items():
        planned.append(
            PlannedNotification(new_id(), channel_id, grouped[0].tenant_id, tuple(grouped))
        )
    return planned


def _timestamp(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


def notification_body(planned: PlannedNotification, created_at: datetime) -> bytes:
    """The JSON document sent for ``planned`` (the same bytes on every retry)."""
    events: Sequence[OutboxEvent] = planned.events
    listed = events[:MAX_EVENTS_PER_NOTIFICATION]
    document = {
        "notification_id": str(planned.notification_id),
        "tenant_id": planned.tenant_id,
        "channel_id": str(planned.channel_id),
        "created_at": _timestamp(created_at),
        "event_count": len(events),
        "omitted": len(events) - len(listed),
        "events": [
            {"kind": e.kind, "occurred_at": _timestamp(e.occurred_at), **e.detail} for e in listed
        ],
    }
    return json.dumps(document, separators=(",", ":"), sort_keys=True).encode()


def retry_delay(
    attempt: int, rng: random.Random, retry_after: timedelta | None = None
) -> timedelta:
    """How long after failed delivery ``attempt`` (1-based) the next is due: 1 s doubling
    to 2 h, with full jitter on the upper half, at least the receiver's Retry-After."""
    capped = min(_MAX_DELAY, _BASE_DELAY * (2 ** min(attempt - 1, 20)))
    delay = capped / 2 + capped / 2 * rng.random()
    if retry_after is not None:
        delay = max(delay, min(retry_after, _MAX_DELAY))
    return delay
