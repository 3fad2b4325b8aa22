"""Configuration of the executor service (``SUNDIAL_*`` environment variables)."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from pathlib import Path

from sundial.core.config import ConfigError, LogConfig, NatsConfig, ResolverConfig, ServerConfig
from sundial.core.telemetry import TelemetryConfig
from sundial.core.tls import ClientTls, balanced_target


@dataclass(frozen=True, kw_only=True)
class ExecutorConfig(NatsConfig, ServerConfig, ResolverConfig, LogConfig, TelemetryConfig):
    """Everything the executor service reads at start."""

    ledger_address: str
    """Where the schedulers' RunLedgerService is: ``host:port`` (a name resolving to every
    scheduler, e.g. a headless Service, is best: calls and heartbeat streams then spread
    over all of them and move off a frozen one) or several ``ip:port`` comma-separated."""

    ledger_token: str = field(repr=False)
    """The executor token presented on every RunLedgerService call (TOKEN_ROLE_EXECUTOR, issued
    with ``sundial admin tokens create --role executor``). Keep it in a secret store."""

    node_id: str = ""
    """This executor's name; defaults to host name + pid. A random suffix is added per
    process start, so a restarted executor never passes for its predecessor."""

    max_in_flight: int = 64
    """Most runs this executor calls targets for at once (each worker process's own)."""

    slots_kept_free: int = 8
    """Call slots no one tenant takes, kept for the next tenant's runs (which otherwise
    wait for a busy tenant's calls to end); at most an eighth of SUNDIAL_MAX_IN_FLIGHT
    (none below 8 slots). More are kept while another tenant needed more at once in the
    last 10 s: that many, up to half; a tenant beside others holding or waiting for
    slots may always hold its weighted share. 0: a tenant may take every slot."""

    pace_lag_ms: float = 1.0
    """The event loop's mean lateness (ms, per 0.1 s) above which the busiest tenants,
    each starting more than twice the calls of every less busy tenant with runs, are
    slowed (at least 100 calls a second), so that a herd leaves the executor to the
    others' runs (docs/design.md section 7, "Flow control"); a tenant alone is never
    slowed. 0: never."""

    executor_processes: int = 1
    """Worker processes of this executor, each a whole executor on its own core, started
    and restarted by a supervisor that serves health at SUNDIAL_LISTEN; 0: one per core
    (also ``sundial-executor --processes N``)."""

    consumer_name: str = "sundial-executors"
    """The durable JetStream pull consumer on SUNDIAL_RUNS shared by all executors."""

    fetch_batch: int = 16
    """Most RunDispatch messages pulled per fetch (each carries up to 500 runs)."""

    lease_pipeline: int = 16
    """Fetched batches waiting for call slots or being leased at once."""

    prefetch_runs: int = 256
    """Runs fetched ahead of free call slots at most (not leased: another executor takes
    what waited here 1 s). A quiet tenant's run behind busy tenants' in the stream is
    reached only this far ahead: keep it above the schedulers' SUNDIAL_TENANT_WINDOW
    (default twice it; docs/design.md section 7, "Flow control")."""

    ack_wait_s: float = 30.0
    """Seconds JetStream waits for an ack before redelivering a message to any executor."""

    run_lease_s: float = 30.0
    """Lease on a run asked for in LeaseRuns and on every heartbeat (10 s to 5 min); a
    crashed executor's runs are retried after at most this long."""

    heartbeat_interval_s: float = 10.0
    """Seconds between heartbeats, until the ledger announces its own interval."""

    complete_flush_ms: float = 5.0
    """Milliseconds an outcome may wait for others to share its CompleteRuns call."""

    complete_batch_size: int = 500
    """Outcomes per CompleteRuns call (flushed at once when a batch fills)."""

    ledger_timeout_s: float = 10.0
    """Deadline of each LeaseRuns and CompleteRuns call."""

    ledger_tls: bool = False
    """Dial the ledger over TLS; on by itself when a ledger CA file or client certificate
    is set."""

    ledger_tls_ca_file: Path | None = None
    """PEM CA certificates the ledger's certificate must chain to; unset with TLS on: the
    system's roots."""

    ledger_tls_cert_file: Path | None = None
    """PEM client certificate presented to a ledger that requires one (mTLS). Read at
    start: a renewed certificate takes effect on the next (rolling) restart."""

    ledger_tls_key_file: Path | None = None
    """PEM private key (unencrypted) of the ledger client certificate; set with it."""

    ledger_tls_server_name: str = ""
    """Name the ledger's certificate is verified against instead of the host of
    SUNDIAL_LEDGER_ADDRESS (e.g. dialling an IP); empty: that host."""

    capacity_retry_s: float = 5.0
    """Redelivery delay for a capacity-rejected message whose rejection has no retry_after."""

    breaker_failures: int = 5
    """Consecutive retryable failures of one tenant's calls to one target origin that open
    that tenant's circuit breaker for it (other tenants' calls there are not held back)."""

    breaker_open_s: float = 30.0
    """Seconds an open breaker holds calls back before letting one probe through."""

    http_max_connections: int = 256
    """Size of the pooled HTTP client's connection pool (all targets)."""

    allow_loopback_targets: bool = False
    """Take loopback (127.0.0.0/8, ::1) off the deny list, and let the default egress
    policy (tenants without their own) reach it; local stacks only. Set it as on the API."""

    allow_private_targets: bool = False
    """The default egress policy (tenants without their own) reaches every private,
    link-local and shared address (never metadata). Prefer per-tenant policies
    (``sundial admin egress set``). Set it as on the API."""

    def __post_init__(self) -> None:
        NatsConfig.__post_init__(self)
        ServerConfig.__post_init__(self)
        ResolverConfig.__post_init__(self)
        LogConfig.__post_init__(self)
        TelemetryConfig.__post_init__(self)
        if not self.ledger_token or len(self.ledger_token) > 512 or not self.ledger_token.isascii():
            raise ConfigError("ledger_token", "must be an executor token (printable ASCII)")
        addresses = [a.strip() for a in self.ledger_address.split(",") if a.strip()]
        for address in addresses or [""]:
            host, sep, port = address.rpartition(":")
            if not (sep and host and port.isdigit()):
                raise ConfigError("ledger_address", f"expected host:port, got {address!r}")
        if balanced_target(addresses) is None:
            raise ConfigError(
                "ledger_address",
                "a list must hold IP addresses of one family (ip:port); give one host "
                "name that resolves to every scheduler instead",
            )
        for name in (
            "max_in_flight",
            "fetch_batch",
            "lease_pipeline",
            "prefetch_runs",
            "breaker_failures",
            "http_max_connections",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(name, "must be >= 1")
        if self.pace_lag_ms < 0:
            raise ConfigError("pace_lag_ms", "must be >= 0 (0: never paced)")
        if self.slots_kept_free < 0:
            raise ConfigError("slots_kept_free", "must be >= 0")
        if self.executor_processes < 0:
            raise ConfigError("executor_processes", "must be >= 0 (0: one per core)")
        if not 1 <= self.complete_batch_size <= 500:
            raise ConfigError("complete_batch_size", "must be between 1 and 500")
        if not 10 <= self.run_lease_s <= 300:
            raise ConfigError("run_lease_s", "must be between 10 and 300 seconds")
        for name in (
            "ack_wait_s",
            "heartbeat_interval_s",
            "ledger_timeout_s",
            "capacity_retry_s",
            "breaker_open_s",
        ):
            if getattr(self, name) <= 0:
                raise ConfigError(name, "must be > 0")
        if self.heartbeat_interval_s >= self.run_lease_s:
            raise ConfigError("heartbeat_interval_s", "must be shorter than run_lease_s")
        if self.complete_flush_ms < 0:
            raise ConfigError("complete_flush_ms", "must be >= 0")
        if (self.ledger_tls_cert_file is None) != (self.ledger_tls_key_file is None):
            missing = (
                "ledger_tls_key_file"
                if self.ledger_tls_key_file is None
                else "ledger_tls_cert_file"
            )
            raise ConfigError(missing, "the ledger client certificate and key are set together")
        if self.ledger_tls_server_name and self.ledger_channel_tls is None:
            raise ConfigError(
                "ledger_tls_server_name", "needs TLS to the ledger (SUNDIAL_LEDGER_TLS)"
            )
        if not self.node_id:
            object.__setattr__(self, "node_id", f"{socket.gethostname()}-{os.getpid()}")

    @property
    def ledger_target(self) -> str:
        """The gRPC target of the ledger channel: the address, or for a list of IPv4
        addresses gRPC's ``ipv4:a:p,b:p`` form (the channel balances round robin)."""
        target = balanced_target([a.strip() for a in self.ledger_address.split(",") if a.strip()])
        assert target is not None  # __post_init__ refused anything else
        return target

    @property
    def ledger_channel_tls(self) -> ClientTls | None:
        """How to dial the ledger: TLS settings, or None for plaintext."""
        wanted = self.ledger_tls or self.ledger_tls_ca_file or self.ledger_tls_cert_file
        if not wanted:
            return None
        return ClientTls(
            ca_file=self.ledger_tls_ca_file,
            cert_file=self.ledger_tls_cert_file,
            key_file=self.ledger_tls_key_file,
            server_name=self.ledger_tls_server_name,
        )
