"""NATS JetStream: connection and the streams Sundial relies on.

Two streams (docs/design.md section 6):

- ``SUNDIAL_RUNS`` on ``sundial.runs.<partition>``: work-queue retention, file storage,
  a two-minute duplicate window so a retried publish of the same dispatch
  (``Nats-Msg-Id`` = ``<run_key>#<dispatch_seq>``) is dropped.
- ``SUNDIAL_DEAD`` on ``sundial.dead.<tenant>``: dead letters, kept by limits.
"""

from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass
from typing import Any

import nats
from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext
from nats.js.api import RetentionPolicy, StorageType, StreamConfig
from nats.js.errors import NotFoundError

from sundial.core.config import NatsConfig

log = logging.getLogger(__name__)

RUNS_STREAM = "SUNDIAL_RUNS"
RUNS_SUBJECT_PREFIX = "sundial.runs"
DEAD_STREAM = "SUNDIAL_DEAD"
DEAD_SUBJECT_PREFIX = "sundial.dead"
DUPLICATE_WINDOW_S = 120.0
DEAD_LETTER_MAX_AGE_S = 30 * 24 * 3600.0


def runs_subject(partition: int) -> str:
    """The subject a dispatch batch of ``partition`` is published on."""
    return f"{RUNS_SUBJECT_PREFIX}.{partition}"


def dead_subject(tenant_id: str) -> str:
    """The subject a tenant's dead letters are published on."""
    return f"{DEAD_SUBJECT_PREFIX}.{tenant_id}"


def stream_configs() -> dict[str, StreamConfig]:
    """The desired configuration of both streams, by stream name."""
    return {
        RUNS_STREAM: StreamConfig(
            name=RUNS_STREAM,
            subjects=[f"{RUNS_SUBJECT_PREFIX}.>"],
            retention=RetentionPolicy.WORK_QUEUE,
            storage=StorageType.FILE,
            duplicate_window=DUPLICATE_WINDOW_S,
        ),
        DEAD_STREAM: StreamConfig(
            name=DEAD_STREAM,
            subjects=[f"{DEAD_SUBJECT_PREFIX}.>"],
            retention=RetentionPolicy.LIMITS,
            storage=StorageType.FILE,
            duplicate_window=DUPLICATE_WINDOW_S,
            max_age=DEAD_LETTER_MAX_AGE_S,
        ),
    }


@dataclass
class Bus:
    """A NATS connection and its JetStream context."""

    client: NatsClient
    jetstream: JetStreamContext

    async def close(self) -> None:
        """Drain: flush pending publishes, then close. Idempotent."""
        if not self.client.is_closed:
            await self.client.drain()


def _tls_context(config: NatsConfig) -> ssl.SSLContext | None:
    if not config.nats_tls:
        return None
    ca = str(config.nats_tls_ca_file) if config.nats_tls_ca_file else None
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca)
    if config.nats_tls_cert_file is not None and config.nats_tls_key_file is not None:
        context.load_cert_chain(config.nats_tls_cert_file, config.nats_tls_key_file)
    return context


async def connect_bus(config: NatsConfig, *, name: str) -> Bus:
    """Connect to NATS and return the JetStream context (streams are not touched).

    Authenticates with ``nats_user``/``nats_password`` or ``nats_creds_file`` and dials
    TLS when configured (:attr:`NatsConfig.nats_tls`).
    """
    options: dict[str, Any] = {"inbox_prefix": config.nats_inbox_prefix}
    if config.nats_user:
        options.update(user=config.nats_user, password=config.nats_password)
    if config.nats_creds_file is not None:
        options["user_credentials"] = str(config.nats_creds_file)
    tls = _tls_context(config)
    if tls is not None:
        options["tls"] = tls
    client = await nats.connect(
        servers=[u.strip() for u in config.nats_url.split(",") if u.strip()],
        name=name,
        max_reconnect_attempts=-1,  # a NATS restart must not end the service
        **options,
    )
    return Bus(client, client.jetstream())


async def ensure_streams(jetstream: JetStreamContext) -> None:
    """Create the streams, or bring an existing one to the desired configuration."""
    for name, config in stream_configs().items():
        try:
            await jetstream.stream_info(name)
        except NotFoundError:
            await jetstream.add_stream(config)
            log.info("created stream %s", name, extra={"action": "bus.stream"})
        else:
            await jetstream.update_stream(config)
