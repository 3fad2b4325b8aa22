"""Telemetry settings: nothing is exported unless a collector is named."""

from __future__ import annotations

import pytest

from sundial.core.config import ConfigError
from sundial.core.telemetry import (
    TelemetryConfig,
    configure_telemetry,
    metrics_address,
    metrics_listen_for_worker,
)


def test_without_an_endpoint_nothing_is_installed() -> None:
    assert configure_telemetry(TelemetryConfig(), "api") is None


@pytest.mark.parametrize(
    ("environ", "variable"),
    [
        ({"SUNDIAL_OTLP_ENDPOINT": "otel:4317"}, "SUNDIAL_OTLP_ENDPOINT"),
        ({"SUNDIAL_METRICS_INTERVAL_S": "0"}, "SUNDIAL_METRICS_INTERVAL_S"),
        ({"SUNDIAL_TRACE_SAMPLE_RATIO": "1.5"}, "SUNDIAL_TRACE_SAMPLE_RATIO"),
        ({"SUNDIAL_TRACE_SAMPLE_RATIO": "-0.1"}, "SUNDIAL_TRACE_SAMPLE_RATIO"),
    ],
)
def test_bad_settings_name_the_variable(environ: dict[str, str], variable: str) -> None:
    with pytest.raises(ConfigError, match=variable):
        TelemetryConfig.from_env(environ=environ)


def test_endpoint_is_read_from_the_environment() -> None:
    config = TelemetryConfig.from_env(environ={"SUNDIAL_OTLP_ENDPOINT": "http://otel:4317"})
    assert config.otlp_endpoint == "http://otel:4317"


@pytest.mark.parametrize("listen", ["9464", "host:", "host:port", "0.0.0.0:70000"])
def test_a_bad_metrics_listen_names_the_variable(listen: str) -> None:
    with pytest.raises(ConfigError, match="SUNDIAL_METRICS_LISTEN"):
        TelemetryConfig.from_env(environ={"SUNDIAL_METRICS_LISTEN": listen})


def test_metrics_listen_is_host_and_port() -> None:
    assert metrics_address("0.0.0.0:9464") == ("0.0.0.0", 9464)
    assert metrics_address("[::]:9464") == ("::", 9464)
    assert metrics_address(":9464") == ("0.0.0.0", 9464)


def test_each_executor_worker_serves_metrics_at_the_port_plus_its_index() -> None:
    assert metrics_listen_for_worker("0.0.0.0:9464", 0) == "0.0.0.0:9464"
    assert metrics_listen_for_worker("0.0.0.0:9464", 2) == "0.0.0.0:9466"
    assert metrics_listen_for_worker("[::]:9464", 1) == "[::]:9465"
