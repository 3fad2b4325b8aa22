"""Telemetry settings: nothing is exported unless a collector is named."""

from __future__ import annotations

import pytest

from sundial.core.config import ConfigError
from sundial.core.telemetry import TelemetryConfig, configure_telemetry


def test_without_an_endpoint_nothing_is_installed() -> None:
    assert configure_telemetry(TelemetryConfig(), "api") is None


@pytest.mark.parametrize(
    ("environ", "variable"),
    [
        ({"SUNDIAL_OTLP_ENDPOINT": "otel:4317"}, "SUNDIAL_OTLP_ENDPOINT"),
        ({"SUNDIAL_METRICS_INTERVAL_S": "0"}, "SUNDIAL_METRICS_INTERVAL_S"),
    ],
)
def test_bad_settings_name_the_variable(environ: dict[str, str], variable: str) -> None:
    with pytest.raises(ConfigError, match=variable):
        TelemetryConfig.from_env(environ=environ)


def test_endpoint_is_read_from_the_environment() -> None:
    config = TelemetryConfig.from_env(environ={"SUNDIAL_OTLP_ENDPOINT": "http://otel:4317"})
    assert config.otlp_endpoint == "http://otel:4317"
