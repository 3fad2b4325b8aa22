"""Notifications of job events: their vocabulary, what the emitters write and how a
channel's events become a notification (docs/design.md section 12).

Pure: no I/O, no protobuf. The scheduler writes :class:`JobEvent` rows into the outbox
in the transaction of the fact (``sundial.scheduler.store.Transaction.record_events``);
the API's notifier groups a channel's due events with :func:`group_events`, builds each
body with :func:`notification_body` and retries with :func:`retry_delay`.
"""

from sundial.notify._event import (
    EventKind,
    JobEvent,
    dead_run,
    late_run,
    misfire_skipped,
    recovered,
)
from sundial.notify._notification import (
    MAX_ATTEMPTS,
    MAX_EVENTS_PER_NOTIFICATION,
    OutboxEvent,
    PlannedNotification,
    group_events,
    notification_body,
    retry_delay,
)

__all__ = [
    "MAX_ATTEMPTS",
    "MAX_EVENTS_PER_NOTIFICATION",
    "EventKind",
    "JobEvent",
    "OutboxEvent",
    "PlannedNotification",
    "dead_run",
    "group_events",
    "late_run",
    "misfire_skipped",
    "notification_body",
    "recovered",
    "retry_delay",
]
