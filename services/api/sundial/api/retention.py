"""Forgets what tenants grew past its retention (a lifecycle component).

Every pass deletes, in small batches:

- idempotency records older than their retention (lookups already ignore them; this
  keeps ``job_requests`` from growing forever);
- job revisions older than ``revision_retention`` (a live job's newest revision is always
  kept), and the revisions of a deleted job older than ``deleted_job_revision``;
- audit events older than ``audit_retention``.

Each reads only what it deletes, through an index by age: a pass with nothing to delete
costs a few index probes however many revisions and events are stored (migration 0028).
The newest ``revisions_per_job`` of a job are kept where its history grows, by the
trigger that writes a change (the API's sessions carry the operator's default as
``sundial.revisions_per_job``), not here.

Correctness depends on none of it. Every API replica runs it; the deletes are small
batches, so replicas overlapping is harmless.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import ClassVar

from sundial.api.store import Store
from sundial.core.clock import Clock
from sundial.core.loop import PassLoop

log = logging.getLogger(__name__)

_BATCH = 5000


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """How long each kind of tenant data is kept."""

    requests: timedelta = timedelta(hours=24)
    revisions: timedelta = timedelta(days=90)
    deleted_job_revisions: timedelta = timedelta(days=30)
    audit_events: timedelta = timedelta(days=90)


class Retention(PassLoop):
    """Deletes expired rows every ``interval_s`` (see the module doc).

    Args:
        store: Database access.
        clock: The source of "now".
        policy: What is kept, and how long.
        interval_s: Seconds between passes.
    """

    name = "retention"
    # Housekeeping must never take the API down: any failure of a pass (the database
    # briefly away, or a bug) is logged and the pass tried again later.
    transient: ClassVar[tuple[type[BaseException], ...]] = (Exception,)

    def __init__(
        self, store: Store, clock: Clock, policy: RetentionPolicy, *, interval_s: float
    ) -> None:
        super().__init__()
        self._store = store
        self._clock = clock
        self._policy = policy
        self._interval_s = interval_s

    @property
    def error_wait_s(self) -> float:
        return self._interval_s

    async def pass_once(self) -> float:
        deleted = await self.purge_once()
        if any(deleted.values()):
            log.info(
                "retention pass deleted %s",
                deleted,
                extra={
                    "action": "retention",
                    **{f"deleted_{kind}": n for kind, n in deleted.items()},
                },
            )
        return self._interval_s

    async def purge_once(self) -> dict[str, int]:
        """One pass now: every kind, in batches; returns how many rows of each went."""
        now = self._clock.now()
        policy = self._policy
        kinds: dict[str, Callable[[], Awaitable[int]]] = {
            "requests": lambda: self._store.purge_requests(now - policy.requests, _BATCH),
            "revisions": lambda: self._store.purge_revisions(
                before=now - policy.revisions,
                deleted_before=now - policy.deleted_job_revisions,
                limit=_BATCH,
            ),
            "audit_events": lambda: self._store.purge_audit_events(
                now - policy.audit_events, _BATCH
            ),
        }
        totals: dict[str, int] = {}
        for kind, purge in kinds.items():
            total = 0
            while not self._stopping.is_set():
                deleted = await purge()
                total += deleted
                if deleted < _BATCH:
                    break
            totals[kind] = total
        return totals
