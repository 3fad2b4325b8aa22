"""Publishes RunDispatch batches to JetStream (the run rows are the outbox)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from nats.errors import Error as NatsError
from nats.js import JetStreamContext

from sundial.core.bus import DEAD_STREAM, RUNS_STREAM, dead_subject, runs_subject
from sundial.core.runkey import run_key
from sundial.scheduler.convert import encode_dead_letter, encode_run_dispatch, message_id
from sundial.scheduler.model import PublishBatch

log = logging.getLogger(__name__)


class RunPublisher:
    """Sends dispatch batches; a failed publish is left to the sweeper.

    Args:
        jetstream: The JetStream context.
        node_id: This scheduler, written into each message for debugging.
        timeout_s: How long one publish waits for the stream's acknowledgement.
    """

    def __init__(self, jetstream: JetStreamContext, node_id: str, timeout_s: float = 5.0) -> None:
        self._js = jetstream
        self.jetstream = jetstream
        """The JetStream context (dead letters are published through it too)."""
        self._node_id = node_id
        self._timeout_s = timeout_s

    async def publish(self, batch: PublishBatch, now: datetime) -> bool:
        """Publish one batch; True once JetStream stored it (or dropped it as a duplicate).

        Never raises for a NATS problem: the batch's runs keep their ``check_at``, so the
        sweeper publishes them again under a new dispatch sequence.
        """
        msg_id = message_id(batch)
        try:
            await self._js.publish(
                runs_subject(batch.partition),
                encode_run_dispatch(batch, self._node_id, now),
                timeout=self._timeout_s,
                stream=RUNS_STREAM,
                headers={"Nats-Msg-Id": msg_id},
            )
        except (NatsError, TimeoutError, OSError) as exc:
            log.warning(
                "publish of dispatch %s failed: %s; the sweeper will retry",
                batch.dispatch_seq,
                exc,
                extra={"action": "publish", "run_key": msg_id.split("#")[0]},
            )
            return False
        return True

    async def publish_all(
        self, batches: Sequence[PublishBatch], now: datetime
    ) -> list[PublishBatch]:
        """Publish ``batches`` concurrently; returns those JetStream acknowledged."""
        results = await asyncio.gather(*(self.publish(b, now) for b in batches))
        return [b for b, ok in zip(batches, results, strict=True) if ok]


async def publish_dead_letter(
    jetstream: JetStreamContext | None,
    row: Any,
    *,
    attempt: int,
    last_error: str,
    error_class: str,
    now: datetime,
) -> None:
    """Publish the DeadLetter of a run that just became DEAD (message id
    ``<run key>#dead#<attempt>``). Never raises for NATS: the run is DEAD in the
    database either way, the letter is a notification."""
    key = run_key(row["job_id"], row["scheduled_at"])
    log.warning(
        "run is dead: %s",
        last_error,
        extra={"action": "dead_letter", "job_id": str(row["job_id"]), "run_key": key},
    )
    if jetstream is None:
        return
    body = encode_dead_letter(
        row, attempt=attempt, last_error=last_error, error_class=error_class, now=now
    )
    try:
        await jetstream.publish(
            dead_subject(row["tenant_id"]),
            body,
            stream=DEAD_STREAM,
            headers={"Nats-Msg-Id": f"{key}#dead#{attempt}"},
        )
    except (NatsError, TimeoutError, OSError) as exc:
        log.error(
            "dead letter not published: %s", exc, extra={"action": "dead_letter", "run_key": key}
        )
