"""Publishes RunDispatch batches to JetStream (the run rows are the outbox)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from datetime import datetime

from nats.errors import Error as NatsError
from nats.js import JetStreamContext
from opentelemetry import trace

from sundial.core import tracing
from sundial.core.bus import DEAD_STREAM, RUNS_STREAM, dead_subject, runs_subject
from sundial.scheduler.convert import encode_dead_letter, encode_run_dispatch, message_id
from sundial.scheduler.model import DeadLetterRun, PublishBatch
from sundial.scheduler.store import HeldRun
from sundial.scheduler.streams import StreamKeeper, stream_missing

log = logging.getLogger(__name__)


class RunPublisher:
    """Sends dispatch batches; a failed publish is left to the sweeper.

    Args:
        jetstream: The JetStream context.
        node_id: This scheduler, written into each message for debugging.
        timeout_s: How long one publish waits for the stream's acknowledgement.
        streams: Recreates a lost stream when a publish finds none (then the publish is
            tried once more); None: a failed publish is only left to the sweeper.
    """

    def __init__(
        self,
        jetstream: JetStreamContext,
        node_id: str,
        timeout_s: float = 5.0,
        *,
        streams: StreamKeeper | None = None,
    ) -> None:
        self._js = jetstream
        self._streams = streams
        self.jetstream = jetstream
        """The JetStream context (dead letters are published through it too)."""
        self._node_id = node_id
        self._timeout_s = timeout_s
        self.timeout_s = timeout_s
        """How long one publish waits for its acknowledgement (dead letters too)."""

    async def publish(self, batch: PublishBatch, now: datetime) -> bool:
        """Publish one batch; True once JetStream stored it (or dropped it as a duplicate).

        Never raises for a NATS problem: the batch's runs keep their ``check_at``, so the
        sweeper publishes them again under a new dispatch sequence. When no stream took
        it, the keeper recreates the streams and the batch is published once more.
        """
        msg_id = message_id(batch)
        started = time.monotonic()
        try:
            try:
                await self._publish(batch, msg_id, now)
            except (NatsError, TimeoutError, OSError) as exc:
                if self._streams is None or not stream_missing(exc):
                    raise
                if not await self._streams.after_failure(started):
                    raise
                await self._publish(batch, msg_id, now)
        except (NatsError, TimeoutError, OSError) as exc:
            log.warning(
                "publish of dispatch %s failed: %s; the sweeper will retry",
                batch.dispatch_seq,
                exc,
                extra={"action": "publish", "run_key": msg_id.split("#")[0]},
            )
            return False
        return True

    async def _publish(self, batch: PublishBatch, msg_id: str, now: datetime) -> None:
        await self._js.publish(
            runs_subject(batch.partition),
            encode_run_dispatch(batch, self._node_id, now),
            timeout=self._timeout_s,
            stream=RUNS_STREAM,
            headers={"Nats-Msg-Id": msg_id},
        )

    async def publish_all(
        self, batches: Sequence[PublishBatch], now: datetime
    ) -> list[PublishBatch]:
        """Publish ``batches`` concurrently; returns those JetStream acknowledged."""
        results = await asyncio.gather(*(self.publish(b, now) for b in batches))
        return [b for b, ok in zip(batches, results, strict=True) if ok]


MAX_DEAD_LETTERS_IN_FLIGHT = 32
"""Dead letters a sweep publishes at once: a NATS outage costs one timeout per pass, not
one per letter."""


async def publish_dead_letter(
    jetstream: JetStreamContext | None,
    letter: DeadLetterRun,
    now: datetime,
    *,
    timeout_s: float = 5.0,
) -> bool:
    """Publish the DeadLetter of a dead run (message id ``<run key>#dead#<attempt>``, so
    JetStream drops a repeat within its duplicate window).

    Never raises for NATS: the dead row keeps ``check_at`` (the outbox) until the letter
    is acknowledged, and the sweeper publishes it again.

    Returns:
        True once JetStream stored the letter (or dropped it as a duplicate).
    """
    key = letter.ref.key
    if jetstream is None:
        return False
    headers = {"Nats-Msg-Id": f"{key}#dead#{letter.attempt}"}
    span = None
    if tracing.enabled():
        # In the run's trace; its context goes with the letter, so a consumer of
        # SUNDIAL_DEAD can continue it.
        span = tracing.start_span(
            "sundial.dead_letter",
            parent=letter.traceparent,
            kind=trace.SpanKind.PRODUCER,
            attributes={
                "sundial.run_key": key,
                "sundial.attempt": letter.attempt,
                "messaging.system": "nats",
                "messaging.destination.name": DEAD_STREAM,
            },
        )
        headers["traceparent"] = tracing.traceparent_of(span)
    try:
        await jetstream.publish(
            dead_subject(letter.tenant_id),
            encode_dead_letter(letter, now),
            timeout=timeout_s,
            stream=DEAD_STREAM,
            headers=headers,
        )
    except (NatsError, TimeoutError, OSError) as exc:
        log.warning(
            "dead letter not published yet: %s; the sweeper will retry",
            exc,
            extra={"action": "dead_letter", "run_key": key},
        )
        if span is not None:
            span.set_status(trace.StatusCode.ERROR, f"not published: {type(exc).__name__}")
            span.end()
        return False
    if span is not None:
        span.end()
    log.warning(
        "run is dead: %s",
        letter.last_error,
        extra={"action": "dead_letter", "job_id": str(letter.ref.job_id), "run_key": key},
    )
    return True


async def publish_due_dead_letters(
    jetstream: JetStreamContext | None,
    letters: Sequence[DeadLetterRun],
    now: datetime,
    *,
    timeout_s: float = 5.0,
) -> list[HeldRun]:
    """Publish the due dead-letter outbox entries, a bounded number at once.

    Returns:
        ``(run, attempt)`` of each letter JetStream acknowledged.
    """
    slots = asyncio.Semaphore(MAX_DEAD_LETTERS_IN_FLIGHT)

    async def one(letter: DeadLetterRun) -> bool:
        async with slots:
            return await publish_dead_letter(
                jetstream, letter, letter.finished_at or now, timeout_s=timeout_s
            )

    results = await asyncio.gather(*(one(letter) for letter in letters))
    return [(letter.ref, letter.attempt) for letter, ok in zip(letters, results, strict=True) if ok]
