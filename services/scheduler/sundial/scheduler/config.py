"""Configuration of the scheduler service (``SUNDIAL_*`` environment variables)."""

from __future__ import annotations

import secrets
import socket
from dataclasses import dataclass

from sundial.core.config import (
    ConfigError,
    DatabaseConfig,
    EtcdConfig,
    LogConfig,
    NatsConfig,
    ServerConfig,
)


@dataclass(frozen=True, kw_only=True)
class SchedulerConfig(DatabaseConfig, NatsConfig, EtcdConfig, ServerConfig, LogConfig):
    """Everything the scheduler service reads at start."""

    node_id: str = ""
    """This member's name in etcd; defaults to the host name plus a random suffix."""

    cluster: str = "default"
    """Cluster name: the etcd key prefix is ``/sundial/<cluster>/``."""

    lease_ttl_s: int = 10
    """etcd lease TTL: a crashed scheduler's partitions move after at most this long."""

    migrate_on_start: bool = True
    """Apply pending schema migrations at start (safe from many replicas at once)."""

    def __post_init__(self) -> None:
        DatabaseConfig.__post_init__(self)
        NatsConfig.__post_init__(self)
        EtcdConfig.__post_init__(self)
        ServerConfig.__post_init__(self)
        LogConfig.__post_init__(self)
        if self.lease_ttl_s < 2:
            raise ConfigError("lease_ttl_s", "must be at least 2 seconds")
        if not self.cluster.replace("-", "").replace("_", "").isalnum():
            raise ConfigError("cluster", "use letters, digits, '-' and '_' only")
        if not self.node_id:
            # Frozen: fill the default once, before anyone sees the object.
            object.__setattr__(self, "node_id", f"{socket.gethostname()}-{secrets.token_hex(3)}")
