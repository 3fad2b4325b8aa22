"""The ledger's fast path of the dead-letter outbox, after CompleteRuns committed."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime

from nats.js import JetStreamContext

from sundial.run import RunRef
from sundial.scheduler.publisher import publish_due_dead_letters
from sundial.scheduler.store import TRANSIENT_ERRORS, SchedulerStore

log = logging.getLogger(__name__)

__all__ = ["send_dead_letters"]


async def send_dead_letters(
    store: SchedulerStore, jetstream: JetStreamContext | None, dead: Sequence[RunRef], now: datetime
) -> None:
    """Publish the DeadLetters of runs that just died and clear their outbox entries.

    Never fails the call: the outcomes are recorded, and the dead rows keep ``check_at``
    until their letters are acknowledged, so whatever this does not get done (NATS or
    the database unavailable) the sweeper does a little later.
    """
    if not dead:
        return
    try:
        letters = await store.dead_letters_of(dead)
        acked = await publish_due_dead_letters(jetstream, letters, now)
        await store.clear_dead_letters(acked)
    except TRANSIENT_ERRORS as exc:
        log.warning("dead letters left to the sweeper: %s", exc, extra={"action": "dead_letter"})
