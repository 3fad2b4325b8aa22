"""Test certificates made on the fly: a CA, server and client certificates it signs, and
as many unrelated CAs as a test wants (``cryptography``; EC P-256 keys, so making them
is fast).

Every file is written with :func:`write_atomically` (write a sibling, then rename), the
way a Kubernetes Secret update or ``cert-manager`` replaces a mounted file, so a reader
never sees half a file.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from sundial.core.tls import ClientTls

_VALIDITY = datetime.timedelta(days=1)
# Loopback names a test server is dialled by: by IP, or by name with an override.
LOOPBACK_NAMES = ("127.0.0.1", "localhost")


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` by ``data`` in one rename (a new inode, as Kubernetes does)."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_bytes(data)
    os.replace(partial, path)


@dataclass(frozen=True)
class Issued:
    """A certificate and its key, in PEM, with the files they were written to."""

    cert_pem: bytes
    key_pem: bytes
    cert_file: Path
    key_file: Path

    @property
    def serial(self) -> int:
        """The certificate's serial number (tells two certificates of one name apart)."""
        return x509.load_pem_x509_certificate(self.cert_pem).serial_number


class Authority:
    """A self-signed CA that issues leaf certificates into ``directory``."""

    def __init__(self, directory: Path, name: str = "sundial-test-ca") -> None:
        self.directory = directory
        self.name = name
        directory.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self._key, hashes.SHA256())
        )
        self.cert_pem = self.cert.public_bytes(serialization.Encoding.PEM)
        self.cert_file = directory / f"{name}.crt"
        write_atomically(self.cert_file, self.cert_pem)

    def issue(
        self,
        name: str,
        *,
        server: bool = True,
        client: bool = True,
        hosts: tuple[str, ...] = LOOPBACK_NAMES,
        cert_file: Path | None = None,
        key_file: Path | None = None,
    ) -> Issued:
        """Sign a leaf certificate for ``hosts`` (SANs) and write it and its key.

        Args:
            name: The common name, also the default file stem.
            server: Usable as a TLS server certificate (EKU serverAuth).
            client: Usable as a TLS client certificate (EKU clientAuth).
            hosts: DNS names and IP addresses the certificate is valid for.
            cert_file: Where to write the certificate (replacing a file that is there).
            key_file: Where to write the key.
        """
        key = ec.generate_private_key(ec.SECP256R1())
        sans: list[x509.GeneralName] = []
        for host in hosts:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                sans.append(x509.DNSName(host))
        usages = [ExtendedKeyUsageOID.SERVER_AUTH] if server else []
        usages += [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        issued = Issued(
            cert_pem=cert.public_bytes(serialization.Encoding.PEM),
            key_pem=key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            ),
            cert_file=cert_file or self.directory / f"{name}.crt",
            key_file=key_file or self.directory / f"{name}.key",
        )
        write_atomically(issued.cert_file, issued.cert_pem)
        write_atomically(issued.key_file, issued.key_pem)
        return issued

    def client_tls(self, client: Issued | None = None) -> ClientTls:
        """Dial a server this CA signed, presenting ``client`` (mTLS) when given."""
        return ClientTls(
            ca_file=self.cert_file,
            cert_file=client.cert_file if client else None,
            key_file=client.key_file if client else None,
        )


def peer_serial(
    address: str, ca_file: Path, *, client: Issued | None = None, server_name: str = "localhost"
) -> int:
    """The serial number of the certificate the TLS server at ``address`` presents now.

    A new connection, so a new handshake, verified against ``ca_file``; ``client`` is
    presented when given (an mTLS server may ask for it).
    """
    host, _, port = address.rpartition(":")
    context = ssl.create_default_context(cafile=str(ca_file))
    context.set_alpn_protocols(["h2"])  # gRPC servers refuse a TLS client without h2
    if client is not None:
        context.load_cert_chain(client.cert_file, client.key_file)
    with (
        socket.create_connection((host, int(port)), timeout=5) as sock,
        context.wrap_socket(sock, server_hostname=server_name) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number
