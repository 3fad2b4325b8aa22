"""Configuration: env vars to frozen dataclasses, validation naming the variable, describe()."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest

from sundial.core.config import (
    REQUIRED,
    ConfigError,
    DatabaseConfig,
    EnvConfig,
    EtcdConfig,
    LogConfig,
    NatsConfig,
    ServerConfig,
    Setting,
    describe,
    load,
    markdown_table,
)

DB_URL = "postgresql://sundial@127.0.0.1:5432/sundial"


@dataclass(frozen=True, kw_only=True)
class _Everything(EnvConfig):
    name: str
    """A plain string."""

    count: int = 3
    """An integer."""

    ratio_s: float = 0.5
    """A float with a unit."""

    enabled: bool = False
    """A boolean."""

    hosts: tuple[str, ...] = ("a", "b")
    """Comma-separated strings."""

    ports: tuple[int, ...] = ()
    """Comma-separated integers."""

    mode: Literal["fast", "safe"] = "safe"
    """One of two words."""

    limit: int | None = None
    """Optional integer."""

    data_dir: Path = Path("/tmp")
    """A path."""


def test_every_supported_type_is_converted() -> None:
    env = {
        "SUNDIAL_NAME": "svc",
        "SUNDIAL_COUNT": "42",
        "SUNDIAL_RATIO_S": "1.25",
        "SUNDIAL_ENABLED": "yes",
        "SUNDIAL_HOSTS": " x , y,,z ",
        "SUNDIAL_PORTS": "1,2",
        "SUNDIAL_MODE": "fast",
        "SUNDIAL_LIMIT": "7",
        "SUNDIAL_DATA_DIR": "/var/lib/sundial",
    }
    config = _Everything.from_env(environ=env)
    assert config == _Everything(
        name="svc",
        count=42,
        ratio_s=1.25,
        enabled=True,
        hosts=("x", "y", "z"),
        ports=(1, 2),
        mode="fast",
        limit=7,
        data_dir=Path("/var/lib/sundial"),
    )


def test_unset_and_empty_variables_take_the_default() -> None:
    config = _Everything.from_env(environ={"SUNDIAL_NAME": "svc", "SUNDIAL_COUNT": "  "})
    assert config.count == 3
    assert config.hosts == ("a", "b")
    assert config.limit is None


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("1", True), ("TRUE", True), ("on", True), ("0", False), ("No", False), ("off", False)],
)
def test_bool_spellings(raw: str, expected: bool) -> None:
    env = {"SUNDIAL_NAME": "n", "SUNDIAL_ENABLED": raw}
    assert _Everything.from_env(environ=env).enabled is expected


@pytest.mark.parametrize(
    ("var", "raw", "problem"),
    [
        ("SUNDIAL_COUNT", "three", "expected an integer"),
        ("SUNDIAL_RATIO_S", "fast", "expected a number"),
        ("SUNDIAL_RATIO_S", "nan", "finite"),
        ("SUNDIAL_ENABLED", "maybe", "expected a boolean"),
        ("SUNDIAL_MODE", "reckless", "expected one of fast, safe"),
        ("SUNDIAL_PORTS", "1,x", "expected an integer"),
    ],
)
def test_bad_values_name_the_variable(var: str, raw: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _Everything.from_env(environ={"SUNDIAL_NAME": "n", var: raw})
    assert caught.value.name == var
    assert str(caught.value).startswith(f"{var}: ")
    assert problem in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_missing_required_variable_is_named() -> None:
    with pytest.raises(ConfigError, match=r"^SUNDIAL_NAME: required but not set$"):
        _Everything.from_env(environ={})


def test_prefix_is_configurable() -> None:
    config = load(_Everything, {"OTHER_NAME": "x", "SUNDIAL_NAME": "ignored"}, prefix="OTHER_")
    assert config.name == "x"


def test_validation_in_post_init_names_the_variable_when_loaded() -> None:
    env = {
        "SUNDIAL_DATABASE_URL": DB_URL,
        "SUNDIAL_POOL_MIN_SIZE": "5",
        "SUNDIAL_POOL_MAX_SIZE": "2",
    }
    with pytest.raises(ConfigError) as caught:
        DatabaseConfig.from_env(environ=env)
    assert caught.value.name == "SUNDIAL_POOL_MAX_SIZE"
    assert "pool_min_size" in caught.value.problem


def test_validation_names_the_field_when_constructed_directly() -> None:
    with pytest.raises(ConfigError) as caught:
        ServerConfig(listen="no-port-here")
    assert caught.value.name == "listen"


@pytest.mark.parametrize(
    "build",
    [
        lambda: DatabaseConfig(database_url="mysql://x"),
        lambda: DatabaseConfig(database_url=DB_URL, statement_timeout_s=-1),
        lambda: NatsConfig(nats_url="http://nats:4222"),
        lambda: NatsConfig(nats_url=" , "),
        lambda: EtcdConfig(etcd_endpoints=()),
        lambda: EtcdConfig(etcd_endpoints=("etcd",)),
        # Credentials: never in a URL, a user with its password, a key with its cert.
        lambda: NatsConfig(nats_url="nats://sched:secret@nats:4222"),
        lambda: NatsConfig(nats_url="nats://nats:4222", nats_user="sched"),
        lambda: NatsConfig(nats_url="nats://nats:4222", nats_password="secret"),
        lambda: NatsConfig(
            nats_url="nats://n:4222", nats_user="u", nats_password="p", nats_creds_file=Path("c")
        ),
        lambda: NatsConfig(nats_url="tls://n:4222", nats_tls_cert_file=Path("cert.pem")),
        lambda: EtcdConfig(etcd_endpoints=("etcd:2379",), etcd_user="sundial"),
        lambda: EtcdConfig(etcd_endpoints=("etcd:2379",), etcd_tls_key_file=Path("k.pem")),
        lambda: ServerConfig(listen="127.0.0.1:99999"),
        lambda: ServerConfig(grace_period_s=-1),
        lambda: LogConfig(log_level="CHATTY"),
    ],
)
def test_shared_configs_reject_invalid_values(build: object) -> None:
    with pytest.raises(ConfigError):
        build()  # type: ignore[operator]


def test_shared_configs_accept_valid_values() -> None:
    assert NatsConfig(nats_url="nats://a:4222,tls://b:4222").nats_url.startswith("nats://")
    assert EtcdConfig(etcd_endpoints=("etcd-0:2379", "http://etcd-1:2379")).etcd_endpoints
    # TLS follows from a CA, a client certificate or the URL scheme.
    assert NatsConfig(nats_url="tls://a:4222").nats_tls
    assert NatsConfig(nats_url="nats://a:4222", nats_tls_ca_file=Path("ca.pem")).nats_tls
    assert not NatsConfig(nats_url="nats://a:4222").nats_tls
    assert EtcdConfig(etcd_endpoints=("https://e:2379",)).etcd_tls
    assert not EtcdConfig(etcd_endpoints=("e:2379",)).etcd_tls
    # Secrets stay out of reprs (and so out of logged configs).
    nats = NatsConfig(nats_url="nats://a:4222", nats_user="u", nats_password="hunter2-secret")
    etcd = EtcdConfig(etcd_endpoints=("e:2379",), etcd_user="u", etcd_password="hunter2-secret")
    db = DatabaseConfig(database_url=DB_URL, database_password="hunter2-secret")
    assert all("hunter2" not in repr(c) for c in (nats, etcd, db))
    assert ServerConfig(listen="[::]:50051").listen == "[::]:50051"
    assert ServerConfig().listen == "127.0.0.1:0"
    assert LogConfig(log_level="debug").log_level == "DEBUG"  # normalised once, up front


def test_configs_are_frozen_and_hide_the_dsn() -> None:
    config = DatabaseConfig(database_url="postgresql://u:hunter2@db/sundial")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.pool_max_size = 99  # type: ignore[misc]
    assert "hunter2" not in repr(config)


@dataclass(frozen=True, kw_only=True)
class _Inherited(DatabaseConfig, ServerConfig, LogConfig):
    max_page_size: int = 1000
    """Largest page ListJobs returns."""


@dataclass(frozen=True, kw_only=True)
class _Nested(EnvConfig):
    database: DatabaseConfig
    server: ServerConfig = field(default_factory=ServerConfig)
    batch_size: int = 500
    """Jobs per dispatch transaction."""


def test_composition_by_inheritance() -> None:
    env = {
        "SUNDIAL_DATABASE_URL": DB_URL,
        "SUNDIAL_LISTEN": "0.0.0.0:50051",
        "SUNDIAL_LOG_FORMAT": "text",
    }
    config = _Inherited.from_env(environ=env)
    assert config.database_url == DB_URL
    assert config.listen == "0.0.0.0:50051"
    assert config.log_format == "text"
    assert config.max_page_size == 1000


def test_composition_by_nesting_keeps_flat_variable_names() -> None:
    env = {
        "SUNDIAL_DATABASE_URL": DB_URL,
        "SUNDIAL_GRACE_PERIOD_S": "2.5",
        "SUNDIAL_BATCH_SIZE": "9",
    }
    config = _Nested.from_env(environ=env)
    assert config.database.database_url == DB_URL
    assert config.server.grace_period_s == 2.5
    assert config.batch_size == 9
    names = [s.env_var for s in describe(_Nested)]
    assert names[:3] == [
        "SUNDIAL_DATABASE_URL",
        "SUNDIAL_DATABASE_PASSWORD",
        "SUNDIAL_POOL_MIN_SIZE",
    ]
    assert "SUNDIAL_LISTEN" in names
    assert names[-1] == "SUNDIAL_BATCH_SIZE"


def test_nested_validation_error_names_the_inner_variable() -> None:
    env = {"SUNDIAL_DATABASE_URL": DB_URL, "SUNDIAL_LISTEN": "nowhere"}
    with pytest.raises(ConfigError) as caught:
        _Nested.from_env(environ=env)
    assert caught.value.name == "SUNDIAL_LISTEN"


def test_describe_lists_variable_type_default_and_doc() -> None:
    settings = {s.env_var: s for s in describe(_Everything)}
    assert settings["SUNDIAL_NAME"] == Setting("SUNDIAL_NAME", "str", REQUIRED, "A plain string.")
    assert settings["SUNDIAL_COUNT"].default == 3
    assert settings["SUNDIAL_HOSTS"].type == "list of str (comma-separated)"
    assert settings["SUNDIAL_MODE"].type == "one of fast, safe"
    assert settings["SUNDIAL_LIMIT"].type == "int (optional)"
    assert settings["SUNDIAL_DATA_DIR"].type == "path"
    assert repr(REQUIRED) == "required"


def test_describe_covers_inherited_fields_with_their_docs() -> None:
    settings = {s.env_var: s for s in describe(_Inherited)}
    assert "PostgreSQL DSN" in settings["SUNDIAL_DATABASE_URL"].doc
    assert settings["SUNDIAL_GRACE_PERIOD_S"].default == 10.0
    assert settings["SUNDIAL_MAX_PAGE_SIZE"].doc == "Largest page ListJobs returns."
    # Multi-line attribute docstrings become one paragraph.
    assert "\n" not in settings["SUNDIAL_IDLE_IN_TRANSACTION_TIMEOUT_S"].doc


def test_every_shared_field_is_documented() -> None:
    for cls in (DatabaseConfig, NatsConfig, EtcdConfig, ServerConfig, LogConfig):
        for setting in describe(cls):
            assert setting.doc, f"{setting.env_var} has no attribute docstring"


def test_describe_rejects_two_fields_reading_one_variable() -> None:
    @dataclass(frozen=True, kw_only=True)
    class Clash:
        primary: DatabaseConfig
        replica: DatabaseConfig

    with pytest.raises(TypeError, match="SUNDIAL_DATABASE_URL"):
        describe(Clash)


def test_markdown_table_has_a_row_per_variable() -> None:
    table = markdown_table(LogConfig)
    assert table.splitlines()[0] == "| Variable | Type | Default | Description |"
    assert "| `SUNDIAL_LOG_FORMAT` | one of json, text | `json` |" in table
    assert len(table.splitlines()) == 2 + len(describe(LogConfig))
