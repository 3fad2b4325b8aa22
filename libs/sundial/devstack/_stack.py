"""The local stack: PostgreSQL, NATS JetStream and etcd in one data folder.

With ``cluster_size=3`` NATS is a three-node JetStream cluster (the streams at three
replicas) and etcd a three-member cluster: what a production deployment runs, so that
losing any one node can be tried here.

NATS and etcd run with authentication (the servers' modules say how); :meth:`Stack.env`
gives each service the credentials of its own user, and :meth:`Stack.nats_config` /
:meth:`Stack.etcd_config` give tests and tools theirs. PostgreSQL accepts its superuser
from loopback only (trust), as a development database does.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from sundial.core.config import EtcdConfig, NatsConfig
from sundial.devstack._etcd import EtcdServer, etcd_cluster
from sundial.devstack._nats import PERMISSIONS, NatsServer, inbox_prefix, nats_cluster
from sundial.devstack._postgres import PostgresServer
from sundial.devstack._process import StackError

# Environment variables that point at existing servers instead of starting local ones.
DATABASE_URL_VAR = "SUNDIAL_DATABASE_URL"
NATS_URL_VAR = "SUNDIAL_NATS_URL"
ETCD_ENDPOINTS_VAR = "SUNDIAL_ETCD_ENDPOINTS"

# Which NATS user each service connects as, and which services use etcd.
_NATS_ROLE = {"scheduler": "scheduler", "executor": "executor"}
_ETCD_SERVICES = frozenset({"api", "scheduler"})


def runtime_dir() -> Path:
    """A world-traversable folder for stack data (an unprivileged postgres reads it)."""
    root = Path(tempfile.gettempdir()) / "sundial-runtime"
    root.mkdir(mode=0o755, exist_ok=True)
    return root


@dataclass
class Stack:
    """Connection details of a running stack, and the servers it started itself.

    Use as a context manager, or call :meth:`start` and :meth:`stop`. Servers named by
    ``SUNDIAL_DATABASE_URL``, ``SUNDIAL_NATS_URL`` or ``SUNDIAL_ETCD_ENDPOINTS`` (or a
    ``database_url`` given here) are used as they are and never stopped.
    """

    data_dir: Path | None = None
    keep_data: bool = False
    durable: bool = True
    """Run the PostgreSQL it starts durably (fsync and synchronous commit on); tests and
    benchmarks pass False for speed (see :class:`PostgresServer`)."""
    postgres_settings: tuple[str, ...] = ()
    """More ``name=value`` settings for the PostgreSQL it starts (benchmarks load
    ``pg_stat_statements`` with them)."""
    cluster_size: int = 1
    """NATS nodes and etcd members to start: 1, or 3 for clusters (streams at replicas 3)."""
    database_url: str = ""
    nats_url: str = ""
    """Comma-separated URLs of every NATS node (what ``SUNDIAL_NATS_URL`` takes)."""
    etcd_endpoints: tuple[str, ...] = ()
    startup_s: float = 0.0
    nats_users: dict[str, tuple[str, str]] = field(default_factory=dict, repr=False)
    """(user, password) by role (scheduler, executor, admin) of the NATS it started."""
    etcd_user: tuple[str, str] | None = field(default=None, repr=False)
    """(user, password) the services use on the etcd it started."""
    postgres: PostgresServer | None = None
    """The PostgreSQL it started (None when ``SUNDIAL_DATABASE_URL`` named one)."""
    nats_nodes: list[NatsServer] = field(default_factory=list)
    """The NATS servers it started, one per node."""
    etcd_members: list[EtcdServer] = field(default_factory=list)
    """The etcd members it started."""
    _started: list[PostgresServer | NatsServer | EtcdServer] = field(default_factory=list)
    _own_dir: bool = False

    @property
    def stream_replicas(self) -> int:
        """Replicas the streams get on this stack's NATS (``SUNDIAL_STREAM_REPLICAS``)."""
        return len(self.nats_nodes) if len(self.nats_nodes) > 1 else 1

    def start(self) -> Stack:
        if self.cluster_size not in (1, 3):
            raise StackError(f"cluster_size must be 1 or 3, not {self.cluster_size}")
        began = time.monotonic()
        if self.data_dir is None:
            self.data_dir = Path(tempfile.mkdtemp(prefix="stack-", dir=runtime_dir()))
            self._own_dir = True
        self.data_dir.mkdir(parents=True, exist_ok=True)
        # mkdtemp makes 0700; PostgreSQL runs as another user when we are root.
        self.data_dir.chmod(0o755)
        try:
            self._start_servers(self.data_dir)
        except BaseException:
            self.stop()
            raise
        self.startup_s = time.monotonic() - began
        return self

    def _start_servers(self, data_dir: Path) -> None:
        self.database_url = self.database_url or os.environ.get(DATABASE_URL_VAR, "")
        if not self.database_url:
            self.postgres = PostgresServer(
                data_dir, durable=self.durable, settings=self.postgres_settings
            )
            self._started.append(self.postgres)
            self.postgres.start()
            self.database_url = self.postgres.url
        self.nats_url = os.environ.get(NATS_URL_VAR, "")
        if not self.nats_url:
            if self.cluster_size > 1:
                self.nats_nodes = nats_cluster(data_dir, self.cluster_size)
            else:
                self.nats_nodes = [NatsServer(data_dir)]
                self.nats_nodes[0].start()
            self._started.extend(self.nats_nodes)
            self.nats_url = ",".join(node.url for node in self.nats_nodes)
            self.nats_users = dict(self.nats_nodes[0].users)
        endpoints = os.environ.get(ETCD_ENDPOINTS_VAR, "")
        if endpoints:
            self.etcd_endpoints = tuple(e.strip() for e in endpoints.split(",") if e.strip())
        else:
            if self.cluster_size > 1:
                self.etcd_members = etcd_cluster(data_dir, self.cluster_size)
            else:
                self.etcd_members = [EtcdServer(data_dir)]
                self.etcd_members[0].start()
            self._started.extend(self.etcd_members)
            self.etcd_endpoints = tuple(member.endpoint for member in self.etcd_members)
            self.etcd_user = self.etcd_members[0].user

    def env(self, service: str = "") -> dict[str, str]:
        """The ``SUNDIAL_*`` variables that point ``service`` (api, scheduler, executor)
        at this stack, with the NATS and etcd credentials of its own user."""
        env = {
            DATABASE_URL_VAR: self.database_url,
            NATS_URL_VAR: self.nats_url,
            ETCD_ENDPOINTS_VAR: ",".join(self.etcd_endpoints),
        }
        role = _NATS_ROLE.get(service)
        if role is not None and role in self.nats_users:
            user, password = self.nats_users[role]
            env.update(
                SUNDIAL_NATS_USER=user,
                SUNDIAL_NATS_PASSWORD=password,
                SUNDIAL_NATS_INBOX_PREFIX=inbox_prefix(user),
            )
        if service in _ETCD_SERVICES and self.etcd_user is not None:
            user, password = self.etcd_user
            env.update(SUNDIAL_ETCD_USER=user, SUNDIAL_ETCD_PASSWORD=password)
        if service == "scheduler":
            env["SUNDIAL_STREAM_REPLICAS"] = str(self.stream_replicas)
        return env

    def nats_config(self, role: str = "admin") -> NatsConfig:
        """How to reach this stack's NATS as ``role`` (admin: anything; scheduler,
        executor: what those services may do)."""
        if role in self.nats_users:
            user, password = self.nats_users[role]
            return NatsConfig(
                nats_url=self.nats_url,
                nats_user=user,
                nats_password=password,
                nats_inbox_prefix=inbox_prefix(user) if role in PERMISSIONS else "_INBOX",
            )
        return NatsConfig.from_env(environ={**os.environ, NATS_URL_VAR: self.nats_url})

    def etcd_config(self) -> EtcdConfig:
        """How the services reach this stack's etcd (read-write on ``/sundial/``)."""
        if self.etcd_user is not None:
            user, password = self.etcd_user
            return EtcdConfig(
                etcd_endpoints=self.etcd_endpoints, etcd_user=user, etcd_password=password
            )
        environ = {**os.environ, ETCD_ENDPOINTS_VAR: ",".join(self.etcd_endpoints)}
        return EtcdConfig.from_env(environ=environ)

    def stop(self) -> None:
        """Stop what this stack started, in reverse order, and remove its folder."""
        errors: list[str] = []
        while self._started:
            server = self._started.pop()
            try:
                server.stop()
            except (StackError, OSError) as exc:
                errors.append(str(exc))
        if self._own_dir and not self.keep_data and self.data_dir is not None:
            with contextlib.suppress(OSError):
                shutil.rmtree(self.data_dir)
        if errors:
            raise StackError("; ".join(errors))

    def __enter__(self) -> Stack:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
