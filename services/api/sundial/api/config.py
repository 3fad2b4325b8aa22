"""Configuration of the API service (``SUNDIAL_*`` environment variables)."""

from __future__ import annotations

from dataclasses import dataclass, field

from sundial.core.config import ConfigError, DatabaseConfig, LogConfig, ServerConfig


@dataclass(frozen=True, kw_only=True)
class ApiConfig(DatabaseConfig, ServerConfig, LogConfig):
    """Everything the API service reads at start."""

    admin_token: str = field(default="", repr=False)
    """Bootstrap admin bearer token; empty disables it (use issued admin tokens then)."""

    migrate_on_start: bool = True
    """Apply pending schema migrations at start (safe from many replicas at once)."""

    def __post_init__(self) -> None:
        DatabaseConfig.__post_init__(self)
        ServerConfig.__post_init__(self)
        LogConfig.__post_init__(self)
        if self.admin_token and len(self.admin_token) < 16:
            raise ConfigError("admin_token", "must be at least 16 characters")
