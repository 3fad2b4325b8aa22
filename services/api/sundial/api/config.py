"""Configuration of the API service (``SUNDIAL_*`` environment variables)."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit

from sundial.core.config import (
    ConfigError,
    DatabaseConfig,
    EtcdAccessConfig,
    EtcdConfig,
    LogConfig,
    ResolverConfig,
    SecretKeysConfig,
    ServerConfig,
)
from sundial.core.telemetry import TelemetryConfig


@dataclass(frozen=True, kw_only=True)
class ApiConfig(
    DatabaseConfig,
    ServerConfig,
    ResolverConfig,
    LogConfig,
    TelemetryConfig,
    EtcdAccessConfig,
    SecretKeysConfig,
):
    """Everything the API service reads at start."""

    admin_token: str = field(default="", repr=False)
    """Bootstrap admin bearer token; empty disables it (use issued admin tokens then)."""

    migrate_on_start: bool = True
    """Apply pending schema migrations at start (safe from many replicas at once)."""

    cluster: str = "default"
    """Cluster name reported by ClusterStatus (the schedulers' etcd key prefix)."""

    etcd_endpoints: tuple[str, ...] = ()
    """etcd endpoints (host:port, comma-separated) where ClusterStatus reads scheduler
    membership; empty: ClusterStatus answers FAILED_PRECONDITION. Only ClusterStatus
    uses etcd, and connects on first use."""

    allow_loopback_targets: bool = False
    """Take loopback (127.0.0.0/8, ::1) off the deny list, and let the default egress
    policy (tenants without their own) reach it. For local development and tests only: in
    production it lets tenants call services on the Sundial hosts themselves."""

    allow_private_targets: bool = False
    """The default egress policy (tenants without their own) reaches every private,
    shared (CGNAT) and link-local address. Prefer per-tenant policies (``sundial admin
    egress set``). Cloud metadata addresses (169.254.169.254 and friends), unspecified,
    multicast and reserved addresses stay refused whatever a policy says."""

    target_resolve_timeout_s: float = 2.0
    """Seconds a target host name may take to resolve when a job is created or updated (a
    name that does not resolve in time is accepted, and checked at call time)."""

    default_max_jobs: int = 10_000
    """A new tenant's max_jobs when CreateTenant leaves it 0."""

    default_max_concurrent_runs: int = 100
    """A new tenant's max_concurrent_runs when CreateTenant leaves it 0."""

    tenant_rate_per_s: float = 200.0
    """JobService calls per second one tenant may make on one API replica, on average (a
    token bucket per tenant); past it calls are refused RESOURCE_EXHAUSTED with a
    RetryInfo (the Python client and the CLI wait and retry). 0: no limit."""

    tenant_rate_burst: int = 1000
    """Calls a tenant may make at once on one replica after a quiet spell (the bucket's
    size)."""

    tenant_concurrent_calls: int = 4
    """JobService calls of one tenant executing at once on one replica (0: no bound);
    its further calls wait for its own, never for another tenant's, so a tenant's heavy
    calls (bulk actions, counts over many jobs) hold at most this many of the replica's
    database connections (``SUNDIAL_POOL_MAX_SIZE``, 10). Keep it well below the pool."""

    tenant_compute_share: float = 0.25
    """Fraction of a core one tenant's schedule computations (previews, backfills, first
    fire times through calendars) may use on one API replica, on average; past it they
    are refused RESOURCE_EXHAUSTED with a
    RetryInfo until the tenant's share has refilled. They run off the event loop, one
    at a time per tenant (sundial.api.offload)."""

    tenant_compute_burst_s: float = 1.0
    """CPU seconds of schedule computation a quiet tenant may use at once."""

    max_secrets: int = 100
    """Secrets per tenant (CreateSecret beyond it: RESOURCE_EXHAUSTED, quota
    ``max_secrets``)."""

    max_calendars: int = 100
    """Calendars one tenant may hold; CreateCalendar beyond it is RESOURCE_EXHAUSTED."""

    max_waiting_requested_runs: int = 10_000
    """Runs made by TriggerJob and BackfillJob that one tenant may have waiting to start
    at once (pending, queued or retrying); past it those calls are RESOURCE_EXHAUSTED and
    write nothing (a backfill counts every occurrence it asks for)."""

    revisions_per_job: int = 100
    """Revisions kept per job (the newest), unless its tenant has its own limit; an older
    one is deleted when the job's change that puts it past the limit is written."""

    max_flow_limits: int = 1000
    """Flow limits (keys with a rate or concurrency limit) one tenant may set;
    SetFlowLimit of a further key is RESOURCE_EXHAUSTED."""

    fair_weight: int = 1
    """The fair weight of a tenant without its own (``Quotas.fair_weight``), as the API
    shows it: give the schedulers the same value, which is the one they share executors
    by."""

    revision_retention_days: int = 90
    """Days a job's revisions are kept (its newest is kept however old)."""

    deleted_job_revision_days: int = 30
    """Days a deleted job's revisions are kept after its last change."""

    audit_retention_days: int = 90
    """Days audit events are kept."""

    request_id_retention_s: int = 86_400
    """How long a request_id is remembered for idempotent retries (the API promises 24 h)."""

    request_id_purge_interval_s: float = 600.0
    """Seconds between retention passes: request ids, revisions and audit events older
    than their retention are deleted."""

    pause_until_check_s: float = 1.0
    """Seconds between looks for jobs whose timed pause (pause_until) ended: such a job
    resumes up to this late (each look is one probe of an index that is nearly always
    empty)."""

    http_listen: str = ""
    """Address (host:port) of the HTTP port: JobService and AdminService over the Connect
    protocol (JSON over HTTP/1.1 for curl and browsers, gRPC-Web) and the web console at
    /console/; empty: off. TLS with the gRPC port's SUNDIAL_TLS_* files when set (read at
    start)."""

    http_cors_origins: tuple[str, ...] = ()
    """Origins (scheme://host[:port], comma-separated) whose web pages may call the HTTP
    port's API from a browser (CORS); empty: same-origin only."""

    notify_interval_s: float = 1.0
    """Seconds between the notifier's passes while no notification is due (each API
    replica runs one; they share the work through SKIP LOCKED)."""

    notify_timeout_s: float = 10.0
    """Bound on one notification delivery (connect, send, answer); a delivery that
    exceeds it is retried with backoff."""

    notify_concurrency: int = 16
    """Notification deliveries in flight at once per API replica; one tenant's at most a
    quarter of them (at least 1), so its hanging targets leave the rest to others."""

    def etcd(self) -> EtcdConfig:
        """How ClusterStatus reaches etcd (``etcd_endpoints`` must be set)."""
        return EtcdConfig(etcd_endpoints=self.etcd_endpoints, **self.etcd_access())

    def __post_init__(self) -> None:
        DatabaseConfig.__post_init__(self)
        ServerConfig.__post_init__(self)
        ResolverConfig.__post_init__(self)
        LogConfig.__post_init__(self)
        TelemetryConfig.__post_init__(self)
        EtcdAccessConfig.__post_init__(self)
        SecretKeysConfig.__post_init__(self)
        if not 1 <= self.max_secrets <= 100_000:
            raise ConfigError("max_secrets", "must be 1 to 100,000")
        if self.admin_token and len(self.admin_token) < 16:
            raise ConfigError("admin_token", "must be at least 16 characters")
        if not self.cluster.replace("-", "").replace("_", "").isalnum():
            raise ConfigError("cluster", "use letters, digits, '-' and '_' only")
        if self.etcd_endpoints:
            self.etcd()  # validates host:port
        if self.target_resolve_timeout_s <= 0:
            raise ConfigError("target_resolve_timeout_s", "must be > 0")
        if not 1 <= self.default_max_jobs <= 100_000_000:
            raise ConfigError("default_max_jobs", "must be 1 to 100,000,000")
        if not 1 <= self.default_max_concurrent_runs <= 1_000_000:
            raise ConfigError("default_max_concurrent_runs", "must be 1 to 1,000,000")
        if not 0 <= self.tenant_concurrent_calls <= 10_000:
            raise ConfigError("tenant_concurrent_calls", "must be 0 (no bound) to 10,000")
        if not 0 <= self.tenant_rate_per_s <= 1_000_000:
            raise ConfigError("tenant_rate_per_s", "must be 0 (no limit) to 1,000,000")
        if not 1 <= self.tenant_rate_burst <= 10_000_000:
            raise ConfigError("tenant_rate_burst", "must be 1 to 10,000,000")
        if not 0 < self.tenant_compute_share <= 64:
            raise ConfigError("tenant_compute_share", "must be > 0 and at most 64 cores")
        if not 0 < self.tenant_compute_burst_s <= 3600:
            raise ConfigError("tenant_compute_burst_s", "must be > 0 and at most 3600")
        for name, low, high in (
            ("max_calendars", 1, 100_000),
            ("max_waiting_requested_runs", 1, 10_000_000),
            ("revisions_per_job", 1, 100_000),
            ("max_flow_limits", 1, 100_000),
            ("fair_weight", 1, 100),
            ("revision_retention_days", 1, 36_500),
            ("deleted_job_revision_days", 0, 36_500),
            ("audit_retention_days", 1, 36_500),
        ):
            if not low <= getattr(self, name) <= high:
                raise ConfigError(name, f"must be {low} to {high:,}")
        if self.request_id_retention_s < 60:
            raise ConfigError("request_id_retention_s", "must be at least 60 seconds")
        if self.request_id_purge_interval_s <= 0:
            raise ConfigError("request_id_purge_interval_s", "must be > 0")
        if self.notify_interval_s <= 0:
            raise ConfigError("notify_interval_s", "must be > 0")
        if not 0 < self.pause_until_check_s <= 3600:
            raise ConfigError("pause_until_check_s", "must be > 0 and at most 3600")
        if not 0 < self.notify_timeout_s <= 300:
            raise ConfigError("notify_timeout_s", "must be > 0 and at most 300")
        if not 1 <= self.notify_concurrency <= 1024:
            raise ConfigError("notify_concurrency", "must be 1 to 1024")
        if self.http_listen:
            host, sep, port = self.http_listen.rpartition(":")
            if not (sep and host and port.isdigit() and int(port) <= 65535):
                raise ConfigError("http_listen", f"expected host:port, got {self.http_listen!r}")
        for origin in self.http_cors_origins:
            parts = urlsplit(origin)
            if (
                parts.scheme not in ("http", "https")
                or not parts.netloc
                or parts.path
                or parts.query
                or parts.fragment
                or "*" in origin
            ):
                raise ConfigError(
                    "http_cors_origins",
                    f"{origin!r} is not an origin: scheme://host[:port], no path, no wildcard",
                )
