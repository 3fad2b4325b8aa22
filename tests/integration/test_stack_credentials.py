"""NATS and etcd of the local stack refuse strangers and keep each service to its part.

The stack configures them as a production deployment should (README, "Credentials and
the internal plane"): NATS users with subject permissions (schedulers publish runs and
dead letters, executors consume runs), etcd with auth enabled and the services' user
confined to ``/sundial/``.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import aetcd
import nats
import pytest
from nats.aio.client import Client as NatsClient
from nats.errors import Error as NatsError

from sundial.core.bus import (
    DEAD_STREAM,
    RUNS_STREAM,
    connect_bus,
    dead_subject,
    ensure_streams,
    runs_subject,
)
from sundial.core.config import EtcdConfig, NatsConfig
from sundial.core.coord import connect_etcd
from sundial.devstack import EtcdServer, NatsServer, ServerTls, Stack, inbox_prefix
from tests.helpers.certs import Authority, Issued
from tests.helpers.eventually import assert_eventually
from tests.helpers.stack import nats_options

pytestmark = pytest.mark.timeout(60)

# A permission violation is reported asynchronously; the request it denied then gets
# no answer. A short timeout keeps each refused call quick.
REFUSED_WITHIN_S = 1.0


@contextlib.asynccontextmanager
async def nats_as(stack: Stack, role: str) -> AsyncIterator[NatsClient]:
    client = await nats.connect(**nats_options(stack, role))
    try:
        yield client
    finally:
        await client.close()


async def refused_connect(**options: Any) -> None:
    """``nats.connect`` expected to fail, with nothing of the attempt left behind (nats-py
    keeps the socket and its reader task until ``close``, also after a refusal)."""
    client = NatsClient()
    try:
        await client.connect(allow_reconnect=False, max_reconnect_attempts=0, **options)
    finally:
        with contextlib.suppress(TimeoutError):  # close can wait on a failed handshake
            async with asyncio.timeout(5):
                await client.close()


async def stream_count(stack: Stack, stream: str) -> int:
    bus = await connect_bus(stack.nats_config(), name="count")
    try:
        info = await bus.jetstream.stream_info(stream)
        return int(info.state.messages)
    finally:
        await bus.close()


@pytest.fixture
async def streams(stack: Stack) -> None:
    bus = await connect_bus(stack.nats_config(), name="streams")
    try:
        await ensure_streams(bus.jetstream)
    finally:
        await bus.close()


@pytest.mark.parametrize(
    "credentials", [{}, {"user": "sundial-scheduler", "password": "guessed"}], ids=["none", "bad"]
)
async def test_nats_refuses_a_connection_without_valid_credentials(
    stack: Stack, credentials: dict[str, str]
) -> None:
    with pytest.raises(NatsError, match=r"(?i)authorization"):
        await refused_connect(servers=[stack.nats_url], connect_timeout=5, **credentials)


async def test_a_scheduler_publishes_runs_but_cannot_consume_them(
    stack: Stack, streams: None
) -> None:
    async with nats_as(stack, "scheduler") as client:
        js = client.jetstream(timeout=REFUSED_WITHIN_S)
        before = await stream_count(stack, RUNS_STREAM)
        ack = await js.publish(runs_subject(0), b"", headers={"Nats-Msg-Id": str(uuid.uuid4())})
        assert ack.stream == RUNS_STREAM
        assert await stream_count(stack, RUNS_STREAM) == before + 1
        for stream, subject in ((RUNS_STREAM, "sundial.runs.>"), (DEAD_STREAM, "sundial.dead.>")):
            with pytest.raises((NatsError, TimeoutError)):
                subscription = await js.pull_subscribe(
                    subject, durable=f"thief-{stream}", stream=stream
                )
                await subscription.fetch(1, timeout=REFUSED_WITHIN_S)
    assert await stream_count(stack, RUNS_STREAM) == before + 1  # nothing was taken


async def test_no_user_can_read_replies_sent_to_another(stack: Stack, streams: None) -> None:
    # Fetched messages and API answers travel as replies; each user subscribes under its
    # own inbox prefix only, so a scheduler cannot eavesdrop on what executors fetch.
    executor_inbox = stack.nats_config("executor").nats_inbox_prefix
    errors: list[str] = []

    async def record(exc: Exception) -> None:
        errors.append(str(exc).lower())

    client = await nats.connect(**nats_options(stack, "scheduler"), error_cb=record)
    try:
        for subject in (f"{executor_inbox}.>", "_INBOX.>", ">"):
            await client.subscribe(subject)

            def refused(subject: str = subject) -> None:
                assert any("permissions violation" in e and subject.lower() in e for e in errors), (
                    errors
                )

            await assert_eventually(refused, timeout_s=5, what=f"{subject} refused")
    finally:
        await client.close()


async def test_an_executor_consumes_runs_but_cannot_publish_them_or_read_dead_letters(
    stack: Stack, streams: None
) -> None:
    before = await stream_count(stack, RUNS_STREAM)
    dead_before = await stream_count(stack, DEAD_STREAM)
    async with nats_as(stack, "executor") as client:
        js = client.jetstream(timeout=REFUSED_WITHIN_S)
        for subject in (runs_subject(0), dead_subject("victim")):
            with pytest.raises((NatsError, TimeoutError)):
                await js.publish(subject, b"forged")
        with pytest.raises((NatsError, TimeoutError)):
            subscription = await js.pull_subscribe(
                "sundial.dead.>", durable="peek", stream=DEAD_STREAM
            )
            await subscription.fetch(1, timeout=REFUSED_WITHIN_S)
        # What executors need still works (consuming is what every executor test does).
        assert (await js.stream_info(RUNS_STREAM)).config.name == RUNS_STREAM
    assert await stream_count(stack, RUNS_STREAM) == before
    assert await stream_count(stack, DEAD_STREAM) == dead_before


async def test_etcd_refuses_unauthenticated_writes_and_confines_the_services_user(
    stack: Stack,
) -> None:
    host, _, port = stack.etcd_endpoints[0].rpartition(":")
    stranger = aetcd.Client(host=host, port=int(port), timeout=5)
    await stranger.connect()
    try:
        with pytest.raises(aetcd.exceptions.ClientError):
            await stranger.put(b"/sundial/stranger", b"x")
    finally:
        await stranger.close()
    config = stack.etcd_config()
    with pytest.raises(aetcd.exceptions.ClientError):
        await connect_etcd(replace(config, etcd_password="guessed"))
    services = await connect_etcd(config)
    try:
        key = f"/sundial/creds-{uuid.uuid4().hex}".encode()
        await services.put(key, b"ok")
        assert (await services.get(key)).value == b"ok"
        with pytest.raises(aetcd.exceptions.ClientError):
            await services.put(b"/elsewhere", b"x")
    finally:
        await services.close()


# --- TLS to NATS and etcd ---------------------------------------------------------------


@pytest.fixture
def authority(tmp_path: Path) -> tuple[Authority, ServerTls, Issued]:
    """A CA, server files signed by it, and a client certificate it signed."""
    ca = Authority(tmp_path / "pki")
    server = ca.issue("datastore", client=False)
    client = ca.issue("sundial-service", server=False)
    return ca, ServerTls(server.cert_file, server.key_file, ca.cert_file), client


async def test_etcd_and_nats_over_mutual_tls_with_credentials(
    tmp_path: Path, authority: tuple[Authority, ServerTls, Issued]
) -> None:
    ca, tls, client = authority
    etcd = EtcdServer(tmp_path / "etcd-tls", tls=tls)
    etcd.use_client_certificate(client.cert_file, client.key_file)
    nats_server = NatsServer(tmp_path / "nats-tls", tls=tls)
    await asyncio.to_thread(etcd.start)
    try:
        await asyncio.to_thread(nats_server.start)
        try:
            await _use_both_over_tls(ca, client, etcd, nats_server)
        finally:
            await asyncio.to_thread(nats_server.stop)
    finally:
        await asyncio.to_thread(etcd.stop)


async def _use_both_over_tls(
    ca: Authority, client: Issued, etcd: EtcdServer, nats_server: NatsServer
) -> None:
    user, password = etcd.user
    etcd_config = EtcdConfig(
        etcd_endpoints=(f"https://{etcd.endpoint}",),
        etcd_user=user,
        etcd_password=password,
        etcd_tls_ca_file=ca.cert_file,
        etcd_tls_cert_file=client.cert_file,
        etcd_tls_key_file=client.key_file,
    )
    assert etcd_config.etcd_tls
    services = await connect_etcd(etcd_config)
    try:
        await services.put(b"/sundial/over-tls", b"ok")
        assert (await services.get(b"/sundial/over-tls")).value == b"ok"
    finally:
        await services.close()
    # Without a client certificate the handshake fails: nothing gets through.
    with pytest.raises((aetcd.exceptions.ClientError, TimeoutError)):
        await connect_etcd(replace(etcd_config, etcd_tls_cert_file=None, etcd_tls_key_file=None))

    port = nats_server.url.rsplit(":", 1)[1]
    user, password = nats_server.users["scheduler"]
    nats_config = NatsConfig(
        nats_url=f"tls://127.0.0.1:{port}",
        nats_user=user,
        nats_password=password,
        nats_inbox_prefix=inbox_prefix(user),
        nats_tls_ca_file=ca.cert_file,
        nats_tls_cert_file=client.cert_file,
        nats_tls_key_file=client.key_file,
    )
    bus = await connect_bus(nats_config, name="over-tls")
    try:
        await ensure_streams(bus.jetstream)
        ack = await bus.jetstream.publish(runs_subject(1), b"", headers={"Nats-Msg-Id": "tls-1"})
        assert ack.stream == RUNS_STREAM
    finally:
        await bus.close()
    with pytest.raises((NatsError, OSError, TimeoutError)):
        await refused_connect(
            servers=[f"nats://127.0.0.1:{port}"], user=user, password=password, connect_timeout=3
        )
