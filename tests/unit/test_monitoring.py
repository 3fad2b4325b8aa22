"""deploy/monitoring/: the alert rules and the Grafana dashboard name only exported metrics.

The exported names come from the code, not a list kept here: every instrument the
services create (``meter.create_counter(NAME, unit=...)`` and the like in libs/ and
services/, also through a helper such as ``lateness_histogram(meter, NAME, ...)``) is
found in the source, created again on a meter behind the OpenTelemetry Prometheus
exporter, and scraped; the sample names of that scrape (``_total``, ``_bucket``/``_sum``/
``_count``, unit suffixes, exactly as the exporter writes them) are what the PromQL of
the rules and panels may use. If ``promtool`` is installed, ``promtool check rules``
must pass too.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client import CollectorRegistry

from sundial.core.partition import PARTITION_COUNT

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "deploy" / "monitoring"
ALERTS = MONITORING / "alerts.yaml"
DASHBOARD = MONITORING / "dashboard.json"
SOURCES = (ROOT / "libs", ROOT / "services")

CREATE_KINDS = frozenset(
    {
        "create_counter",
        "create_up_down_counter",
        "create_histogram",
        "create_gauge",
        "create_observable_counter",
        "create_observable_up_down_counter",
        "create_observable_gauge",
    }
)
METRIC_NAME = re.compile(r"\bsundial_[a-z0-9_]+")


@dataclass(frozen=True)
class Instrument:
    name: str
    kind: str
    unit: str


@dataclass(frozen=True)
class _Wrapper:
    """A function that creates an instrument named by one of its parameters."""

    kind: str
    unit: str
    param_index: int


def _sources() -> Iterator[ast.Module]:
    for root in SOURCES:
        for path in sorted(root.rglob("*.py")):
            if "_pb2" in path.name or ".venv" in path.parts:
                continue
            yield ast.parse(path.read_text(), filename=str(path))


def _string_constants(modules: list[ast.Module]) -> dict[str, str]:
    """Module-level ``NAME = "sundial...."`` assignments, by NAME."""
    found: dict[str, str] = {}
    for module in modules:
        for node in module.body:
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
            ):
                found[node.targets[0].id] = node.value.value
    return found


def _called_name(call: ast.Call) -> str:
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    if isinstance(call.func, ast.Name):
        return call.func.id
    return ""


def _unit(call: ast.Call) -> str:
    for keyword in call.keywords:
        if keyword.arg == "unit":
            assert isinstance(keyword.value, ast.Constant), ast.unparse(call)
            return str(keyword.value.value)
    return ""


def _name_arg(call: ast.Call, index: int) -> ast.expr:
    if len(call.args) > index:
        return call.args[index]
    for keyword in call.keywords:
        if keyword.arg == "name":
            return keyword.value
    raise AssertionError(f"no instrument name in {ast.unparse(call)}")


def instruments_in_source() -> set[Instrument]:
    """Every instrument the code creates, with its kind and unit."""
    modules = list(_sources())
    constants = _string_constants(modules)

    def resolve(node: ast.expr, where: ast.Call) -> str:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name) and node.id in constants:
            return constants[node.id]
        raise AssertionError(f"cannot resolve the instrument name in {ast.unparse(where)}")

    found: set[Instrument] = set()
    wrappers: dict[str, _Wrapper] = {}
    for module in modules:
        for func in ast.walk(module):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            params = [a.arg for a in func.args.posonlyargs + func.args.args]
            for call in ast.walk(func):
                if not isinstance(call, ast.Call) or _called_name(call) not in CREATE_KINDS:
                    continue
                kind, arg = _called_name(call), _name_arg(call, 0)
                if isinstance(arg, ast.Name) and arg.id in params:
                    wrappers[func.name] = _Wrapper(kind, _unit(call), params.index(arg.id))
                else:
                    found.add(Instrument(resolve(arg, call), kind, _unit(call)))
    for module in modules:
        for call in ast.walk(module):
            if isinstance(call, ast.Call) and _called_name(call) in wrappers:
                wrapper = wrappers[_called_name(call)]
                arg = _name_arg(call, wrapper.param_index)
                found.add(Instrument(resolve(arg, call), wrapper.kind, wrapper.unit))
    return found


def scrape_names(instruments: set[Instrument]) -> set[str]:
    """The sample names the OpenTelemetry Prometheus exporter serves for these."""
    registry = CollectorRegistry()
    reader = PrometheusMetricReader(disable_target_info=True, registry=registry)
    provider = MeterProvider(metric_readers=[reader])
    meter = provider.get_meter("test_monitoring")

    def one(_options: CallbackOptions) -> list[Observation]:
        return [Observation(1)]

    for instrument in instruments:
        name, unit = instrument.name, instrument.unit
        match instrument.kind:
            case "create_counter":
                meter.create_counter(name, unit=unit).add(1)
            case "create_up_down_counter":
                meter.create_up_down_counter(name, unit=unit).add(1)
            case "create_histogram":
                meter.create_histogram(name, unit=unit).record(1)
            case "create_gauge":
                meter.create_gauge(name, unit=unit).set(1)
            case "create_observable_counter":
                meter.create_observable_counter(name, callbacks=[one], unit=unit)
            case "create_observable_up_down_counter":
                meter.create_observable_up_down_counter(name, callbacks=[one], unit=unit)
            case "create_observable_gauge":
                meter.create_observable_gauge(name, callbacks=[one], unit=unit)
    try:
        return {sample.name for family in registry.collect() for sample in family.samples}
    finally:
        provider.shutdown()


@pytest.fixture(scope="module")
def exported() -> set[str]:
    instruments = instruments_in_source()
    names = scrape_names(instruments)
    assert len(names) >= len(instruments), (instruments, names)
    return names


def alert_rules() -> list[dict[str, Any]]:
    loaded = yaml.safe_load(ALERTS.read_text())
    rules = [rule for group in loaded["groups"] for rule in group["rules"]]
    assert rules
    return rules


def dashboard_exprs() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    assert exprs
    return exprs


def test_the_source_scan_finds_every_instrument_name_telemetry_declares() -> None:
    """A check on the scan itself: each ``sundial.*`` name constant in
    sundial.core.telemetry is created somewhere, and the scan sees it."""
    telemetry = ast.parse((ROOT / "libs/sundial/core/telemetry.py").read_text())
    declared = {
        value
        for value in _string_constants([telemetry]).values()
        if re.fullmatch(r"sundial(\.[a-z0-9_]+)+", value)
    }
    assert declared
    assert declared <= {i.name for i in instruments_in_source()}


def test_the_exporter_names_as_the_readme_shows_them(exported: set[str]) -> None:
    """The scrape is the exporter's real naming: the names README's table documents."""
    for name in (
        "sundial_runs_completed_total",
        "sundial_dispatch_lateness_seconds_bucket",
        "sundial_run_start_lateness_seconds_count",
        "sundial_target_duration_seconds_sum",
        "sundial_partitions_owned",
        "sundial_executor_free_slots",
        "sundial_build_info",
    ):
        assert name in exported
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Observability", 1)[1].split("\n## ", 1)[0]
    documented = set(METRIC_NAME.findall(section))
    assert documented
    histogram_families = {n.removesuffix("_bucket") for n in exported if n.endswith("_bucket")}
    assert documented <= exported | histogram_families


@pytest.mark.parametrize("source", ["alerts", "dashboard"])
def test_every_expression_names_only_exported_metrics(source: str, exported: set[str]) -> None:
    exprs = [rule["expr"] for rule in alert_rules()] if source == "alerts" else dashboard_exprs()
    named = {name for expr in exprs for name in METRIC_NAME.findall(expr)}
    assert named, "no sundial_ metric in any expression"
    assert named <= exported, f"not exported: {sorted(named - exported)}"


def test_every_alert_has_a_duration_a_severity_a_summary_and_a_runbook() -> None:
    names = []
    for rule in alert_rules():
        names.append(rule["alert"])
        assert re.fullmatch(r"\d+[smh]", str(rule.get("for", ""))), rule["alert"]
        assert rule.get("labels", {}).get("severity") in {"critical", "warning", "info"}
        annotations = rule.get("annotations", {})
        for key in ("summary", "description", "runbook"):
            assert str(annotations.get(key, "")).strip(), (rule["alert"], key)
    assert len(names) == len(set(names))


def test_the_alerts_cover_what_an_operator_must_be_woken_for() -> None:
    exprs = " ".join(rule["expr"] for rule in alert_rules())
    for needle in (
        'outcome="dead"',
        "sundial_dispatch_lateness_seconds_bucket",
        "sundial_run_start_lateness_seconds_bucket",
        "sundial_executor_free_slots",
        f"sum(sundial_partitions_owned) or vector(0)) < {PARTITION_COUNT}",
        "up{",
    ):
        assert needle in exprs


def test_the_dashboard_queries_through_the_datasource_variable() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["schemaVersion"] >= 36
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}", panel["title"]


def test_promtool_accepts_the_rules() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed; the rules are checked by the tests above only")
    result = subprocess.run(
        [promtool, "check", "rules", str(ALERTS)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
