"""Configuration of the scheduler service (``SUNDIAL_*`` environment variables)."""

from __future__ import annotations

import secrets
import socket
from dataclasses import dataclass

from sundial.core.bus import DEAD_LETTERS_PER_TENANT
from sundial.core.config import (
    ConfigError,
    DatabaseConfig,
    EtcdConfig,
    LogConfig,
    NatsConfig,
    SecretKeysConfig,
    ServerConfig,
)
from sundial.core.telemetry import TelemetryConfig


@dataclass(frozen=True, kw_only=True)
class SchedulerConfig(
    DatabaseConfig,
    NatsConfig,
    EtcdConfig,
    ServerConfig,
    LogConfig,
    TelemetryConfig,
    SecretKeysConfig,
):
    """Everything the scheduler service reads at start."""

    node_id: str = ""
    """This member's name in etcd; defaults to the host name plus a random suffix."""

    cluster: str = "default"
    """Cluster name: the etcd key prefix is ``/sundial/<cluster>/``."""

    lease_ttl_s: int = 10
    """etcd lease TTL: a crashed scheduler's partitions move after at most this long."""

    migrate_on_start: bool = True
    """Apply pending schema migrations at start (safe from many replicas at once)."""

    membership_poll_s: float = 1.0
    """Seconds between ownership reconciliations (a watch on etcd wakes it earlier)."""

    poll_interval_s: float = 0.5
    """How often the dispatcher looks for new work at least: between passes it sleeps
    until the next due instant of its partitions, and one of its workers looks again
    after this long at most (a job created, updated or resumed meanwhile to come due
    sooner is seen by then); the others wait for the next due instant."""

    batch_size: int = 500
    """Jobs claimed per dispatch transaction (and runs per RunDispatch message)."""

    dispatch_workers: int = 4
    """Concurrent dispatch transactions per scheduler (SKIP LOCKED keeps them apart), so
    planning in Python and each statement's round trip overlap the database's work on
    other batches (a 100k herd: 24k runs/s with 2, 31k with 4 on the reference machine)."""

    publish_confirm_s: float = 10.0
    """Seconds before a dispatch whose publish was not confirmed is published again."""

    unleased_republish_s: float = 120.0
    """Seconds a published run may wait unleased before it is republished (lost message)."""

    sweep_interval_s: float = 1.0
    """Seconds between sweeps of owned partitions (republish, lease expiry, retries)."""

    run_lease_s: int = 30
    """Default lease an executor gets on a run when LeaseRuns does not ask for one."""

    heartbeat_interval_s: float = 10.0
    """Heartbeat interval announced to executors."""

    cancel_poll_s: float = 2.0
    """Seconds between checks, on each Heartbeat stream, for held runs asked to stop
    between beats (answered with an unsolicited message carrying only ``cancel``)."""

    capacity_retry_s: float = 5.0
    """Retry-after given with REJECT_REASON_TENANT_AT_CAPACITY and
    REJECT_REASON_KEY_AT_CAPACITY."""

    tenant_window: int = 128
    """Fair sharing (docs/design.md section 7, "Flow control"): a tenant of weight 1 has
    at most this many runs in the stream (published and not yet leased; weight w: w
    times as many); its other due runs wait in PostgreSQL and are admitted, the highest
    priority first, as executors lease its runs. Another tenant's newly due run so waits
    behind at most this many of each busy tenant's runs. Running runs do not count (the
    tenant's max_concurrent_runs bounds them); a tenant's runs go out at most this many
    per admission pass (SUNDIAL_ADMIT_INTERVAL_S), so raise it where executors lease
    more than that of one tenant's herd."""

    fair_weight: int = 1
    """A tenant's weight in fair sharing when the admin API sets none (Quotas.fair_weight)."""

    admit_interval_s: float = 0.05
    """Seconds between admission passes while runs of owned partitions wait (the sweeper
    admits them as their tenants' windows free and their keys' rate limits allow); a
    lease on this scheduler's own ledger brings the next pass sooner."""

    identity_issuer: str = "sundial"
    """The ``iss`` claim of the identity tokens the ledger mints (docs/design.md section
    7, "Identity tokens"): e.g. the API's public HTTP URL, where targets fetch the keys
    (``/.well-known/jwks.json``). 1-256 printable ASCII characters."""

    lease_answer_max_bytes: int = 2 * 1024 * 1024
    """Byte budget of one LeaseRuns answer's grants (payloads, targets, signatures): the
    runs past it are answered REJECT_REASON_ANSWER_FULL and leased in the executor's next
    call, so an answer stays far below every channel's message limit (16 MiB) and gRPC's
    default 4 MiB. An answer's first grant is never cut (one run of the largest job the
    API accepts is about 0.5 MiB)."""

    retention_days: int = 30
    """Days of run history kept; older daily partitions of job_runs are dropped."""

    partitions_ahead_days: int = 7
    """Daily job_runs partitions created ahead of today."""

    maintenance_interval_s: float = 3600.0
    """Seconds between partition maintenance passes."""

    stream_replicas: int = 1
    """Copies of SUNDIAL_RUNS and SUNDIAL_DEAD kept by a NATS JetStream cluster: 1 for a
    single server, 3 (or 5) for a cluster that survives losing one (or two) servers.
    Applied to existing streams at start (NATS scales them in place)."""

    dead_letters_per_tenant: int = DEAD_LETTERS_PER_TENANT
    """Dead letters SUNDIAL_DEAD keeps per tenant (30 days at most): past it a tenant's
    oldest letter goes, never another tenant's, so one tenant's failing runs cannot fill
    the servers' storage that SUNDIAL_RUNS shares. Applied to the existing stream at
    start. Every dead run stays listed (ListRuns, status DEAD) for the run retention."""

    stream_check_s: float = 5.0
    """Seconds between checks that both streams exist (a lost one is recreated and its
    unleased runs republished); a failed publish checks at once."""

    def __post_init__(self) -> None:
        DatabaseConfig.__post_init__(self)
        NatsConfig.__post_init__(self)
        EtcdConfig.__post_init__(self)
        ServerConfig.__post_init__(self)
        LogConfig.__post_init__(self)
        TelemetryConfig.__post_init__(self)
        SecretKeysConfig.__post_init__(self)
        if self.lease_ttl_s < 2:
            raise ConfigError("lease_ttl_s", "must be at least 2 seconds")
        if not 1 <= self.dispatch_workers <= 16:
            raise ConfigError("dispatch_workers", "must be between 1 and 16")
        if not 1 <= self.batch_size <= 500:
            raise ConfigError("batch_size", "must be between 1 and 500")
        for name in (
            "membership_poll_s",
            "poll_interval_s",
            "publish_confirm_s",
            "unleased_republish_s",
            "sweep_interval_s",
            "heartbeat_interval_s",
            "capacity_retry_s",
            "cancel_poll_s",
            "maintenance_interval_s",
            "stream_check_s",
            "admit_interval_s",
        ):
            if getattr(self, name) <= 0:
                raise ConfigError(name, "must be > 0")
        if not 1 <= len(self.identity_issuer) <= 256 or not all(
            " " < ch <= "~" for ch in self.identity_issuer
        ):
            raise ConfigError("identity_issuer", "must be 1-256 printable ASCII characters")
        if not 64 * 1024 <= self.lease_answer_max_bytes <= 64 * 1024 * 1024:
            raise ConfigError("lease_answer_max_bytes", "must be between 64 KiB and 64 MiB")
        if not 1 <= self.tenant_window <= 1_000_000:
            raise ConfigError("tenant_window", "must be between 1 and 1000000")
        if not 1 <= self.fair_weight <= 100:
            raise ConfigError("fair_weight", "must be between 1 and 100")
        if not 10 <= self.run_lease_s <= 300:
            raise ConfigError("run_lease_s", "must be between 10 and 300 seconds")
        if self.stream_replicas not in (1, 2, 3, 4, 5):
            raise ConfigError("stream_replicas", "must be between 1 and 5 (NATS's limit)")
        if not 1 <= self.dead_letters_per_tenant <= 1_000_000:
            raise ConfigError("dead_letters_per_tenant", "must be between 1 and 1000000")
        if self.retention_days < 1:
            raise ConfigError("retention_days", "must be at least 1")
        if not 1 <= self.partitions_ahead_days <= 90:
            raise ConfigError("partitions_ahead_days", "must be between 1 and 90")
        if not self.cluster.replace("-", "").replace("_", "").isalnum():
            raise ConfigError("cluster", "use letters, digits, '-' and '_' only")
        if not self.node_id:
            # Frozen: fill the default once, before anyone sees the object.
            object.__setattr__(self, "node_id", f"{socket.gethostname()}-{secrets.token_hex(3)}")
