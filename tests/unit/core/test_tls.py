"""TLS and mTLS on a real ``build_server`` server on loopback: who gets in, who is refused,
and certificates replaced on disk taking effect on the next handshake, no restart."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sundial.core.config import ConfigError, ServerConfig
from sundial.core.grpc import Server, build_server
from sundial.core.tls import ClientTls, TlsError, balanced_target, dial, dial_sync
from sundial.executor.config import ExecutorConfig
from tests.helpers.certs import Authority, Issued, peer_serial, write_atomically

SERVING = health_pb2.HealthCheckResponse.SERVING

Serve = Callable[[ServerConfig], Awaitable[Server]]
"""Starts a server for the test (stopped at its end)."""


@dataclass
class Pki:
    """The server's CA with a server and a client certificate, and an unrelated CA."""

    ca: Authority
    server: Issued
    client: Issued
    other_ca: Authority
    stranger: Issued  # a client certificate the other CA signed


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    ca = Authority(tmp_path / "ca", "sundial-ca")
    other = Authority(tmp_path / "other", "other-ca")
    return Pki(
        ca=ca,
        server=ca.issue("server", client=False),
        client=ca.issue("executor", server=False),
        other_ca=other,
        stranger=other.issue("stranger", server=False),
    )


def _config(pki: Pki, *, mutual: bool) -> ServerConfig:
    return ServerConfig(
        listen="127.0.0.1:0",
        grace_period_s=0,
        tls_cert_file=pki.server.cert_file,
        tls_key_file=pki.server.key_file,
        tls_client_ca_file=pki.ca.cert_file if mutual else None,
    )


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    started: list[Server] = []

    async def start(config: ServerConfig) -> Server:
        server = build_server(config, services=[], service_names=())
        started.append(server)
        await server.start()
        await server.set_serving()
        return server

    yield start
    for server in started:
        await server.stop(0)


async def _check(address: str, tls: ClientTls | None) -> grpc.StatusCode:
    """OK when a health check over a new channel succeeds, else the call's code."""
    async with dial(address, tls) as channel:
        try:
            answer = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=5
            )
        except grpc.aio.AioRpcError as exc:
            return exc.code()
    assert answer.status == SERVING
    return grpc.StatusCode.OK


async def _codes(address: str, clients: dict[str, ClientTls | None]) -> dict[str, str]:
    """Each client's health check on ``address``: ``OK`` or the refusal's code name."""
    return {label: (await _check(address, tls)).name for label, tls in clients.items()}


async def test_tls_server_answers_tls_clients_and_refuses_plaintext(serve: Serve, pki: Pki) -> None:
    server = await serve(_config(pki, mutual=False))
    assert server.transport == "tls"

    assert await _codes(
        server.address,
        {
            "verifies with the CA": pki.ca.client_tls(),
            "plaintext": None,
            # A client that trusts another CA does not accept this server's certificate.
            "trusts another CA": pki.other_ca.client_tls(),
        },
    ) == {
        "verifies with the CA": "OK",
        "plaintext": "UNAVAILABLE",
        "trusts another CA": "UNAVAILABLE",
    }


async def test_mtls_admits_only_clients_with_a_certificate_from_the_client_ca(
    serve: Serve, pki: Pki
) -> None:
    server = await serve(_config(pki, mutual=True))
    assert server.transport == "mtls"

    stranger = replace(
        pki.ca.client_tls(), cert_file=pki.stranger.cert_file, key_file=pki.stranger.key_file
    )
    assert await _codes(
        server.address,
        {
            "certificate from the CA": pki.ca.client_tls(pki.client),
            "no certificate": pki.ca.client_tls(),
            "certificate from another CA": stranger,
            "plaintext": None,
        },
    ) == {
        "certificate from the CA": "OK",
        "no certificate": "UNAVAILABLE",
        "certificate from another CA": "UNAVAILABLE",
        "plaintext": "UNAVAILABLE",
    }


async def test_server_name_override_verifies_the_certificate_against_that_name(
    serve: Serve, pki: Pki
) -> None:
    # A certificate for a cluster name only: dialled by IP, it verifies only when the
    # client names the host the certificate is for.
    internal = pki.ca.issue("ledger", client=False, hosts=("ledger.sundial.internal",))
    config = replace(
        _config(pki, mutual=False), tls_cert_file=internal.cert_file, tls_key_file=internal.key_file
    )
    server = await serve(config)

    assert await _codes(
        server.address,
        {
            "override": replace(pki.ca.client_tls(), server_name="ledger.sundial.internal"),
            "by IP": pki.ca.client_tls(),
        },
    ) == {"override": "OK", "by IP": "UNAVAILABLE"}


async def test_replaced_certificate_is_presented_on_new_handshakes_without_restart(
    serve: Serve, pki: Pki
) -> None:
    server = await serve(_config(pki, mutual=True))
    client = pki.ca.client_tls(pki.client)
    async with dial(server.address, client) as long_lived:
        stub = health_pb2_grpc.HealthStub(long_lived)
        await stub.Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert await _peer(server, pki) == pki.server.serial

        renewed = pki.ca.issue(
            "server", client=False, cert_file=pki.server.cert_file, key_file=pki.server.key_file
        )
        assert renewed.serial != pki.server.serial

        assert await _peer(server, pki) == renewed.serial
        assert server.certificates is not None and server.certificates.reloads == 1
        assert await _check(server.address, client) == grpc.StatusCode.OK
        # The connection made before the rotation keeps working.
        answer = await stub.Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert answer.status == SERVING


async def test_broken_replacement_keeps_the_old_certificate_and_logs_no_secret(
    serve: Serve, pki: Pki, caplog: pytest.LogCaptureFixture
) -> None:
    server = await serve(_config(pki, mutual=False))
    assert await _peer(server, pki) == pki.server.serial

    # A key that does not belong to the certificate (a half-done rotation).
    other_key = pki.ca.issue("unrelated").key_pem
    with caplog.at_level(logging.INFO, logger="sundial.core.tls"):
        write_atomically(pki.server.key_file, other_key)
        assert await _peer(server, pki) == pki.server.serial
        assert await _check(server.address, pki.ca.client_tls()) == grpc.StatusCode.OK
        # Not PEM at all.
        write_atomically(pki.server.cert_file, b"-----BEGIN CERTIFICATE-----\nnot base64\n")
        assert await _peer(server, pki) == pki.server.serial

    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 2, [r.getMessage() for r in caplog.records]
    assert all("still serving the previous ones" in r.getMessage() for r in errors)
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert str(pki.server.key_file) in logged
    for secret in (other_key, pki.server.key_pem):
        body = secret.decode().splitlines()[1]  # the first line of base64 key material
        assert body not in logged
    assert server.certificates is not None and server.certificates.reloads == 0

    # A good pair written afterwards is taken into use.
    fixed = pki.ca.issue(
        "server", client=False, cert_file=pki.server.cert_file, key_file=pki.server.key_file
    )
    assert await _peer(server, pki) == fixed.serial


async def test_replaced_client_ca_changes_who_is_admitted(serve: Serve, pki: Pki) -> None:
    server = await serve(_config(pki, mutual=True))
    stranger = ClientTls(
        ca_file=pki.ca.cert_file,
        cert_file=pki.stranger.cert_file,
        key_file=pki.stranger.key_file,
    )
    assert await _check(server.address, stranger) == grpc.StatusCode.UNAVAILABLE

    write_atomically(pki.ca.cert_file, pki.ca.cert_pem + pki.other_ca.cert_pem)
    assert await _check(server.address, stranger) == grpc.StatusCode.OK
    assert await _check(server.address, pki.ca.client_tls(pki.client)) == grpc.StatusCode.OK


async def test_a_server_does_not_start_with_files_that_do_not_load(pki: Pki) -> None:
    mismatched = replace(_config(pki, mutual=False), tls_key_file=pki.client.key_file)
    with pytest.raises(TlsError, match="do not load as a pair"):
        build_server(mismatched, services=[], service_names=())
    missing = replace(_config(pki, mutual=True), tls_client_ca_file=pki.ca.directory / "nope.crt")
    with pytest.raises(TlsError, match="cannot read the client CA file"):
        build_server(missing, services=[], service_names=())
    not_a_ca = replace(_config(pki, mutual=True), tls_client_ca_file=pki.server.key_file)
    with pytest.raises(TlsError, match="holds no usable certificate"):
        build_server(not_a_ca, services=[], service_names=())


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"SUNDIAL_TLS_CERT_FILE": "/tls/tls.crt"}, "SUNDIAL_TLS_KEY_FILE"),
        ({"SUNDIAL_TLS_KEY_FILE": "/tls/tls.key"}, "SUNDIAL_TLS_CERT_FILE"),
        ({"SUNDIAL_TLS_CLIENT_CA_FILE": "/tls/ca.crt"}, "SUNDIAL_TLS_CLIENT_CA_FILE"),
    ],
)
def test_config_refuses_half_a_tls_setup(env: dict[str, str], variable: str) -> None:
    with pytest.raises(ConfigError) as caught:
        ServerConfig.from_env(environ=env)
    assert caught.value.name == variable


def test_config_reads_the_tls_files_from_the_environment() -> None:
    config = ServerConfig.from_env(
        environ={
            "SUNDIAL_TLS_CERT_FILE": "/tls/tls.crt",
            "SUNDIAL_TLS_KEY_FILE": "/tls/tls.key",
            "SUNDIAL_TLS_CLIENT_CA_FILE": "/tls/ca.crt",
        }
    )
    assert (config.tls_cert_file, config.tls_key_file, config.tls_client_ca_file) == (
        Path("/tls/tls.crt"),
        Path("/tls/tls.key"),
        Path("/tls/ca.crt"),
    )


def test_client_tls_needs_certificate_and_key_together(pki: Pki) -> None:
    with pytest.raises(TlsError):
        ClientTls(cert_file=pki.client.cert_file)
    with pytest.raises(TlsError, match="cannot read the CA file"):
        dial_sync("127.0.0.1:1", ClientTls(ca_file=pki.ca.directory / "missing.crt"))


async def test_sync_channel_dials_tls_with_a_client_certificate(serve: Serve, pki: Pki) -> None:
    server = await serve(_config(pki, mutual=True))

    def check() -> int:
        with dial_sync(server.address, pki.ca.client_tls(pki.client)) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            answer = stub.Check(  # type: ignore[attr-defined]
                health_pb2.HealthCheckRequest(), timeout=5
            )
            return int(answer.status)

    assert await asyncio.to_thread(check) == SERVING


async def _peer(server: Server, pki: Pki) -> int:
    return await asyncio.to_thread(peer_serial, server.address, pki.ca.cert_file, client=pki.client)


_EXECUTOR_ENV = {
    "SUNDIAL_NATS_URL": "nats://127.0.0.1:4222",
    "SUNDIAL_LEDGER_ADDRESS": "10.0.0.7:50051",
    "SUNDIAL_LEDGER_TOKEN": "executor-token",
}


def test_executor_dials_the_ledger_with_tls_when_told_or_given_a_ca() -> None:
    def ledger_tls(**env: str) -> ClientTls | None:
        return ExecutorConfig.from_env(environ={**_EXECUTOR_ENV, **env}).ledger_channel_tls

    assert ledger_tls() is None
    assert ledger_tls(SUNDIAL_LEDGER_TLS="1") == ClientTls()
    assert ledger_tls(
        SUNDIAL_LEDGER_TLS_CA_FILE="/tls/ca.crt",
        SUNDIAL_LEDGER_TLS_CERT_FILE="/tls/tls.crt",
        SUNDIAL_LEDGER_TLS_KEY_FILE="/tls/tls.key",
        SUNDIAL_LEDGER_TLS_SERVER_NAME="ledger.sundial.internal",
    ) == ClientTls(
        ca_file=Path("/tls/ca.crt"),
        cert_file=Path("/tls/tls.crt"),
        key_file=Path("/tls/tls.key"),
        server_name="ledger.sundial.internal",
    )


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"SUNDIAL_LEDGER_TLS_CERT_FILE": "/tls/tls.crt"}, "SUNDIAL_LEDGER_TLS_KEY_FILE"),
        ({"SUNDIAL_LEDGER_TLS_SERVER_NAME": "ledger"}, "SUNDIAL_LEDGER_TLS_SERVER_NAME"),
    ],
)
def test_executor_refuses_half_a_ledger_tls_setup(env: dict[str, str], variable: str) -> None:
    with pytest.raises(ConfigError) as caught:
        ExecutorConfig.from_env(environ={**_EXECUTOR_ENV, **env})
    assert caught.value.name == variable


@pytest.mark.parametrize(
    ("addresses", "target"),
    [
        (["etcd:2379"], "etcd:2379"),
        (["http://10.0.0.1:2379/"], "10.0.0.1:2379"),
        (["127.0.0.1:1", "https://127.0.0.2:2"], "ipv4:127.0.0.1:1,127.0.0.2:2"),
        (["[::1]:1", "[::2]:2"], "ipv6:[::1]:1,[::2]:2"),
        (["etcd-0:2379", "etcd-1:2379"], None),  # names: the caller resolves them
        (["127.0.0.1:1", "[::1]:2"], None),  # no gRPC target mixes the families
    ],
)
def test_a_balanced_target_reaches_every_address(addresses: list[str], target: str | None) -> None:
    assert balanced_target(addresses) == target
