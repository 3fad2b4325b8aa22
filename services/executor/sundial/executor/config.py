"""Configuration of the executor service (``SUNDIAL_*`` environment variables)."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

from sundial.core.config import ConfigError, LogConfig, NatsConfig, ServerConfig


@dataclass(frozen=True, kw_only=True)
class ExecutorConfig(NatsConfig, ServerConfig, LogConfig):
    """Everything the executor service reads at start."""

    ledger_address: str
    """host:port of the scheduler service's RunLedger (a load-balanced address)."""

    node_id: str = ""
    """This executor's id, reported with every lease; defaults to host name + pid."""

    max_in_flight: int = 64
    """Most runs this executor calls targets for at once."""

    def __post_init__(self) -> None:
        NatsConfig.__post_init__(self)
        ServerConfig.__post_init__(self)
        LogConfig.__post_init__(self)
        host, sep, port = self.ledger_address.rpartition(":")
        if not (sep and host and port.isdigit()):
            raise ConfigError("ledger_address", f"expected host:port, got {self.ledger_address!r}")
        if self.max_in_flight < 1:
            raise ConfigError("max_in_flight", "must be >= 1")
        if not self.node_id:
            object.__setattr__(self, "node_id", f"{socket.gethostname()}-{os.getpid()}")
