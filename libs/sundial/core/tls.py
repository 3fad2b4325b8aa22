"""TLS for Sundial's gRPC servers and clients, from PEM files.

Server side: :class:`ServerCertificates` holds a server's certificate chain, its key and
optionally the CA its clients' certificates must chain to (mTLS). Its
:meth:`~ServerCertificates.credentials` are grpc's *dynamic* SSL credentials: before
every TLS handshake grpc asks for the current configuration, and the files are read
again when one of them changed (its inode, size or mtime). Operators rotate a
certificate by replacing the files, as a Kubernetes Secret update or cert-manager does;
no restart. A replacement that does not load (unreadable, not PEM, a key that does not
match the certificate, no CA in the CA file) is refused whole: the server keeps serving
the last good configuration and logs one error per change, naming the files and the
problem, never their contents. Replace the certificate and key together (write both,
then rename, or swap a directory link as Kubernetes does); a handshake that falls
between two separate writes sees a mismatched pair, logs that error and keeps the old
pair until the second file lands.

Client side: :class:`ClientTls` says how to dial a TLS server (the CA to verify it
with, or the system roots; a client certificate for mTLS; a name to verify instead of
the address's host), and :func:`dial` / :func:`dial_sync` open a ``grpc.aio`` /
synchronous channel with it, or a plaintext one when it is None. Client files are read
once, when the channel is made.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import ssl
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from sundial.core.config import MAX_MESSAGE_BYTES
from sundial.core.tracing import client_interceptors

__all__ = [
    "ROUND_ROBIN",
    "ClientTls",
    "ServerCertificates",
    "TlsError",
    "balanced_target",
    "dial",
    "dial_sync",
    "message_limits",
]

log = logging.getLogger(__name__)

ROUND_ROBIN = (
    "grpc.service_config",
    json.dumps({"loadBalancingConfig": [{"round_robin": {}}]}),
)
"""Channel option: balance calls over every address of the target (each call, and each
(re)opened stream, goes to the next connected one; a lost address is skipped)."""


def balanced_target(addresses: Sequence[str]) -> str | None:
    """The gRPC target reaching every one of ``addresses`` (``host:port``), or None.

    One address is dialled as it is (gRPC's resolver yields every address of a name, so
    a headless Service reaches every replica); several IP addresses become one ``ipv4:``
    or ``ipv6:`` target. None for several names, or IPv4 and IPv6 mixed: gRPC has no
    target for those (the caller resolves the names, or refuses them).
    """
    bare = [a.split("://", 1)[-1].rstrip("/") for a in addresses]
    if len(bare) == 1:
        return bare[0]
    versions = set()
    for address in bare:
        try:
            versions.add(ipaddress.ip_address(address.rpartition(":")[0].strip("[]")).version)
        except ValueError:
            return None
    if versions == {4}:
        return "ipv4:" + ",".join(bare)
    if versions == {6}:
        return "ipv6:" + ",".join(bare)
    return None


ChannelOptions = Sequence[tuple[str, Any]]
"""gRPC channel arguments, ``(name, value)`` pairs."""

# What identifies one version of a file: a replacement by rename changes the inode, an
# in-place rewrite the size or mtime. None: the file is missing.
_Stamp = tuple[tuple[int, int, int, int] | None, ...]


class TlsError(ValueError):
    """A TLS file is missing, unreadable or not what its role needs.

    The message names the file and the problem, never the file's content.
    """


def _stat(path: Path) -> tuple[int, int, int, int] | None:
    try:
        st = os.stat(path)  # follows links: a Kubernetes mount swaps the link's target
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _read(path: Path, role: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise TlsError(f"cannot read the {role} {path}: {exc.strerror or exc}") from None


def _no_password() -> bytes:
    # Without a password callback OpenSSL would prompt on the terminal for an encrypted
    # key; gRPC cannot use one anyway, so an empty password makes it fail to load.
    return b""


def _check_pair(cert_file: Path, key_file: Path) -> None:
    """Raise TlsError unless ``cert_file`` holds a certificate chain ``key_file`` matches."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(cert_file, key_file, password=_no_password)
    except ssl.SSLError as exc:
        # The reason is OpenSSL's ("KEY_VALUES_MISMATCH", "PEM lib"), never file content.
        raise TlsError(
            f"the certificate {cert_file} and key {key_file} do not load as a pair: "
            f"{exc.reason or exc}"
        ) from None
    except OSError as exc:
        raise TlsError(f"cannot read {cert_file} or {key_file}: {exc.strerror or exc}") from None


def _check_ca(data: bytes, ca_file: Path) -> None:
    """Raise TlsError unless ``data`` (read from ``ca_file``) holds PEM CA certificates."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        context.load_verify_locations(cadata=data.decode("ascii"))
    except (ssl.SSLError, UnicodeDecodeError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or "not PEM certificates"
        raise TlsError(f"the CA file {ca_file} holds no usable certificate: {reason}") from None


class ServerCertificates:
    """A gRPC server's TLS files, re-read when they change.

    Args:
        cert_file: The server's certificate chain (PEM, leaf first).
        key_file: Its private key (PEM, unencrypted).
        client_ca_file: CA certificates (PEM) that clients' certificates must chain to;
            when set, clients must present one (mTLS). None: clients are not asked.

    Raises:
        TlsError: The files do not load now (the server must not start with them).
    """

    def __init__(self, cert_file: Path, key_file: Path, client_ca_file: Path | None = None) -> None:
        self.cert_file = cert_file
        self.key_file = key_file
        self.client_ca_file = client_ca_file
        self._lock = threading.Lock()
        self._stamp = self._current_stamp()
        self._initial = self._load()
        self.reloads = 0
        """How many replacements were taken into use (refused ones not counted)."""

    @property
    def mutual(self) -> bool:
        """True when clients must present a certificate (a client CA is set)."""
        return self.client_ca_file is not None

    def credentials(self) -> grpc.ServerCredentials:
        """Credentials for ``add_secure_port`` that pick up replaced files per handshake.

        Call it once per port: each call is a separate set of credentials.
        """
        # The stubs leave out the None a fetcher returns for "no change" (grpc's own docs).
        return grpc.dynamic_ssl_server_credentials(
            self._initial,
            self._fetch,  # type: ignore[arg-type]
            require_client_authentication=self.mutual,
        )

    def _files(self) -> tuple[Path, ...]:
        return (self.cert_file, self.key_file, *filter(None, (self.client_ca_file,)))

    def _current_stamp(self) -> _Stamp:
        return tuple(_stat(path) for path in self._files())

    def _load(self) -> grpc.ServerCertificateConfiguration:
        cert = _read(self.cert_file, "certificate")
        key = _read(self.key_file, "key")
        # grpc checks nothing until a handshake uses the files, and then fails every
        # handshake; check here so a bad replacement is refused while the old one serves.
        # The check reads the files by name: compare afterwards that it saw these bytes.
        _check_pair(self.cert_file, self.key_file)
        if _read(self.cert_file, "certificate") != cert or _read(self.key_file, "key") != key:
            raise TlsError(f"{self.cert_file} or {self.key_file} changed while being read")
        client_ca = None
        if self.client_ca_file is not None:
            client_ca = _read(self.client_ca_file, "client CA file")
            _check_ca(client_ca, self.client_ca_file)
        return grpc.ssl_server_certificate_configuration([(key, cert)], client_ca)

    def _fetch(self) -> grpc.ServerCertificateConfiguration | None:
        # Called by grpc on its own threads before every handshake, possibly several at
        # once; None keeps the configuration in use. It must never raise: an exception
        # here fails the handshake.
        try:
            with self._lock:
                stamp = self._current_stamp()
                if stamp == self._stamp:
                    return None
                # Remember the stamp whether or not it loads: a broken file is reported
                # once, and tried again only when it changes again.
                self._stamp = stamp
                config = self._load()
                self.reloads += 1
        except TlsError as exc:
            log.error(
                "TLS files changed but do not load; still serving the previous ones: %s",
                exc,
                extra={"action": "tls_reload", "cert_file": str(self.cert_file)},
            )
            return None
        except Exception:
            log.exception(
                "TLS reload failed; still serving the previous files",
                extra={"action": "tls_reload", "cert_file": str(self.cert_file)},
            )
            return None
        log.info(
            "TLS files reloaded",
            extra={"action": "tls_reload", "cert_file": str(self.cert_file)},
        )
        return config


@dataclass(frozen=True, kw_only=True)
class ClientTls:
    """How a client dials a TLS server.

    Attributes:
        ca_file: CA certificates (PEM) the server's certificate must chain to; None: the
            system's roots (or grpc's bundled ones).
        cert_file: This client's certificate chain (PEM), presented for mTLS.
        key_file: Its private key (PEM, unencrypted); set with ``cert_file`` or not at all.
        server_name: The name to verify the server's certificate against instead of the
            dialled host (``grpc.ssl_target_name_override``); empty: the host.
    """

    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    server_name: str = ""

    def __post_init__(self) -> None:
        if (self.cert_file is None) != (self.key_file is None):
            raise TlsError("a client certificate needs its key and a key its certificate")

    def credentials(self) -> grpc.ChannelCredentials:
        """Channel credentials from the files, read now.

        Raises:
            TlsError: A file cannot be read.
        """
        root = _read(self.ca_file, "CA file") if self.ca_file is not None else None
        cert = _read(self.cert_file, "certificate") if self.cert_file is not None else None
        key = _read(self.key_file, "key") if self.key_file is not None else None
        return grpc.ssl_channel_credentials(
            root_certificates=root, private_key=key, certificate_chain=cert
        )

    def options(self) -> list[tuple[str, Any]]:
        """Channel arguments the TLS settings need (the server-name override)."""
        if not self.server_name:
            return []
        return [("grpc.ssl_target_name_override", self.server_name)]


def message_limits(max_bytes: int = MAX_MESSAGE_BYTES) -> list[tuple[str, int]]:
    """Channel (or server) options that send and receive messages up to ``max_bytes``,
    set explicitly on every channel rather than left to gRPC's asymmetric defaults
    (4 MiB received, unbounded sent)."""
    return [
        ("grpc.max_receive_message_length", max_bytes),
        ("grpc.max_send_message_length", max_bytes),
    ]


def _with_limits(options: ChannelOptions) -> list[tuple[str, Any]]:
    """``options`` plus the message limits where they do not set their own."""
    named = {name for name, _ in options}
    return [*options, *(o for o in message_limits() if o[0] not in named)]


def dial(address: str, tls: ClientTls | None, options: ChannelOptions = ()) -> grpc.aio.Channel:
    """A ``grpc.aio`` channel to ``address``: TLS with ``tls``, plaintext when it is None.

    The channel connects lazily, so the server may start later. While tracing is on its
    calls are traced by the gRPC instrumentation (:mod:`sundial.core.tracing`). Messages
    are limited to :data:`~sundial.core.config.MAX_MESSAGE_BYTES` each way unless
    ``options`` say otherwise.

    Raises:
        TlsError: A TLS file cannot be read.
    """
    options = _with_limits(options)
    interceptors = client_interceptors(address)
    if tls is None:
        return grpc.aio.insecure_channel(address, options=list(options), interceptors=interceptors)
    return grpc.aio.secure_channel(
        address, tls.credentials(), [*options, *tls.options()], interceptors=interceptors
    )


def dial_sync(address: str, tls: ClientTls | None, options: ChannelOptions = ()) -> grpc.Channel:
    """A synchronous channel (for the CLI and probes); otherwise as :func:`dial`."""
    options = _with_limits(options)
    if tls is None:
        return grpc.insecure_channel(address, options=list(options))
    return grpc.secure_channel(address, tls.credentials(), [*options, *tls.options()])
