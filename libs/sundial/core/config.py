"""Configuration as frozen dataclasses, loaded once from ``SUNDIAL_*`` environment variables.

Each field maps to the variable ``PREFIX + FIELD.upper()`` (``database_url`` ->
``SUNDIAL_DATABASE_URL``) and is converted by its annotated type. The unit is part of the
field name (``grace_period_s``), each field has an attribute docstring (the text users
see in ``--help`` and the README table, via :func:`describe`), and ``__post_init__``
validates, so an object that exists is valid whether it came from the environment or
from a test.

Services compose the shared pieces below in their own ``config.py``, either by
inheritance (every class is ``kw_only``, so field order never matters)::

    @dataclass(frozen=True, kw_only=True)
    class ApiConfig(DatabaseConfig, ServerConfig, LogConfig):
        max_page_size: int = 1000
        \"\"\"Largest page ListJobs returns.\"\"\"

or by nesting (a field whose type is a dataclass is loaded with the same prefix, so
variable names stay flat: ``database: DatabaseConfig`` still reads
``SUNDIAL_DATABASE_URL``). Either way call ``ApiConfig.from_env()`` once in ``__main__``
and pass the pieces into constructors; nothing else reads the environment.

Rules for values: an unset or empty variable means "use the default" (and is an error
for a field without one); ``bool`` accepts 1/0, true/false, yes/no, on/off; tuples are
comma-separated with blanks dropped.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import itertools
import math
import os
import textwrap
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, NamedTuple, Self, TypeVar

from sundial.core.dns import Resolver
from sundial.core.sealing import Keyring, KeyringError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = [
    "MAX_MESSAGE_BYTES",
    "REQUIRED",
    "ConfigError",
    "DatabaseConfig",
    "EnvConfig",
    "EtcdAccessConfig",
    "EtcdConfig",
    "LogConfig",
    "NatsConfig",
    "ResolverConfig",
    "ServerConfig",
    "Setting",
    "describe",
    "load",
    "markdown_table",
]

T = TypeVar("T", bound="DataclassInstance")

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


class ConfigError(ValueError):
    """A configuration value is missing or invalid.

    A ``ValueError`` rather than a ``SundialError``: it is raised while a process starts,
    before any RPC exists, so a gRPC status code would mean nothing. ``__main__`` prints
    it and exits with status 2.

    Attributes:
        name: The environment variable (when loaded by :func:`load`) or, for an object
            constructed directly, the field name.
        problem: What is wrong, without the name.
    """

    def __init__(self, name: str, problem: str) -> None:
        super().__init__(f"{name}: {problem}")
        self.name = name
        self.problem = problem


class _Required:
    """Marker for "no default" in :func:`describe` output; prints as ``required``."""

    _instance: _Required | None = None

    def __new__(cls) -> _Required:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "required"


REQUIRED: Any = _Required()
"""The ``default`` of a :class:`Setting` whose variable must be set."""


class Setting(NamedTuple):
    """One configurable variable, as listed by :func:`describe`."""

    env_var: str
    """The environment variable, e.g. ``SUNDIAL_DATABASE_URL``."""
    type: str
    """The accepted values in words, e.g. ``int`` or ``list of str (comma-separated)``."""
    default: Any
    """The default value, or :data:`REQUIRED`."""
    doc: str
    """The field's attribute docstring, one paragraph."""


class EnvConfig:
    """Mixin giving a config dataclass its ``from_env`` constructor."""

    if TYPE_CHECKING:
        # Every subclass is a dataclass; this tells the type checker so, for `load`.
        __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    @classmethod
    def from_env(cls, prefix: str = "SUNDIAL_", environ: Mapping[str, str] | None = None) -> Self:
        """Build the config from the environment (or ``environ``); see :func:`load`."""
        return load(cls, os.environ if environ is None else environ, prefix)


def load(cls: type[T], environ: Mapping[str, str] = os.environ, prefix: str = "SUNDIAL_") -> T:
    """Build the dataclass ``cls`` from environment variables.

    Args:
        cls: A dataclass whose fields have supported types: ``str``, ``int``, ``float``,
            ``bool``, ``Path``, ``Literal[...]`` of strings, ``tuple[X, ...]`` and
            ``X | None`` of those, or a nested dataclass (loaded with the same prefix).
        environ: Where to read variables from.
        prefix: Prepended to each upper-cased field name.

    Returns:
        A validated instance.

    Raises:
        ConfigError: A variable is missing or invalid; the error names the variable.
    """
    kwargs: dict[str, Any] = {}
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        hint = hints[f.name]
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            kwargs[f.name] = load(hint, environ, prefix)
            continue
        var = prefix + f.name.upper()
        raw = environ.get(var, "").strip()
        if not raw:
            if not _has_default(f):
                raise ConfigError(var, "required but not set")
            continue
        kwargs[f.name] = _convert(raw, hint, var)
    try:
        return cls(**kwargs)
    except ConfigError as exc:
        # __post_init__ names the field; the user set a variable, so name that instead.
        if exc.name in kwargs or exc.name in hints:
            raise ConfigError(prefix + exc.name.upper(), exc.problem) from None
        raise


def describe(cls: type, prefix: str = "SUNDIAL_") -> list[Setting]:
    """List every variable ``cls`` reads, in field order, nested configs flattened.

    The README's configuration table and each service's ``--help`` are generated from
    this, so the dataclass is the single source of truth.

    Raises:
        TypeError: Two fields (through nesting) would read the same variable.
    """
    settings: list[Setting] = []
    docs = _field_docs(cls)
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        hint = hints[f.name]
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            settings.extend(describe(hint, prefix))
            continue
        default: Any = REQUIRED
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        settings.append(
            Setting(prefix + f.name.upper(), _type_name(hint), default, docs.get(f.name, ""))
        )
    seen: set[str] = set()
    for setting in settings:
        if setting.env_var in seen:
            raise TypeError(f"{cls.__name__}: two fields read {setting.env_var}")
        seen.add(setting.env_var)
    return settings


def markdown_table(cls: type, prefix: str = "SUNDIAL_") -> str:
    """A Markdown table of :func:`describe`'s rows, for the README."""
    lines = ["| Variable | Type | Default | Description |", "|---|---|---|---|"]
    for s in describe(cls, prefix):
        default = "required" if s.default is REQUIRED else f"`{_render_default(s.default)}`"
        doc = s.doc.replace("|", "\\|")
        lines.append(f"| `{s.env_var}` | {s.type} | {default} | {doc} |")
    return "\n".join(lines) + "\n"


# --- conversion ---------------------------------------------------------------------------


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    # Modules use `from __future__ import annotations`: annotations are strings until here.
    return typing.get_type_hints(cls)


def _has_default(f: dataclasses.Field[Any]) -> bool:
    return f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING


def _convert(raw: str, hint: Any, var: str) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        if len(inner) != 1:
            raise TypeError(f"{var}: unsupported union type {hint!r}")
        return _convert(raw, inner[0], var)
    if origin is tuple:
        if len(args) != 2 or args[1] is not Ellipsis:
            raise TypeError(f"{var}: only tuple[X, ...] is supported, not {hint!r}")
        items = [item.strip() for item in raw.split(",")]
        return tuple(_convert(item, args[0], var) for item in items if item)
    if origin is Literal:
        if raw not in args:
            choices = ", ".join(str(a) for a in args)
            raise ConfigError(var, f"expected one of {choices}, got {raw!r}")
        return raw
    if hint is bool:
        lowered = raw.lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise ConfigError(var, f"expected a boolean (1/0, true/false, yes/no), got {raw!r}")
    if hint is int:
        try:
            return int(raw)
        except ValueError:
            raise ConfigError(var, f"expected an integer, got {raw!r}") from None
    if hint is float:
        try:
            value = float(raw)
        except ValueError:
            raise ConfigError(var, f"expected a number, got {raw!r}") from None
        if not math.isfinite(value):
            raise ConfigError(var, f"expected a finite number, got {raw!r}")
        return value
    if hint is str:
        return raw
    if hint is Path:
        return Path(raw)
    raise TypeError(f"{var}: unsupported config field type {hint!r}")


def _type_name(hint: Any) -> str:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return f"{_type_name(inner[0])} (optional)"
    if origin is tuple:
        return f"list of {_type_name(args[0])} (comma-separated)"
    if origin is Literal:
        return "one of " + ", ".join(str(a) for a in args)
    if hint is Path:
        return "path"
    return getattr(hint, "__name__", str(hint))


def _render_default(value: Any) -> str:
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@functools.cache
def _field_docs(cls: type) -> dict[str, str]:
    """Attribute docstrings of ``cls`` and its dataclass bases, read from the source.

    Python discards a string literal after an annotated assignment, so the text is only
    in the source; without source (a frozen build) fields simply have no description.
    """
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        tree = ast.parse(source)
        node = tree.body[0]
        if not isinstance(node, ast.ClassDef):
            continue
        for stmt, after in itertools.pairwise(node.body):
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[stmt.target.id] = " ".join(inspect.cleandoc(after.value.value).split())
    return docs


# --- the shared pieces --------------------------------------------------------------------


def _check(ok: bool, name: str, problem: str) -> None:
    if not ok:
        raise ConfigError(name, problem)


def _check_host_port(value: str, name: str) -> None:
    host, sep, port = value.rpartition(":")
    _check(bool(sep and host), name, f"expected host:port, got {value!r}")
    _check(port.isdigit() and 0 <= int(port) <= 65535, name, f"bad port in {value!r}")


@dataclass(frozen=True, kw_only=True)
class DatabaseConfig(EnvConfig):
    """How a service reaches PostgreSQL."""

    database_url: str = field(repr=False)  # the DSN may hold a password: keep it out of logs
    """PostgreSQL DSN, e.g. ``postgresql://sundial@db:5432/sundial?sslmode=verify-full``
    (libpq's ``sslmode``, ``sslrootcert``, ``sslcert`` and ``sslkey`` apply)."""

    database_password: str = field(default="", repr=False)
    """PostgreSQL password, so it need not sit in the URL (a password in the URL also
    works; this one wins)."""

    pool_min_size: int = 1
    """Connections the pool keeps open when idle."""

    pool_max_size: int = 10
    """Most connections the pool opens; size it against PostgreSQL's max_connections."""

    statement_timeout_s: float = 30.0
    """Server-side limit on any one statement, in seconds (0 disables it)."""

    idle_in_transaction_timeout_s: float = 15.0
    """Seconds a session may sit idle inside a transaction before PostgreSQL ends it.

    Bounds how long a frozen process (SIGSTOP, long GC pause) can hold row locks that
    other schedulers' ``SKIP LOCKED`` claims would otherwise skip forever (0 disables it).
    """

    transaction_timeout_s: float = 30.0
    """Seconds any one transaction may last before PostgreSQL ends its session (0: not
    set, as an older PostgreSQL than 17 needs). Bounds what idle_in_transaction_timeout_s
    cannot see: a process frozen while it was sending a statement leaves its session
    busy reading the rest, not idle, and holding its row locks. Every transaction of
    Sundial's is one batch of milliseconds."""

    connect_timeout_s: float = 10.0
    """Seconds to wait for a new connection before giving up."""

    plan_lifetime_s: int = 10
    """Seconds a prepared statement lives on a connection before it is prepared again,
    and with it the plan PostgreSQL keeps for it (0: for the connection's life). A plan
    made while the tables were small stays a scan of them after a tenant's herd fills
    them, until autovacuum analyzes them; prepared again, its next plans see the tables
    as they are (docs/design.md section 8, "Plans that stay index probes")."""

    def __post_init__(self) -> None:
        _check(
            self.database_url.startswith(("postgresql://", "postgres://")),
            "database_url",
            "expected a postgresql:// URL",
        )
        _check(self.pool_min_size >= 0, "pool_min_size", "must be >= 0")
        _check(self.pool_max_size >= 1, "pool_max_size", "must be >= 1")
        _check(
            self.pool_max_size >= self.pool_min_size,
            "pool_max_size",
            f"must be >= pool_min_size ({self.pool_min_size})",
        )
        _check(self.statement_timeout_s >= 0, "statement_timeout_s", "must be >= 0")
        _check(
            self.idle_in_transaction_timeout_s >= 0,
            "idle_in_transaction_timeout_s",
            "must be >= 0",
        )
        _check(self.transaction_timeout_s >= 0, "transaction_timeout_s", "must be >= 0")
        _check(self.connect_timeout_s > 0, "connect_timeout_s", "must be > 0")
        _check(self.plan_lifetime_s >= 0, "plan_lifetime_s", "must be >= 0")


@dataclass(frozen=True, kw_only=True)
class NatsConfig(EnvConfig):
    """How a service reaches NATS JetStream."""

    nats_url: str
    """NATS server URL(s), comma-separated for a cluster, e.g. ``nats://nats:4222``
    (``tls://`` for TLS). No credentials in the URL: use the variables below."""

    nats_user: str = ""
    """NATS user name (with ``nats_password``); empty: no user/password authentication."""

    nats_password: str = field(default="", repr=False)
    """Password of ``nats_user``."""

    nats_inbox_prefix: str = "_INBOX"
    """Prefix of this connection's reply subjects. Give each NATS user its own (and allow
    it to subscribe under that prefix only) so no user can read another's replies; the
    local stack uses ``_INBOX_<user>``."""

    nats_creds_file: Path | None = None
    """A NATS ``.creds`` file (JWT + NKey seed, decentralised auth) instead of a user and
    password."""

    nats_tls_ca_file: Path | None = None
    """PEM CA certificates the NATS server's certificate must chain to (TLS on when set,
    or with a ``tls://`` URL: then the system roots)."""

    nats_tls_cert_file: Path | None = None
    """PEM client certificate for a NATS server that verifies clients (with the key)."""

    nats_tls_key_file: Path | None = None
    """PEM private key of ``nats_tls_cert_file``."""

    def __post_init__(self) -> None:
        urls = [u.strip() for u in self.nats_url.split(",") if u.strip()]
        _check(bool(urls), "nats_url", "must not be empty")
        for url in urls:
            # First, so an error below never quotes a URL that holds a password.
            _check(
                "@" not in url.split("://", 1)[-1].split("/", 1)[0],
                "nats_url",
                "must not hold credentials: set nats_user and nats_password instead",
            )
            _check(
                url.startswith(("nats://", "tls://", "ws://", "wss://")),
                "nats_url",
                f"expected nats://, tls://, ws:// or wss://, got {url!r}",
            )
        _check(
            bool(self.nats_user) == bool(self.nats_password),
            "nats_password" if self.nats_user else "nats_user",
            "nats_user and nats_password are set together",
        )
        _check(
            not (self.nats_user and self.nats_creds_file),
            "nats_creds_file",
            "use either a creds file or a user and password",
        )
        _check(
            (self.nats_tls_cert_file is None) == (self.nats_tls_key_file is None),
            "nats_tls_key_file" if self.nats_tls_key_file is None else "nats_tls_cert_file",
            "the client certificate and key are set together",
        )

    @property
    def nats_tls(self) -> bool:
        """Whether to connect with TLS."""
        return (
            self.nats_tls_ca_file is not None
            or self.nats_tls_cert_file is not None
            or any(u.strip().startswith(("tls://", "wss://")) for u in self.nats_url.split(","))
        )


@dataclass(frozen=True, kw_only=True)
class EtcdAccessConfig(EnvConfig):
    """The credentials and TLS settings of an etcd client (the endpoints are apart: the
    API's are optional)."""

    etcd_user: str = ""
    """etcd user (with ``etcd_password``) when etcd has authentication enabled; it needs
    read-write on the ``/sundial/`` prefix."""

    etcd_password: str = field(default="", repr=False)
    """Password of ``etcd_user``."""

    etcd_tls_ca_file: Path | None = None
    """PEM CA certificates etcd's certificate must chain to; when set (or with an
    ``https://`` endpoint: then the system roots) the client dials TLS."""

    etcd_tls_cert_file: Path | None = None
    """PEM client certificate for an etcd that verifies clients (``--client-cert-auth``)."""

    etcd_tls_key_file: Path | None = None
    """PEM private key of ``etcd_tls_cert_file``."""

    def __post_init__(self) -> None:
        _check(
            bool(self.etcd_user) == bool(self.etcd_password),
            "etcd_password" if self.etcd_user else "etcd_user",
            "etcd_user and etcd_password are set together",
        )
        _check(
            (self.etcd_tls_cert_file is None) == (self.etcd_tls_key_file is None),
            "etcd_tls_key_file" if self.etcd_tls_key_file is None else "etcd_tls_cert_file",
            "the client certificate and key are set together",
        )

    def etcd_access(self) -> dict[str, Any]:
        """These fields, to build an :class:`EtcdConfig` from another config."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(EtcdAccessConfig)}


@dataclass(frozen=True, kw_only=True)
class EtcdConfig(EtcdAccessConfig):
    """How a service reaches etcd."""

    etcd_endpoints: tuple[str, ...]
    """etcd client endpoints as host:port, comma-separated, e.g. ``etcd-0:2379,etcd-1:2379``."""

    def __post_init__(self) -> None:
        _check(bool(self.etcd_endpoints), "etcd_endpoints", "at least one endpoint is needed")
        for endpoint in self.etcd_endpoints:
            bare = endpoint.split("://", 1)[-1].rstrip("/")
            _check_host_port(bare, "etcd_endpoints")
        EtcdAccessConfig.__post_init__(self)

    @property
    def etcd_tls(self) -> bool:
        """Whether to dial etcd with TLS."""
        return (
            self.etcd_tls_ca_file is not None
            or self.etcd_tls_cert_file is not None
            or self.etcd_endpoints[0].startswith("https://")
        )


MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""The one message limit of Sundial's gRPC: servers (``max_message_bytes``) and every
channel (:func:`sundial.core.tls.dial`, the target and notifier callers) send and receive
messages up to this size. What can grow with tenant input is cut well below it: LeaseRuns
answers by the ledger's byte budget, list pages by theirs."""


@dataclass(frozen=True, kw_only=True)
class ServerConfig(EnvConfig):
    """The gRPC server a service exposes."""

    listen: str = "127.0.0.1:0"
    """Address the gRPC server binds, host:port; port 0 picks a free one."""

    grace_period_s: float = 10.0
    """Seconds in-flight RPCs (and each component) get to finish on shutdown."""

    max_message_bytes: int = MAX_MESSAGE_BYTES
    """Largest request or response message, in bytes (gRPC's own default is 4 MiB; a
    BatchCreateJobs of 1,000 jobs with payloads needs more)."""

    tls_cert_file: Path | None = None
    """PEM certificate chain the gRPC server presents; when set (with the key) it serves
    TLS only. Re-read when the file changes: rotate by replacing it, no restart."""

    tls_key_file: Path | None = None
    """PEM private key (unencrypted) of the TLS certificate; set with it or not at all."""

    tls_client_ca_file: Path | None = None
    """PEM CA certificates that clients' certificates must chain to: when set, clients
    must present one (mTLS). Needs the TLS certificate; re-read on change like it."""

    def __post_init__(self) -> None:
        _check_host_port(self.listen, "listen")
        _check(self.grace_period_s >= 0, "grace_period_s", "must be >= 0")
        _check(
            1024 <= self.max_message_bytes <= 1024**3,
            "max_message_bytes",
            "must be between 1 KiB and 1 GiB",
        )
        _check(
            (self.tls_cert_file is None) == (self.tls_key_file is None),
            "tls_key_file" if self.tls_key_file is None else "tls_cert_file",
            "the TLS certificate and key are set together or not at all",
        )
        _check(
            self.tls_client_ca_file is None or self.tls_cert_file is not None,
            "tls_client_ca_file",
            "mTLS needs the server's own TLS certificate and key (tls_cert_file, tls_key_file)",
        )


_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


@dataclass(frozen=True, kw_only=True)
class ResolverConfig(EnvConfig):
    """How a service that calls tenants' targets looks their names up
    (:mod:`sundial.core.dns`)."""

    dns_nameservers: tuple[str, ...] = ()
    """DNS servers (host or host:port, comma-separated) target names are looked up at;
    empty: the system's (/etc/resolv.conf, with its search domains, and /etc/hosts)."""

    dns_lookups_per_tenant: int = 16
    """Name lookups one tenant may have in flight at once in this process; more wait for
    one of that tenant's own to end (within the lookup's timeout), never for another
    tenant's."""

    def __post_init__(self) -> None:
        for server in self.dns_nameservers:
            host, _, port = server.rpartition(":") if server.count(":") == 1 else (server, "", "")
            _check(bool(host or server), "dns_nameservers", f"empty server in {server!r}")
            _check(not port or port.isdigit(), "dns_nameservers", f"bad port in {server!r}")
        _check(
            1 <= self.dns_lookups_per_tenant <= 1024,
            "dns_lookups_per_tenant",
            "must be between 1 and 1024",
        )

    def resolver(self) -> Resolver:
        """The process's resolver, as configured."""
        return Resolver(self.dns_nameservers, per_tenant=self.dns_lookups_per_tenant)


@dataclass(frozen=True, kw_only=True)
class SecretKeysConfig(EnvConfig):
    """The key-encryption keys of tenant secrets (:mod:`sundial.core.sealing`): the API
    seals with them, the scheduler's ledger opens with them."""

    secret_keys: str = field(default="", repr=False)
    """Key-encryption keys of tenant secrets: ``<id>:<base64 of 32 random bytes>``,
    comma-separated, the primary first (it seals; the others only open what they
    sealed). Empty: ``secret_keys_file``. Neither: secrets cannot be stored."""

    secret_keys_file: str = ""
    """A file holding ``secret_keys`` (one key a line, ``#`` comments), read at start;
    used when ``secret_keys`` is empty."""

    def __post_init__(self) -> None:
        self.keyring()  # a malformed key stops the start (exit 2), naming no key material

    def keyring(self) -> Keyring:
        """The keyring these settings name."""
        try:
            return Keyring.from_settings(self.secret_keys, self.secret_keys_file)
        except KeyringError as exc:
            name = "secret_keys" if self.secret_keys else "secret_keys_file"
            raise ConfigError(name, str(exc)) from None


@dataclass(frozen=True, kw_only=True)
class LogConfig(EnvConfig):
    """How a service logs."""

    log_level: str = "INFO"
    """Lowest level logged: DEBUG, INFO, WARNING, ERROR or CRITICAL."""

    log_format: Literal["json", "text"] = "json"
    """``json`` (one object per line, for collectors) or ``text`` (for a terminal)."""

    def __post_init__(self) -> None:
        level = self.log_level.upper()
        _check(level in _LOG_LEVELS, "log_level", f"expected one of {', '.join(_LOG_LEVELS)}")
        # Frozen: normalising the case needs object.__setattr__, once, before anyone sees it.
        object.__setattr__(self, "log_level", level)
        _check(self.log_format in ("json", "text"), "log_format", "expected json or text")
