"""NATS JetStream: connection and the streams Sundial relies on.

Two streams (docs/design.md section 6):

- ``SUNDIAL_RUNS`` on ``sundial.runs.<partition>``: work-queue retention, file storage,
  a two-minute duplicate window so a retried publish of the same dispatch
  (``Nats-Msg-Id`` = ``<run_key>#<dispatch_seq>``) is dropped.
- ``SUNDIAL_DEAD`` on ``sundial.dead.<tenant>``: dead letters, kept by limits.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from dataclasses import dataclass
from typing import Any

from nats.aio.client import Client as NatsClient
from nats.errors import AuthorizationError, ConnectionClosedError, NoRespondersError
from nats.js import JetStreamContext
from nats.js.api import RetentionPolicy, StorageType, StreamConfig
from nats.js.errors import NotFoundError, ServiceUnavailableError
from nats.protocol.parser import AUTHORIZATION_VIOLATION

from sundial.core.config import NatsConfig
from sundial.core.dependency import Dependency, safe_address

log = logging.getLogger(__name__)

RUNS_STREAM = "SUNDIAL_RUNS"
RUNS_SUBJECT_PREFIX = "sundial.runs"
DEAD_STREAM = "SUNDIAL_DEAD"
DEAD_SUBJECT_PREFIX = "sundial.dead"
DUPLICATE_WINDOW_S = 120.0
DEAD_LETTER_MAX_AGE_S = 30 * 24 * 3600.0
DEAD_LETTERS_PER_TENANT = 1000
"""Dead letters SUNDIAL_DEAD keeps per tenant (its subject) by default: past it the
tenant's oldest goes, never another tenant's (``SUNDIAL_DEAD_LETTERS_PER_TENANT``)."""
FIRST_CONNECT_S = 5.0
"""How long :func:`connect_bus` tries the servers before reporting a failed attempt."""


def runs_subject(partition: int) -> str:
    """The subject a dispatch batch of ``partition`` is published on."""
    return f"{RUNS_SUBJECT_PREFIX}.{partition}"


def dead_subject(tenant_id: str) -> str:
    """The subject a tenant's dead letters are published on."""
    return f"{DEAD_SUBJECT_PREFIX}.{tenant_id}"


def stream_configs(
    replicas: int = 1, *, dead_letters_per_tenant: int = DEAD_LETTERS_PER_TENANT
) -> dict[str, StreamConfig]:
    """The desired configuration of both streams, by stream name.

    Args:
        replicas: Copies of each stream in a NATS cluster (1, or 3 or 5 for a cluster
            that survives losing one or two servers); the executors' consumer inherits it.
        dead_letters_per_tenant: SUNDIAL_DEAD's limit per subject, one subject per
            tenant: a tenant whose runs die by the thousand replaces its own oldest
            letters and leaves every other tenant's (and the servers' storage, which
            SUNDIAL_RUNS needs) alone. Each letter is at most ``DEAD_LETTER_MAX_BYTES``.
    """
    return {
        RUNS_STREAM: StreamConfig(
            name=RUNS_STREAM,
            subjects=[f"{RUNS_SUBJECT_PREFIX}.>"],
            retention=RetentionPolicy.WORK_QUEUE,
            storage=StorageType.FILE,
            duplicate_window=DUPLICATE_WINDOW_S,
            num_replicas=replicas,
        ),
        DEAD_STREAM: StreamConfig(
            name=DEAD_STREAM,
            subjects=[f"{DEAD_SUBJECT_PREFIX}.>"],
            retention=RetentionPolicy.LIMITS,
            storage=StorageType.FILE,
            duplicate_window=DUPLICATE_WINDOW_S,
            max_age=DEAD_LETTER_MAX_AGE_S,
            max_msgs_per_subject=dead_letters_per_tenant,
            num_replicas=replicas,
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


class NatsUnavailable(ConnectionError):
    """No NATS server accepted a connection within the first-connect window."""


# What a NATS that is not up yet answers with: no server within the first-connect window,
# a refused or reset socket, and, on a server still starting, JetStream not answering
# yet (no responders, 503, a timeout). A rejected user or password is not here.
CONNECT_ERRORS: tuple[type[BaseException], ...] = (
    OSError,  # NatsUnavailable, refused, reset; also TimeoutError and nats' TimeoutError
    NoRespondersError,
    ServiceUnavailableError,
    ConnectionClosedError,
)


def nats_dependency(config: NatsConfig) -> Dependency:
    """NATS as a dependency to wait for at start (see :mod:`sundial.core.dependency`)."""
    return Dependency("NATS", safe_address(config.nats_url), CONNECT_ERRORS)


def _is_authorization_error(exc: Exception) -> bool:
    # nats.py 2.x reports a refused CONNECT as a plain Error carrying the server's
    # "-ERR 'Authorization Violation'" text (its own FIXME says so); its parser's
    # constant is the only marker there is.
    return isinstance(exc, AuthorizationError) or AUTHORIZATION_VIOLATION in str(exc).lower()


async def connect_bus(
    config: NatsConfig, *, name: str, first_connect_s: float = FIRST_CONNECT_S
) -> Bus:
    """Connect to NATS and return the JetStream context (streams are not touched).

    Authenticates with ``nats_user``/``nats_password`` or ``nats_creds_file`` and dials
    TLS when configured (:attr:`NatsConfig.nats_tls`). Once connected, the client
    reconnects by itself for ever; the first connect, though, gives up after
    ``first_connect_s`` so the caller can report and retry it (nats.py would otherwise
    loop inside ``connect`` without end, since reconnects are unlimited).

    Raises:
        NatsUnavailable: No server accepted the connection in time.
        AuthorizationError: A server refused the credentials.
    """
    options: dict[str, Any] = {"inbox_prefix": config.nats_inbox_prefix}
    if config.nats_user:
        options.update(user=config.nats_user, password=config.nats_password)
    if config.nats_creds_file is not None:
        options["user_credentials"] = str(config.nats_creds_file)
    tls = _tls_context(config)
    if tls is not None:
        options["tls"] = tls
    first_errors: list[Exception] = []
    connected = False

    async def on_error(exc: Exception) -> None:
        if not connected:  # the caller reports the first connect's failure, once
            first_errors.append(exc)
            return
        log.warning("NATS connection error: %s", exc, extra={"action": "bus.error"})

    client = NatsClient()
    try:
        async with asyncio.timeout(first_connect_s):
            await client.connect(
                servers=[u.strip() for u in config.nats_url.split(",") if u.strip()],
                name=name,
                max_reconnect_attempts=-1,  # a NATS restart must not end the service
                error_cb=on_error,
                **options,
            )
    except BaseException as exc:
        await client.close()
        refused = [e for e in first_errors if _is_authorization_error(e)]
        if refused:
            raise AuthorizationError(str(refused[-1])) from None
        if isinstance(exc, TimeoutError):
            last = f": {first_errors[-1]}" if first_errors else ""
            raise NatsUnavailable(
                f"no NATS server accepted a connection within {first_connect_s:g} s{last}"
            ) from None
        raise
    connected = True
    return Bus(client, client.jetstream())


async def ensure_streams(
    jetstream: JetStreamContext,
    *,
    replicas: int = 1,
    dead_letters_per_tenant: int = DEAD_LETTERS_PER_TENANT,
) -> None:
    """Create the streams, or bring an existing one to the desired configuration (a
    changed replica count or per-tenant limit included: NATS applies them in place)."""
    configs = stream_configs(replicas, dead_letters_per_tenant=dead_letters_per_tenant)
    for name, config in configs.items():
        try:
            await jetstream.stream_info(name)
        except NotFoundError:
            await jetstream.add_stream(config)
            log.info("created stream %s", name, extra={"action": "bus.stream"})
        else:
            await jetstream.update_stream(config)
