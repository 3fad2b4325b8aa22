"""HTTP targets at the connection level, against real local servers: which address is
connected to (the one the SSRF rules checked, at every new connection), what a cancel
closes, how much of a body is read, and what the client does not do by itself (keep
cookies, use environment proxies, ask for compression, trust an unknown CA)."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sundial.devstack import free_port
from sundial.executor.runner import Runner
from sundial.run import ErrorClass, HttpTarget, OutcomeStatus
from sundial.targets import AddressPolicy, CircuitBreaker, GrpcCaller, HttpCaller
from sundial.targets import address as address_module
from sundial.targets import http as http_module
from tests.helpers.certs import Authority
from tests.helpers.dns_server import DnsServer
from tests.helpers.eventually import assert_eventually
from tests.helpers.target_server import RecordingTarget
from tests.integration.executor.conftest import make_lease

pytestmark = pytest.mark.timeout(30)

NAME = "target.example"


@pytest.fixture
async def caller() -> AsyncIterator[HttpCaller]:
    http = HttpCaller(AddressPolicy(allow_loopback=True), max_connections=8)
    yield http
    await http.aclose()


def answer_dns(dns_server: DnsServer, answers: dict[str, list[str]]) -> list[str]:
    """The DNS server answers ``answers``; other names do not exist. Returns the names
    looked up, in order (the server's live record)."""
    dns_server.answers.update(answers)
    return dns_server.order


async def test_a_name_is_connected_at_the_address_the_policy_checked(
    caller: HttpCaller, target: RecordingTarget, dns_server: DnsServer
) -> None:
    port = target.url.rsplit(":", 1)[1]
    looked_up = answer_dns(dns_server, {NAME: ["127.0.0.1"]})
    outcome = await caller.call(HttpTarget(f"http://{NAME}:{port}/n"), b"x", {})
    assert outcome.status is OutcomeStatus.SUCCEEDED
    assert looked_up == [NAME]
    [call] = target.calls
    assert call.request.headers["host"] == f"{NAME}:{port}"
    # Nothing asks for a compressed body: the bounded read bounds what is received.
    assert "accept-encoding" not in call.request.headers


async def test_a_name_with_any_forbidden_address_is_refused_before_connecting(
    caller: HttpCaller, target: RecordingTarget, dns_server: DnsServer
) -> None:
    port = target.url.rsplit(":", 1)[1]
    answer_dns(dns_server, {NAME: ["127.0.0.1", "169.254.169.254"]})
    outcome = await caller.call(HttpTarget(f"http://{NAME}:{port}/n"), b"x", {})
    assert outcome.status is OutcomeStatus.FAILED_FINAL
    assert outcome.error_class is ErrorClass.TARGET_FORBIDDEN
    assert "169.254.169.254" in outcome.error
    assert target.calls == []


async def test_every_new_connection_is_checked_again(
    caller: HttpCaller, target: RecordingTarget, dns_server: DnsServer
) -> None:
    """DNS rebinding: the name later resolves to a forbidden address."""
    port = target.url.rsplit(":", 1)[1]
    answers = {NAME: ["127.0.0.1"]}
    looked_up = answer_dns(dns_server, answers)
    # The target closes each connection, so the next call needs a new one.
    target.script("/n", headers={"Connection": "close"})
    url = f"http://{NAME}:{port}/n"
    assert (await caller.call(HttpTarget(url), b"x", {})).status is OutcomeStatus.SUCCEEDED
    dns_server.answers[NAME] = ["169.254.169.254"]
    outcome = await caller.call(HttpTarget(url), b"x", {})
    assert outcome.error_class is ErrorClass.TARGET_FORBIDDEN
    assert looked_up == [NAME, NAME]
    assert len(target.calls) == 1


async def test_an_ip_literal_is_checked_without_a_lookup(
    target: RecordingTarget, dns_server: DnsServer
) -> None:
    looked_up = answer_dns(dns_server, {})
    strict = HttpCaller(AddressPolicy())
    try:
        for url in (f"{target.url}/a", f"http://[::1]:{target.url.rsplit(':', 1)[1]}/a"):
            outcome = await strict.call(HttpTarget(url), b"x", {})
            assert outcome.error_class is ErrorClass.TARGET_FORBIDDEN, url
            assert "loopback" in outcome.error
    finally:
        await strict.aclose()
    assert looked_up == []
    assert target.calls == []


async def _until_set(event: asyncio.Event) -> None:
    def is_set() -> None:
        assert event.is_set(), "not yet"

    await assert_eventually(is_set, timeout_s=5)


@pytest.mark.parametrize("how", ["cancelled", "run timeout"])
async def test_an_abandoned_call_closes_its_connection(runner: Runner, how: str) -> None:
    """A cancel order or the run timeout ends the request at the target too: the
    connection is closed, not returned to the pool with a request still pending."""
    received, closed = asyncio.Event(), asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        received.set()
        while await reader.read(65536):  # never answers; b"" is the client closing
            pass
        closed.set()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/"
    try:
        if how == "cancelled":
            task = asyncio.create_task(runner.run(make_lease(HttpTarget(url))))
            await _until_set(received)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        else:
            outcome = await runner.run(make_lease(HttpTarget(url), run_timeout_s=0.3))
            assert outcome.status is OutcomeStatus.TIMED_OUT
            assert received.is_set()
        await _until_set(closed)
    finally:
        server.close()
        await server.wait_closed()


async def test_bodies_are_read_only_up_to_a_bound(
    caller: HttpCaller, target: RecordingTarget
) -> None:
    big = b"x" * (1024 * 1024)
    target.script("/big", body=big)
    target.script("/big-error", status=500, body=big)
    assert (await caller.call(HttpTarget(f"{target.url}/big"), b"", {})).status is (
        OutcomeStatus.SUCCEEDED
    )
    failed = await caller.call(HttpTarget(f"{target.url}/big-error"), b"", {})
    assert failed.status is OutcomeStatus.FAILED_RETRYABLE
    assert failed.error is not None
    assert len(failed.error) < 1100
    # The connections left with unread bodies were closed, not reused half-read.
    assert (await caller.call(HttpTarget(f"{target.url}/ok"), b"", {})).status is (
        OutcomeStatus.SUCCEEDED
    )
    assert len(target.calls) == 3


async def test_cookies_set_by_a_target_are_not_sent_back(
    caller: HttpCaller, target: RecordingTarget
) -> None:
    target.script("/login", headers={"Set-Cookie": "session=tenant-a; Path=/"})
    await caller.call(HttpTarget(f"{target.url}/login"), b"", {})
    await caller.call(HttpTarget(f"{target.url}/next"), b"", {})
    assert "cookie" not in target.calls[1].request.headers


async def test_environment_proxies_are_ignored(
    target: RecordingTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
        monkeypatch.setenv(name, proxy)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    http = HttpCaller(AddressPolicy(allow_loopback=True))
    try:
        outcome = await http.call(HttpTarget(f"{target.url}/direct"), b"", {})
    finally:
        await http.aclose()
    assert outcome.status is OutcomeStatus.SUCCEEDED
    assert target.calls[0].path == "/direct"


async def test_a_hung_connect_is_a_connection_error_not_the_run_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server that accepts TCP but never completes the TLS handshake."""
    accepted: list[asyncio.StreamWriter] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)
        await reader.read()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    monkeypatch.setattr(http_module, "_CONNECT_TIMEOUT_S", 0.3)
    policy = AddressPolicy(allow_loopback=True)
    http, grpc_caller = HttpCaller(policy), GrpcCaller(policy)
    runner = Runner(http, grpc_caller, CircuitBreaker(failures=3, open_s=1))
    try:
        lease = make_lease(HttpTarget(f"https://127.0.0.1:{port}/"), run_timeout_s=10)
        outcome = await runner.run(lease)
    finally:
        await http.aclose()
        await grpc_caller.aclose()
        for writer in accepted:
            writer.close()
        server.close()
        await server.wait_closed()
    assert outcome.status is OutcomeStatus.FAILED_RETRYABLE
    assert outcome.error_class is ErrorClass.CONNECTION
    assert outcome.error is not None and "timeout" in outcome.error.lower()
    assert outcome.finished_at is not None and outcome.started_at is not None
    assert (outcome.finished_at - outcome.started_at).total_seconds() < 5


async def test_a_certificate_from_an_unknown_ca_is_refused(
    caller: HttpCaller, tmp_path: Path
) -> None:
    issued = Authority(tmp_path).issue("target", client=False)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(issued.cert_file, issued.key_file)
    served: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            served.append(await reader.readuntil(b"\r\n\r\n"))
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=context)
    port = server.sockets[0].getsockname()[1]
    try:
        outcome = await caller.call(HttpTarget(f"https://localhost:{port}/"), b"", {})
    finally:
        server.close()
        await server.wait_closed()
    assert outcome.status is OutcomeStatus.FAILED_RETRYABLE
    assert outcome.error_class is ErrorClass.CONNECTION
    assert "certificate" in outcome.error.lower()
    assert served == []


async def test_a_hung_name_lookup_is_a_connection_error_not_the_run_timeout(
    caller: HttpCaller, monkeypatch: pytest.MonkeyPatch, dns_server: DnsServer
) -> None:
    """The resolver's own bound ends the lookup; the runner must not mistake it for the
    run timeout (both are TimeoutErrors)."""
    dns_server.silent.add(NAME)  # never answers
    monkeypatch.setattr(address_module, "RESOLVE_TIMEOUT_S", 0.1)
    outcome = await caller.call(HttpTarget(f"http://{NAME}/"), b"", {})
    assert outcome.status is OutcomeStatus.FAILED_RETRYABLE
    assert outcome.error_class is ErrorClass.CONNECTION
