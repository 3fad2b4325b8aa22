"""etcd: the client used for partition ownership (membership lives in the scheduler).

:func:`connect_etcd` authenticates with ``etcd_user``/``etcd_password`` when set (etcd
with ``auth enable``) and dials TLS when a CA or client certificate is configured or the
endpoint is ``https://`` (:class:`~sundial.core.config.EtcdConfig`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aetcd
import grpc
from aetcd import rpc, watcher

from sundial.core.config import EtcdConfig
from sundial.core.dependency import Dependency
from sundial.core.tls import ROUND_ROBIN, balanced_target

log = logging.getLogger(__name__)

# What an etcd that is not up yet answers with: UNAVAILABLE (aetcd's
# ConnectionFailedError), no answer in time, a refused socket. A rejected user or
# password (InvalidArgumentError, UnauthenticatedError) is not here.
CONNECT_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    aetcd.exceptions.ConnectionFailedError,
    aetcd.exceptions.ConnectionTimeoutError,
)


def etcd_dependency(config: EtcdConfig) -> Dependency:
    """etcd as a dependency to wait for at start (see :mod:`sundial.core.dependency`)."""
    endpoints = ",".join(e.split("://", 1)[-1].rstrip("/") for e in config.etcd_endpoints)
    return Dependency("etcd", endpoints, CONNECT_ERRORS)


def _read(path: Path | None) -> bytes | None:
    return None if path is None else path.read_bytes()


_AUTHENTICATE = "/etcdserverpb.Auth/Authenticate"

# What etcd answers a request whose token it does not know (a member restarted and lost
# its simple tokens, a JWT expired) or that predates an auth change. The last: a request
# whose token passed the check on a member that had not yet applied the auth change, and
# that met the change when applied; etcd 3.5.1 sends that error unconverted, as UNKNOWN.
# Each of these requests was refused before it changed anything: retrying is safe.
_STALE_TOKEN = (
    (grpc.StatusCode.UNAUTHENTICATED, "invalid auth token"),
    (grpc.StatusCode.INVALID_ARGUMENT, "revision of auth store is old"),
    (grpc.StatusCode.UNKNOWN, "auth: revision in header is old"),
)
# A token is valid on a member once that member applied the Authenticate that made it: a
# lagging member can refuse a fresh token too. A unary call renews and retries this many
# times (as etcd's own client retries while it refreshes) before its answer stands.
_STALE_RETRIES = 3


def _stale_token(code: grpc.StatusCode | None, details: str | None) -> bool:
    return any(code == c and text in (details or "") for c, text in _STALE_TOKEN)


class EtcdClient(aetcd.Client):
    """aetcd's client on one channel to every endpoint, TLS when configured, renewing
    its authentication token.

    aetcd 1.0.0 (the only release) dials one plaintext endpoint and authenticates once.
    This is its ``connect`` with three changes; everything else (stubs, the watcher) is
    aetcd's own:

    - the channel balances round robin over every endpoint (:func:`channel_target`), so
      a lost member costs the calls in flight on it, not the client (several names are
      resolved here, at connect; the first is then the authority, the name a TLS
      certificate is checked against);
    - ``secure_channel`` when ``credentials`` are given;
    - an interceptor puts the current token on every call, and when etcd refuses one as
      stale (a restarted member forgets simple tokens; JWTs expire) it authenticates
      again and retries a unary call (up to three times); a stream refused that way renews the token
      for the caller's next attempt (membership re-watches and re-refreshes anyway).
    """

    def __init__(
        self,
        *,
        endpoints: Sequence[str],
        credentials: grpc.ChannelCredentials | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._endpoints = tuple(endpoints)
        self._credentials = credentials
        self._token: str | None = None
        self._renewing: asyncio.Task[None] | None = None
        self.renewals = 0
        """Tokens obtained after the first (for tests)."""

    async def connect(self) -> None:
        try:
            await self._connect()
        except grpc.aio.AioRpcError as exc:
            aetcd.exceptions._handle_exception(exc)  # as aetcd's own connect does

    async def _target(self) -> tuple[str, list[tuple[str, Any]]]:
        target = balanced_target(self._endpoints)
        options = [
            *self._options.items(),
            ROUND_ROBIN,
            # A frozen member is noticed without waiting for a call to time out.
            ("grpc.keepalive_time_ms", 10_000),
            ("grpc.keepalive_timeout_ms", 5_000),
        ]
        if target is None:
            authority = self._endpoints[0].split("://", 1)[-1].rpartition(":")[0]
            loop = asyncio.get_running_loop()
            addresses: list[str] = []
            for endpoint in self._endpoints:
                host, _, port = endpoint.split("://", 1)[-1].rstrip("/").rpartition(":")
                for info in await loop.getaddrinfo(host, int(port), type=socket.SOCK_STREAM):
                    if info[0] == socket.AF_INET and f"{info[4][0]}:{port}" not in addresses:
                        addresses.append(f"{info[4][0]}:{port}")
            if not addresses:
                raise aetcd.exceptions.ConnectionFailedError(
                    f"no IPv4 address for the etcd endpoints {', '.join(self._endpoints)}"
                )
            target = "ipv4:" + ",".join(addresses)
            options.append(("grpc.default_authority", authority))
            if self._credentials is not None:
                options.append(("grpc.ssl_target_name_override", authority))
        return target, options

    async def _connect(self) -> None:
        if self._connected.is_set():
            return
        self._is_connecting = True
        try:
            target, options = await self._target()
            interceptors = [_TokenInterceptor(self)]
            if self._credentials is not None:
                self.channel = rpc.secure_channel(
                    target, self._credentials, options=options, interceptors=interceptors
                )
            else:
                self.channel = rpc.insecure_channel(
                    target, options=options, interceptors=interceptors
                )
            self.auth_stub = rpc.AuthStub(self.channel)
            if self._username is not None and self._password is not None:
                await self._authenticate()
            self.kvstub = rpc.KVStub(self.channel)
            self.clusterstub = rpc.ClusterStub(self.channel)
            self.leasestub = rpc.LeaseStub(self.channel)
            self.maintenancestub = rpc.MaintenanceStub(self.channel)
            self._watcher = watcher.Watcher(
                rpc.WatchStub(self.channel), timeout=self._timeout, metadata=self.metadata
            )
            self._connected.set()
        finally:
            self._is_connecting = False

    async def _authenticate(self) -> None:
        answer = await self.auth_stub.Authenticate(
            rpc.AuthenticateRequest(name=self._username, password=self._password),
            timeout=self._timeout,
        )
        renewed = self._token is not None
        self._token = answer.token
        self.metadata = (("token", answer.token),)
        if renewed:
            self.renewals += 1
            log.info("etcd token renewed", extra={"action": "etcd.reauthenticate"})

    async def renew_token(self, stale: str | None) -> None:
        """Authenticate again unless the token changed since ``stale`` was sent;
        concurrent callers share one renewal."""
        if self._token != stale or self._username is None:
            return
        if self._renewing is None or self._renewing.done():
            self._renewing = asyncio.create_task(self._authenticate())
        await asyncio.shield(self._renewing)

    def with_token(self, details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
        """``details`` carrying the current token in place of any other."""
        method = details.method.decode() if isinstance(details.method, bytes) else details.method
        if self._token is None or method == _AUTHENTICATE:
            return details
        metadata = [(k, v) for k, v in (details.metadata or ()) if k != "token"]
        metadata.append(("token", self._token))
        return grpc.aio.ClientCallDetails(
            details.method,
            details.timeout,
            grpc.aio.Metadata(*metadata),
            details.credentials,
            details.wait_for_ready,
        )


class _TokenInterceptor(
    grpc.aio.UnaryUnaryClientInterceptor,
    grpc.aio.UnaryStreamClientInterceptor,
    grpc.aio.StreamStreamClientInterceptor,
):
    """Current token on every call; a stale one renewed (see :class:`EtcdClient`)."""

    def __init__(self, client: EtcdClient) -> None:
        self._client = client

    async def intercept_unary_unary(
        self, continuation: Any, client_call_details: Any, request: Any
    ) -> Any:
        for _ in range(_STALE_RETRIES):
            sent = self._client._token
            call = await continuation(self._client.with_token(client_call_details), request)
            if sent is None or not _stale_token(await call.code(), await call.details()):
                return call
            await self._client.renew_token(sent)
        return await continuation(self._client.with_token(client_call_details), request)

    async def intercept_unary_stream(
        self, continuation: Any, client_call_details: Any, request: Any
    ) -> Any:
        return self._watch(
            self._client._token,
            await continuation(self._client.with_token(client_call_details), request),
        )

    async def intercept_stream_stream(
        self, continuation: Any, client_call_details: Any, request_iterator: Any
    ) -> Any:
        return self._watch(
            self._client._token,
            await continuation(self._client.with_token(client_call_details), request_iterator),
        )

    def _watch(self, sent: str | None, call: Any) -> Any:
        if sent is None:
            return call

        def done(finished: Any) -> None:
            async def check() -> None:
                if _stale_token(await finished.code(), await finished.details()):
                    with contextlib.suppress(*CONNECT_ERRORS, grpc.aio.AioRpcError):
                        await self._client.renew_token(sent)

            task = asyncio.ensure_future(check())
            _background.add(task)
            task.add_done_callback(_background.discard)

        call.add_done_callback(done)
        return call


_background: set[asyncio.Future[None]] = set()  # renewals started by finished streams


async def connect_etcd(config: EtcdConfig, *, timeout_s: float = 5.0) -> EtcdClient:
    """Connect to the endpoints (all of them: :class:`EtcdClient`) and check one answers."""
    kwargs: dict[str, Any] = {"timeout": timeout_s}
    if config.etcd_user:
        kwargs.update(username=config.etcd_user, password=config.etcd_password)
    credentials = None
    if config.etcd_tls:
        credentials = grpc.ssl_channel_credentials(
            root_certificates=_read(config.etcd_tls_ca_file),
            private_key=_read(config.etcd_tls_key_file),
            certificate_chain=_read(config.etcd_tls_cert_file),
        )
    client = EtcdClient(endpoints=config.etcd_endpoints, credentials=credentials, **kwargs)
    try:
        # Authentication happens in connect(): close the channel if it fails too.
        await client.connect()
        await client.status()
    except BaseException:
        await client.close()
        raise
    return client
