"""etcd: the client used for partition ownership (membership lives in the scheduler).

:func:`connect_etcd` authenticates with ``etcd_user``/``etcd_password`` when set (etcd
with ``auth enable``) and dials TLS when a CA or client certificate is configured or the
endpoint is ``https://`` (:class:`~sundial.core.config.EtcdConfig`).
"""

from __future__ import annotations

from pathlib import Path

import aetcd
import grpc
from aetcd import rpc, watcher

from sundial.core.config import EtcdConfig
from sundial.core.dependency import Dependency

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


class _TlsClient(aetcd.Client):
    """aetcd's client over a TLS channel.

    aetcd 1.0.0 (the only release) dials plaintext only. This is its ``connect`` with
    ``secure_channel`` in place of ``insecure_channel``; everything else (stubs,
    authentication, the watcher) is aetcd's own.
    """

    def __init__(self, *, credentials: grpc.ChannelCredentials, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self._credentials = credentials

    async def connect(self) -> None:
        try:
            await self._connect()
        except grpc.aio.AioRpcError as exc:
            aetcd.exceptions._handle_exception(exc)  # as aetcd's own connect does

    async def _connect(self) -> None:
        if self._connected.is_set():
            return
        self._is_connecting = True
        try:
            target = f"{self._host}:{self._port}"
            self.channel = rpc.secure_channel(
                target, self._credentials, options=self._options.items()
            )
            if self._username is not None and self._password is not None:
                self.auth_stub = rpc.AuthStub(self.channel)
                answer = await self.auth_stub.Authenticate(
                    rpc.AuthenticateRequest(name=self._username, password=self._password),
                    timeout=self._timeout,
                )
                self.metadata = (("token", answer.token),)
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


async def connect_etcd(config: EtcdConfig, *, timeout_s: float = 5.0) -> aetcd.Client:
    """Connect to the first endpoint and check it answers.

    aetcd talks to one endpoint; in production point ``SUNDIAL_ETCD_ENDPOINTS`` at a
    load-balanced address (or the first reachable member).
    """
    endpoint = config.etcd_endpoints[0].split("://", 1)[-1].rstrip("/")
    host, _, port = endpoint.rpartition(":")
    kwargs: dict[str, object] = {"host": host, "port": int(port), "timeout": timeout_s}
    if config.etcd_user:
        kwargs.update(username=config.etcd_user, password=config.etcd_password)
    client: aetcd.Client
    if config.etcd_tls:
        credentials = grpc.ssl_channel_credentials(
            root_certificates=_read(config.etcd_tls_ca_file),
            private_key=_read(config.etcd_tls_key_file),
            certificate_chain=_read(config.etcd_tls_cert_file),
        )
        client = _TlsClient(credentials=credentials, **kwargs)
    else:
        client = aetcd.Client(**kwargs)
    try:
        # Authentication happens in connect(): close the channel if it fails too.
        await client.connect()
        await client.status()
    except BaseException:
        await client.close()
        raise
    return client
