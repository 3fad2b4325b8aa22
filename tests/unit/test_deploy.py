"""deploy/: the Kubernetes package as `kubectl kustomize` renders each overlay, and the image.

Checks that the rendered objects hang together (selectors, ports, probes, budgets, spread),
match the services' configuration, pass the Pod Security "restricted" profile, use only
documented Secrets, and that their NetworkPolicies let through exactly the traffic the
design allows (an evaluator of the NetworkPolicy rules the package uses). Schema validity
of every object is `deploy/check.sh` (`make deploy-check`, run by CI).

Rendering needs kubectl: without it these tests skip locally, and fail under CI.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml
from google.protobuf import json_format

from sundial.api.config import ApiConfig
from sundial.core import wire
from sundial.core.config import DatabaseConfig, describe
from sundial.core.egress import Protocol, judge
from sundial.core.netpolicy import AddressPolicy
from sundial.executor.config import ExecutorConfig
from sundial.scheduler.config import SchedulerConfig
from sundial.v1 import egress_pb2

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "k8s"
OVERLAYS = sorted(p.name for p in (DEPLOY / "overlays").iterdir() if p.is_dir())
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
NAMESPACE = "sundial"
UID = 10001
CONFIGS: dict[str, type] = {
    "sundial-api": ApiConfig,
    "sundial-scheduler": SchedulerConfig,
    "sundial-executor": ExecutorConfig,
    "sundial-migrate": DatabaseConfig,
}
TLS_KEYS = frozenset({"tls.crt", "tls.key"})
METRICS_PORT = 9464
# Set by the package ahead of the services: the Prometheus endpoint (issue 13) will read
# it. Until then the services ignore it (sundial.core.config.load reads only the
# variables a config declares; test_the_services_load_the_environment_they_are_given
# starts each config from the manifests' environment, so a stricter loader would fail
# there first).
AHEAD_OF_THE_SERVICES = frozenset({"SUNDIAL_METRICS_LISTEN"})


def _render(overlay: str) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        message = "kubectl is not installed: it renders deploy/k8s (Debian package kubectl)"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message, allow_module_level=True)
    rendered = subprocess.run(
        [kubectl, "kustomize", str(DEPLOY / "overlays" / overlay)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert rendered.returncode == 0, f"kubectl kustomize {overlay}: {rendered.stderr}"
    docs = [d for d in yaml.safe_load_all(rendered.stdout) if d is not None]
    assert all(isinstance(d, dict) for d in docs)
    return docs


RENDERED = {overlay: _render(overlay) for overlay in OVERLAYS}


@dataclass(frozen=True)
class Package:
    """One overlay's rendered objects, by kind and name."""

    docs: list[dict[str, Any]]

    def of(self, kind: str) -> dict[str, dict[str, Any]]:
        return {d["metadata"]["name"]: d for d in self.docs if d["kind"] == kind}

    @property
    def workloads(self) -> dict[str, dict[str, Any]]:
        """Deployments and Jobs: everything that runs pods."""
        return self.of("Deployment") | self.of("Job")

    def pods(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """(workload name, pod template) for every workload."""
        for name, workload in self.workloads.items():
            yield name, workload["spec"]["template"]

    def containers(self) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
        """(workload name, pod spec, container) for every container, init ones too."""
        for name, template in self.pods():
            pod = template["spec"]
            for container in pod.get("initContainers", []) + pod["containers"]:
                yield name, pod, container

    def container(self, workload: str) -> dict[str, Any]:
        [container] = self.workloads[workload]["spec"]["template"]["spec"]["containers"]
        return container

    def env_value(self, entry: dict[str, Any]) -> str | None:
        """A variable's value, looked up in the package's ConfigMaps if it comes from one."""
        ref = entry.get("valueFrom", {}).get("configMapKeyRef")
        if ref:
            return str(self.of("ConfigMap")[ref["name"]]["data"][ref["key"]])
        return entry.get("value")

    def env(self, workload: str) -> dict[str, dict[str, Any]]:
        return {e["name"]: e for e in self.container(workload).get("env", [])}


PACKAGES = {overlay: Package(docs) for overlay, docs in RENDERED.items()}
PRODUCTION = PACKAGES["production"]
SERVICES = ("sundial-api", "sundial-scheduler", "sundial-executor")


def _workloads(kind: str | None = None) -> list[tuple[str, str]]:
    return [
        (overlay, name)
        for overlay, package in PACKAGES.items()
        for name, w in package.workloads.items()
        if kind is None or w["kind"] == kind
    ]


def _selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A label selector (matchLabels and matchExpressions) against a set of labels."""
    assert set(selector) <= {"matchLabels", "matchExpressions"}, selector
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        key, operator, values = expression["key"], expression["operator"], expression.get("values")
        if operator == "In":
            ok = labels.get(key) in values
        elif operator == "NotIn":
            ok = labels.get(key) not in values
        else:
            assert operator in ("Exists", "DoesNotExist"), operator
            ok = (key in labels) == (operator == "Exists")
        if not ok:
            return False
    return True


def _pod_labels(package: Package, workload: str) -> dict[str, str]:
    return dict(package.workloads[workload]["spec"]["template"]["metadata"]["labels"])


# --- The package hangs together ------------------------------------------------------------


def test_every_overlay_renders() -> None:
    assert {"dev", "production"} <= set(OVERLAYS)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_object_is_named_once_in_the_namespace(overlay: str) -> None:
    docs = RENDERED[overlay]
    kinds = {d["kind"] for d in docs}
    assert {"Deployment", "Service", "NetworkPolicy", "ConfigMap", "PodDisruptionBudget"} <= kinds
    seen = set()
    for doc in docs:
        assert doc.get("apiVersion") and doc.get("kind"), doc
        key = (doc["kind"], doc["metadata"]["name"])
        assert key not in seen, f"{key} defined twice"
        seen.add(key)
        assert doc["metadata"].get("namespace") == NAMESPACE, key
    assert "Secret" not in kinds, "Secrets are created, never committed (see examples/)"
    assert set(PACKAGES[overlay].of("Deployment")) == set(SERVICES)


def test_production_migrates_in_a_job_and_dev_on_start() -> None:
    job = PRODUCTION.of("Job")["sundial-migrate"]
    [container] = job["spec"]["template"]["spec"]["containers"]
    assert container["command"][:2] == ["sundial", "migrate"]
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    for name in ("sundial-api", "sundial-scheduler"):
        assert PRODUCTION.env_value(PRODUCTION.env(name)["SUNDIAL_MIGRATE_ON_START"]) == "false"
        config = CONFIGS[name].from_env(environ=_environment(PRODUCTION, name))  # type: ignore[attr-defined]
        assert config.migrate_on_start is False
    dev = PACKAGES["dev"]
    assert not dev.of("Job"), "dev keeps migrations on start"
    for name in ("sundial-api", "sundial-scheduler"):
        assert "SUNDIAL_MIGRATE_ON_START" not in dev.env(name)  # the default: on


def test_what_is_applied_first_is_all_the_migrations_job_needs() -> None:
    # deploy/k8s/README.md: `kubectl apply -l sundial.io/phase=migrate`, wait, then all.
    first = Package([
        d for d in PRODUCTION.docs
        if d["metadata"].get("labels", {}).get("sundial.io/phase") == "migrate"
    ])  # fmt: skip
    assert set(first.workloads) == {"sundial-migrate"}, "only the Job runs before the services"
    for name in _references(first):
        if name in PRODUCTION.of("ConfigMap"):  # made by the package, not by the operator
            assert name in first.of("ConfigMap"), f"the Job reads {name}: it must go first"
    # On an upgrade the default deny already holds: the Job's own allowance goes with it.
    labels = _pod_labels(PRODUCTION, "sundial-migrate")
    assert any(
        _selects(p["spec"]["podSelector"], labels)
        and any(_rule_admits(rule, "to", POSTGRES, 5432, "TCP") for rule in p["spec"]["egress"])
        for p in first.of("NetworkPolicy").values()
    )


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_image_is_the_project_version(overlay: str) -> None:
    images = {c["image"] for _, _, c in PACKAGES[overlay].containers()}
    assert images == {f"sundial:{VERSION}"}, "one image, tagged with pyproject's version"


@pytest.mark.parametrize(("overlay", "name"), _workloads())
def test_workload_is_consistent(overlay: str, name: str) -> None:
    package = PACKAGES[overlay]
    workload = package.workloads[name]
    template = workload["spec"]["template"]
    labels = template["metadata"]["labels"]
    if workload["kind"] == "Deployment":
        assert _selects(workload["spec"]["selector"], labels)
    assert labels.get("app") == name
    assert labels.get("app.kubernetes.io/part-of") == "sundial"  # the default deny's selector
    pod = template["spec"]
    assert pod.get("automountServiceAccountToken") is False
    # Service links would add SUNDIAL_API_PORT and the like to what the config reads.
    assert pod.get("enableServiceLinks") is False
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    [container] = pod["containers"]
    assert container["command"][0] == ("sundial" if name == "sundial-migrate" else name)
    mounts = container.get("volumeMounts", [])
    for mount in mounts:
        assert mount["name"] in volumes, mount
        assert "subPath" not in mount, f"{mount}: a renewed file never reaches a subPath"
        if "emptyDir" not in volumes[mount["name"]]:
            assert mount.get("readOnly") is True, mount
    assert {m["name"] for m in mounts} == set(volumes), "a volume nobody mounts"
    for volume in volumes.values():
        if "secret" in volume:
            assert volume["secret"]["defaultMode"] == 0o440, volume
        if "emptyDir" in volume:
            assert volume["emptyDir"].get("sizeLimit"), f"{volume}: bound what it may fill"


@pytest.mark.parametrize(("overlay", "name"), _workloads())
def test_resources_are_requested_and_memory_bounded(overlay: str, name: str) -> None:
    resources = PACKAGES[overlay].container(name)["resources"]
    assert set(resources["requests"]) == {"cpu", "memory"}, name
    # Memory is limited; CPU is not, on purpose (deploy/k8s/README.md, Resources).
    assert set(resources["limits"]) == {"memory"}, name
    assert _bytes(resources["limits"]["memory"]) >= _bytes(resources["requests"]["memory"])


def _bytes(quantity: str) -> int:
    match = re.fullmatch(r"(\d+)([KMG]i)", quantity)
    assert match, f"{quantity}: write memory in Ki, Mi or Gi"
    return int(match[1]) * {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30}[match[2]]


@pytest.mark.parametrize(("overlay", "name"), _workloads("Deployment"))
def test_probes_fit_what_the_port_speaks(overlay: str, name: str) -> None:
    package = PACKAGES[overlay]
    container = package.container(name)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    serves_tls = "SUNDIAL_TLS_CERT_FILE" in package.env(name)
    for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
        probe = container[kind]
        [(how, target)] = [(k, v) for k, v in probe.items() if k in ("tcpSocket", "grpc")]
        port = target["port"]
        assert ports.get(port, port) == ports["grpc"], f"{name} {kind} probes another port"
        # The kubelet's gRPC probe speaks plaintext only: on a TLS port it always fails.
        assert not (serves_tls and how == "grpc"), f"{name}: {kind} gRPC on a TLS port"
    # Startup and liveness must not fail while a service waits for a dependency (health
    # says NOT_SERVING then): a restart would not make the dependency come up sooner.
    assert "tcpSocket" in container["startupProbe"] and "tcpSocket" in container["livenessProbe"]
    if not serves_tls:
        assert "grpc" in container["readinessProbe"], f"{name}: a plaintext port, real health"


@pytest.mark.parametrize(("overlay", "name"), _workloads("Deployment"))
def test_every_deployment_has_a_disruption_budget_and_spreads(overlay: str, name: str) -> None:
    package = PACKAGES[overlay]
    labels = _pod_labels(package, name)
    budgets = [
        b
        for b in package.of("PodDisruptionBudget").values()
        if _selects(b["spec"]["selector"], labels)
    ]
    assert len(budgets) == 1, f"{name}: {len(budgets)} PodDisruptionBudgets"
    # Each budget covers this Deployment's pods and no other's.
    for other in set(package.of("Deployment")) - {name}:
        assert not _selects(budgets[0]["spec"]["selector"], _pod_labels(package, other))
    assert budgets[0]["spec"].get("maxUnavailable") == 1
    pod = package.workloads[name]["spec"]["template"]["spec"]
    spread = {c["topologyKey"]: c for c in pod["topologySpreadConstraints"]}
    assert set(spread) == {"kubernetes.io/hostname", "topology.kubernetes.io/zone"}
    for constraint in spread.values():
        assert _selects(constraint["labelSelector"], labels), constraint
        assert constraint["maxSkew"] == 1
        assert "pod-template-hash" in constraint.get("matchLabelKeys", [])
    # Hard per node (a tainted node is no domain, or it would pin every count to 0).
    assert spread["kubernetes.io/hostname"]["whenUnsatisfiable"] == "DoNotSchedule"
    assert spread["kubernetes.io/hostname"].get("nodeTaintsPolicy") == "Honor"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_service_selects_one_deployment_port(overlay: str) -> None:
    package = PACKAGES[overlay]
    for name, service in package.of("Service").items():
        selector = {"matchLabels": service["spec"]["selector"]}
        selected = [
            d for d in package.of("Deployment") if _selects(selector, _pod_labels(package, d))
        ]
        assert len(selected) == 1, f"Service {name} selects {selected}"
        ports = {
            key
            for p in package.container(selected[0]).get("ports", [])
            for key in (p["containerPort"], p["name"])
        }
        assert {p["targetPort"] for p in service["spec"]["ports"]} <= ports, name
    # The ledger's Service is headless: its name resolves to every scheduler, so each
    # executor balances over all of them (a ClusterIP would pin a connection to one).
    ledger = package.of("Service")["sundial-ledger"]
    assert ledger["spec"]["clusterIP"] == "None"
    host = package.env_value(package.env("sundial-executor")["SUNDIAL_LEDGER_ADDRESS"]) or ""
    assert host.rpartition(":")[0] == "sundial-ledger"


# --- Configuration: the variables are the services' own -----------------------------------


@pytest.mark.parametrize(("overlay", "name"), _workloads())
def test_env_names_are_the_services_config_variables(overlay: str, name: str) -> None:
    known = {setting.env_var for setting in describe(CONFIGS[name])}
    container = PACKAGES[overlay].container(name)
    names = [entry["name"] for entry in container.get("env", [])]
    assert len(names) == len(set(names)), f"{name}: a variable set twice"
    assert not container.get("envFrom"), f"{name}: every variable is named, none from envFrom"
    unknown = sorted(
        n for n in names if n.startswith("SUNDIAL_") and n not in known | AHEAD_OF_THE_SERVICES
    )
    assert not unknown, f"{name} ({CONFIGS[name].__name__}) has no variable {unknown}"


@pytest.mark.parametrize("config", [ApiConfig, SchedulerConfig, ExecutorConfig])
def test_the_metrics_variable_ahead_of_the_services_is_not_spelt_otherwise(config: type) -> None:
    # Once the services read their Prometheus address, it must be under the name the
    # package sets: a service reading another name would leave the package's ignored.
    for setting in describe(config):
        if re.search(r"METRICS_(LISTEN|ADDRESS|PORT)|PROMETHEUS", setting.env_var):
            assert setting.env_var in AHEAD_OF_THE_SERVICES, setting.env_var


# A Secret's value as its service parses it (a user name, a key-encryption key list).
_PLACEHOLDERS = {"user": "sundial", "keys": "k1:" + "A" * 43 + "="}


def _environment(package: Package, name: str) -> dict[str, str]:
    """The environment a container gets, Secret values replaced by placeholders."""
    environ = {}
    for entry in package.container(name).get("env", []):
        source = entry.get("valueFrom", {})
        if "secretKeyRef" in source:
            key = source["secretKeyRef"]["key"]
            environ[entry["name"]] = _PLACEHOLDERS.get(key, "placeholder-" + "x" * 24)
        elif "fieldRef" in source:
            environ[entry["name"]] = f"{name}-5d8f7c9b4-x2x7q"
        else:
            environ[entry["name"]] = package.env_value(entry) or ""
    return environ


@pytest.mark.parametrize(("overlay", "name"), _workloads())
def test_the_services_load_the_environment_they_are_given(overlay: str, name: str) -> None:
    # Every value parses and validates, variables set ahead of the services included.
    environ = _environment(PACKAGES[overlay], name)
    assert set(environ) >= AHEAD_OF_THE_SERVICES or name == "sundial-migrate"
    CONFIGS[name].from_env(environ=environ)  # type: ignore[attr-defined]


@pytest.mark.parametrize(("overlay", "name"), _workloads("Deployment"))
def test_every_service_serves_metrics_on_its_named_port(overlay: str, name: str) -> None:
    package = PACKAGES[overlay]
    ports = {p["name"]: p["containerPort"] for p in package.container(name)["ports"]}
    assert ports["metrics"] == METRICS_PORT
    listen = package.env_value(package.env(name)["SUNDIAL_METRICS_LISTEN"]) or ""
    assert listen == f"0.0.0.0:{METRICS_PORT}"


def test_the_pod_monitor_scrapes_every_service_and_nothing_else() -> None:
    [monitor] = PRODUCTION.of("PodMonitor").values()
    scraped = {
        name
        for name in PRODUCTION.workloads
        if _selects(monitor["spec"]["selector"], _pod_labels(PRODUCTION, name))
    }
    assert scraped == set(SERVICES)
    [endpoint] = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["port"] == "metrics" and endpoint["path"] == "/metrics"
    assert not PACKAGES["dev"].of("PodMonitor"), "dev needs no Prometheus Operator CRDs"


def _file_paths(package: Package, container: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(variable, path) for every file a container is told to read."""
    for entry in container.get("env", []):
        value = package.env_value(entry) or ""
        if entry["name"].endswith("_FILE"):
            yield entry["name"], value
        if entry["name"] == "SUNDIAL_DATABASE_URL":
            for path in parse_qs(urlsplit(value).query).get("sslrootcert", []):
                yield entry["name"], path


@pytest.mark.parametrize("name", ["sundial-api", "sundial-scheduler", "sundial-migrate"])
def test_database_url_verifies_the_server_and_holds_no_password(name: str) -> None:
    env = PRODUCTION.env(name)
    dsn = urlsplit(PRODUCTION.env_value(env["SUNDIAL_DATABASE_URL"]) or "")
    assert parse_qs(dsn.query)["sslmode"] == ["verify-full"]
    assert dsn.password is None, "the password comes from SUNDIAL_DATABASE_PASSWORD"
    assert "secretKeyRef" in env["SUNDIAL_DATABASE_PASSWORD"]["valueFrom"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_credentials_come_from_secrets(overlay: str) -> None:
    for workload, _, container in PACKAGES[overlay].containers():
        for entry in container.get("env", []):
            if re.search(r"(TOKEN|PASSWORD|USER)$", entry["name"]):
                assert "secretKeyRef" in entry.get("valueFrom", {}), (workload, entry["name"])


@pytest.mark.parametrize(("workload", "variable", "path"), [
    (name, variable, path)
    for name, _, container in PRODUCTION.containers()
    for variable, path in _file_paths(PRODUCTION, container)
])  # fmt: skip
def test_every_file_a_service_reads_is_mounted(workload: str, variable: str, path: str) -> None:
    pod = PRODUCTION.workloads[workload]["spec"]["template"]["spec"]
    directory, _, file = path.rpartition("/")
    provided = _mounted_keys(pod, PRODUCTION.container(workload))
    assert directory in provided, f"{workload}: {variable}={path} is not in any mount"
    assert file in provided[directory], f"{workload}: {variable}: no {file} in {directory}"


def _mounted_keys(pod: dict[str, Any], container: dict[str, Any]) -> dict[str, set[str]]:
    """Mount path -> the file names a mounted Secret or ConfigMap provides."""
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    documented = _documented()
    found: dict[str, set[str]] = {}
    for mount in container.get("volumeMounts", []):
        volume = volumes[mount["name"]]
        source = volume.get("secret") or volume.get("configMap") or {}
        name = str(source.get("secretName") or source.get("name"))
        keys = documented.get(name, set())
        if source.get("items"):
            assert {i["key"] for i in source["items"]} <= keys, source
            keys = {i["path"] for i in source["items"]}
        found[mount["mountPath"]] = keys
    return found


# --- Secrets and ConfigMaps: referenced == documented == examples -------------------------


def _readme_creates() -> dict[str, set[str]]:
    """Name -> keys of every Secret and ConfigMap deploy/k8s/README.md creates."""
    text = (DEPLOY / "README.md").read_text().replace("\\\n", " ")
    made: dict[str, set[str]] = {}
    for match in re.finditer(
        r"kubectl create (secret generic|secret tls|configmap) (\S+)(.*)", text
    ):
        kind, name, args = match.groups()
        keys = set(re.findall(r"--from-(?:literal|file)=([\w.-]+)=", args))
        made[name] = set(TLS_KEYS) | keys if kind == "secret tls" else keys
    return made


EXAMPLES = [d for d in yaml.safe_load_all((DEPLOY / "examples" / "secrets.yaml").read_text()) if d]


def _examples() -> dict[str, set[str]]:
    return {d["metadata"]["name"]: set(d.get("stringData") or d.get("data")) for d in EXAMPLES}


def _documented() -> dict[str, set[str]]:
    """What README creates, plus the ConfigMaps the package generates itself."""
    made = _readme_creates()
    for name, config in PRODUCTION.of("ConfigMap").items():
        made[name] = set(config["data"])
    return made


def _references(package: Package) -> dict[str, set[str]]:
    """Name -> keys of every Secret and ConfigMap the workloads use."""
    used: dict[str, set[str]] = {}
    for _, pod, container in package.containers():
        for entry in container.get("env", []):
            source = entry.get("valueFrom", {})
            ref = source.get("secretKeyRef") or source.get("configMapKeyRef")
            if ref:
                used.setdefault(ref["name"], set()).add(ref["key"])
        for volume in pod.get("volumes", []):
            if "secret" in volume:
                used.setdefault(volume["secret"]["secretName"], set()).update(TLS_KEYS)
            if "configMap" in volume:
                items = volume["configMap"].get("items")
                keys = {i["key"] for i in items} if items else set()
                used.setdefault(volume["configMap"]["name"], set()).update(keys)
    return used


def test_every_secret_and_key_used_is_documented_and_none_else() -> None:
    documented = _documented()
    references = _references(PRODUCTION)
    for name, keys in references.items():
        assert name in documented, f"{name} is used but deploy/k8s/README.md never creates it"
        assert keys <= documented[name], f"{name}: keys {keys - documented[name]} undocumented"
    assert set(documented) == set(references), "documented but unused"
    secret_volumes = {
        v["secret"]["secretName"]
        for _, template in PRODUCTION.pods()
        for v in template["spec"].get("volumes", [])
        if "secret" in v
    }
    assert secret_volumes == _readme_tls(), "mounted secrets are kubernetes.io/tls ones"
    # dev uses a subset of the same objects.
    for name, keys in _references(PACKAGES["dev"]).items():
        assert name in references or name.startswith("sundial-config"), name
        assert keys <= documented.get(name, keys), name


def test_the_examples_are_what_the_readme_creates_and_hold_no_value() -> None:
    assert _examples() == _readme_creates()
    for doc in EXAMPLES:
        kind = "kubernetes.io/tls" if doc["metadata"]["name"] in _readme_tls() else "Opaque"
        if doc["kind"] == "Secret":
            assert doc["type"] == kind, doc["metadata"]["name"]
        for key, value in (doc.get("stringData") or doc.get("data")).items():
            # Users may be named; every secret value is the placeholder.
            assert value == "REPLACE-ME" or key == "user", (doc["metadata"]["name"], key)


def _readme_tls() -> set[str]:
    """The Secrets deploy/k8s/README.md creates as kubernetes.io/tls."""
    return set(re.findall(r"kubectl create secret tls (\S+)", (DEPLOY / "README.md").read_text()))


# --- Pod Security "restricted" --------------------------------------------------------------

# https://kubernetes.io/docs/concepts/security/pod-security-standards/ (baseline and
# restricted, latest version).
_BASELINE_CAPABILITIES = frozenset({
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
    "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
})  # fmt: skip
_SAFE_SYSCTLS = frozenset({
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
})  # fmt: skip
_RESTRICTED_VOLUMES = frozenset({
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
    "projected", "secret",
})  # fmt: skip
_SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t",
                            "container_engine_t"})  # fmt: skip


def restricted_violations(template: Mapping[str, Any]) -> list[str]:
    """What in a pod template the Pod Security "restricted" profile refuses (empty: none)."""
    pod = template["spec"]
    pod_sc = pod.get("securityContext", {})
    containers = (
        pod.get("initContainers", []) + pod["containers"] + pod.get("ephemeralContainers", [])
    )
    found = []
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(key):
            found.append(f"{key}")
    for sysctl in pod_sc.get("sysctls", []):
        if sysctl["name"] not in _SAFE_SYSCTLS:
            found.append(f"sysctl {sysctl['name']}")
    for volume in pod.get("volumes", []):
        kinds = set(volume) - {"name"}
        if not kinds <= _RESTRICTED_VOLUMES:
            found.append(f"volume {volume['name']}: {sorted(kinds)}")
    annotations = template.get("metadata", {}).get("annotations", {})
    for key, value in annotations.items():
        if key.startswith("container.apparmor.security.beta.kubernetes.io/") and not (
            value == "runtime/default" or value.startswith("localhost/")
        ):
            found.append(f"AppArmor {key}={value}")
    for where, sc in [("pod", pod_sc)] + [
        (c["name"], c.get("securityContext", {})) for c in containers
    ]:
        if sc.get("windowsOptions", {}).get("hostProcess"):
            found.append(f"{where}: hostProcess")
        if sc.get("seLinuxOptions", {}).get("type", "") not in _SELINUX_TYPES:
            found.append(f"{where}: SELinux type")
        if sc.get("seLinuxOptions", {}).get("user") or sc.get("seLinuxOptions", {}).get("role"):
            found.append(f"{where}: SELinux user/role")
        if sc.get("appArmorProfile", {}).get("type", "RuntimeDefault") not in (
            "RuntimeDefault",
            "Localhost",
        ):
            found.append(f"{where}: AppArmor profile")
        if sc.get("runAsUser") == 0:
            found.append(f"{where}: runAsUser 0")
        if sc.get("runAsNonRoot") is False:
            found.append(f"{where}: runAsNonRoot false")
        if sc.get("seccompProfile", {}).get("type") == "Unconfined":
            found.append(f"{where}: seccomp Unconfined")
    for container in containers:
        sc = container.get("securityContext", {})
        name = container["name"]
        if sc.get("privileged"):
            found.append(f"{name}: privileged")
        if sc.get("procMount", "Default") != "Default":
            found.append(f"{name}: procMount")
        if any(p.get("hostPort", 0) for p in container.get("ports", [])):
            found.append(f"{name}: hostPort")
        if sc.get("allowPrivilegeEscalation") is not False:
            found.append(f"{name}: allowPrivilegeEscalation must be false")
        if sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is not True:
            found.append(f"{name}: runAsNonRoot must be true")
        seccomp = sc.get("seccompProfile", pod_sc.get("seccompProfile", {})).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            found.append(f"{name}: seccompProfile RuntimeDefault or Localhost")
        capabilities = sc.get("capabilities", {})
        if "ALL" not in capabilities.get("drop", []):
            found.append(f"{name}: capabilities must drop ALL")
        added = set(capabilities.get("add", []))
        if not added <= {"NET_BIND_SERVICE"} or not added <= _BASELINE_CAPABILITIES:
            found.append(f"{name}: adds capabilities {sorted(added)}")
    return found


@pytest.mark.parametrize(("overlay", "name"), _workloads())
def test_every_pod_passes_the_restricted_profile(overlay: str, name: str) -> None:
    template = PACKAGES[overlay].workloads[name]["spec"]["template"]
    assert restricted_violations(template) == []
    pod = template["spec"]
    # The image's numeric user (deploy/Dockerfile): runAsNonRoot is checked by the kubelet
    # against a number, and the secret files (0440, group fsGroup) are readable by it.
    assert pod["securityContext"]["runAsUser"] == UID
    assert pod["securityContext"]["runAsGroup"] == UID
    assert pod["securityContext"]["fsGroup"] == UID
    for container in pod["containers"]:
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert {"/tmp"} <= {m["mountPath"] for m in container["volumeMounts"]}


@pytest.mark.parametrize(
    ("change", "violation"),
    [
        (lambda p: p["spec"]["securityContext"].update(runAsUser=0), "runAsUser 0"),
        (lambda p: p["spec"]["securityContext"].pop("runAsNonRoot"), "runAsNonRoot must be true"),
        (lambda p: p["spec"]["securityContext"].pop("seccompProfile"), "seccompProfile"),
        (lambda p: p["spec"]["containers"][0]["securityContext"].pop("allowPrivilegeEscalation"),
         "allowPrivilegeEscalation"),
        (lambda p: p["spec"]["containers"][0]["securityContext"]["capabilities"].update(drop=[]),
         "drop ALL"),
        (lambda p: p["spec"]["containers"][0]["securityContext"]["capabilities"].update(
            add=["NET_ADMIN"]), "adds capabilities"),
        (lambda p: p["spec"]["containers"][0]["securityContext"].update(privileged=True),
         "privileged"),
        (lambda p: p["spec"].update(hostNetwork=True), "hostNetwork"),
        (lambda p: p["spec"]["volumes"].append({"name": "h", "hostPath": {"path": "/"}}),
         "volume h"),
        (lambda p: p["spec"]["containers"][0]["ports"].append({"containerPort": 1, "hostPort": 1}),
         "hostPort"),
        (lambda p: p["spec"].setdefault("initContainers", []).append(
            {"name": "init", "image": "x"}), "init: allowPrivilegeEscalation"),
    ],
)  # fmt: skip
def test_the_profile_check_refuses_what_the_profile_refuses(change: Any, violation: str) -> None:
    template = yaml.safe_load(
        yaml.safe_dump(PRODUCTION.workloads["sundial-api"]["spec"]["template"])
    )
    assert restricted_violations(template) == []
    change(template)
    assert any(violation in found for found in restricted_violations(template)), violation


# --- The image -----------------------------------------------------------------------------

DOCKERFILE = (ROOT / "deploy" / "Dockerfile").read_text()


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE)
    lines = [line.strip() for line in text.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "")
        for line in lines
        if line and not line.startswith("#")
    ]


def _final_stage() -> list[tuple[str, str]]:
    instructions = _instructions()
    last = max(i for i, (op, _) in enumerate(instructions) if op == "FROM")
    return instructions[last:]


def test_the_image_runs_as_the_numeric_user_the_pods_name() -> None:
    [user] = [args for op, args in _final_stage() if op == "USER"]
    assert user == f"{UID}:{UID}", "a numeric user:group, so runAsNonRoot can be verified"


def test_dependencies_are_installed_before_the_code_is_copied() -> None:
    stage = _final_stage()
    dependencies = next(
        i for i, (op, args) in enumerate(stage) if op == "RUN" and "--requirement" in args
    )
    code = next(i for i, (op, args) in enumerate(stage) if op == "RUN" and "/wheels" in args)
    assert dependencies < code
    # Nothing before the dependency layer depends on the code or on pyproject.toml's other
    # settings: only the extracted list is copied in.
    copied = [args for op, args in stage[:dependencies] if op == "COPY"]
    assert copied == ["--from=requirements /src/requirements.txt /tmp/requirements.txt"]


def test_the_requirements_stage_lists_exactly_the_projects_dependencies(tmp_path: Path) -> None:
    [extract] = [args for op, args in _instructions() if op == "RUN" and "tomllib" in args]
    command, _, target = extract.rpartition(">")
    assert target.strip() == "requirements.txt"
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    argv = shlex.split(command)
    assert argv[0] == "python"
    listed = subprocess.run(
        [sys.executable, *argv[1:]], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout.split("\n")
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert [line for line in listed if line] == pyproject["project"]["dependencies"]


def _segments_match(pattern: list[str], path: list[str]) -> bool:
    if not pattern:
        return not path
    if pattern[0] == "**":  # any number of path segments, none included
        return any(_segments_match(pattern[1:], path[i:]) for i in range(len(path) + 1))
    return (
        bool(path)
        and fnmatch.fnmatchcase(path[0], pattern[0])
        and (_segments_match(pattern[1:], path[1:]))
    )


def _ignored(path: str, patterns: list[str]) -> bool:
    """Docker's .dockerignore rule: the last pattern matching the path or one of its
    parent directories wins; `!` re-includes; `*` stays within one segment, `**` spans
    any number."""
    parts = path.split("/")
    ignored = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        segments = pattern.removeprefix("!").strip("/").split("/")
        if any(_segments_match(segments, parts[: i + 1]) for i in range(len(parts))):
            ignored = not negated
    return ignored


def test_dockerignore_keeps_what_the_dockerfile_copies_and_drops_the_rest() -> None:
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    copied = {
        source
        for op, args in _instructions()
        if op == "COPY" and not args.startswith("--from")
        for source in args.split()[:-1]
    }
    assert copied == {"pyproject.toml", "README.md", "libs", "services"}
    for source in copied:
        assert not _ignored(source, patterns), source
        assert not _ignored(f"{source}/sundial/core/config.py", patterns) or "." in source
    for path in (
        ".git/HEAD",
        ".venv/bin/python",
        "tests/conftest.py",
        "bench/run.py",
        "libs/sundial/core/__pycache__/config.cpython-311.pyc",
        "deploy/Dockerfile",
    ):
        assert _ignored(path, patterns), path


# --- NetworkPolicies ------------------------------------------------------------------------

POLICIES = PRODUCTION.of("NetworkPolicy")
HOME = {"kubernetes.io/metadata.name": NAMESPACE}


@dataclass(frozen=True)
class Pod:
    labels: Mapping[str, str]
    namespace: Mapping[str, str] = field(default_factory=lambda: HOME)


Destination = Pod | str  # a pod, or an IP address outside the cluster


def _pod(workload: str) -> Pod:
    return Pod(_pod_labels(PRODUCTION, workload))


API, SCHEDULER, EXECUTOR = _pod("sundial-api"), _pod("sundial-scheduler"), _pod("sundial-executor")
MIGRATE = _pod("sundial-migrate")
POSTGRES = Pod({"app.kubernetes.io/name": "postgresql"})
NATS = Pod({"app.kubernetes.io/name": "nats"})
ETCD = Pod({"app.kubernetes.io/name": "etcd"})
DNS = Pod({"k8s-app": "kube-dns"}, {"kubernetes.io/metadata.name": "kube-system"})
CLIENT = Pod({"sundial.io/api-client": "true"}, {"kubernetes.io/metadata.name": "billing"})
INGRESS = Pod({"app": "controller"}, {"kubernetes.io/metadata.name": "ingress-nginx"})
PROMETHEUS = Pod(
    {"app.kubernetes.io/name": "prometheus"}, {"kubernetes.io/metadata.name": "monitoring"}
)
GRAFANA = Pod({"app.kubernetes.io/name": "grafana"}, {"kubernetes.io/metadata.name": "monitoring"})
STRANGER = Pod({"app": "other"})
FOREIGN_EXECUTOR = Pod(EXECUTOR.labels, {"kubernetes.io/metadata.name": "elsewhere"})


def _peer_admits(peer: dict[str, Any], other: Destination) -> bool:
    if "ipBlock" in peer:
        if isinstance(other, Pod):
            return False  # pod addresses are private ranges, which every ipBlock excepts
        address = ipaddress.ip_address(other)
        block = peer["ipBlock"]
        inside = address.version == ipaddress.ip_network(block["cidr"]).version and (
            address in ipaddress.ip_network(block["cidr"])
        )
        excepted = any(
            address.version == ipaddress.ip_network(c).version
            and address in ipaddress.ip_network(c)
            for c in block.get("except", [])
        )
        return inside and not excepted
    if not isinstance(other, Pod):
        return False
    if "namespaceSelector" in peer:
        in_namespace = _selects(peer["namespaceSelector"], other.namespace)
    else:
        in_namespace = other.namespace == HOME  # a bare podSelector: the policy's namespace
    return in_namespace and _selects(peer.get("podSelector", {}), other.labels)


def _rule_admits(
    rule: dict[str, Any], peers_key: str, other: Destination, port: int, proto: str
) -> bool:
    ports = rule.get("ports")
    if ports and not any(p.get("protocol", "TCP") == proto and p["port"] == port for p in ports):
        return False
    peers = rule.get(peers_key)
    return peers is None or any(_peer_admits(peer, other) for peer in peers)


def _allowed(
    kind: str,
    pod: Pod,
    other: Destination,
    port: int,
    proto: str,
    *,
    policies: Mapping[str, dict[str, Any]] = POLICIES,
) -> bool:
    """Whether ``pod``'s policies of ``kind`` (Ingress/Egress) let ``other`` through."""
    if pod.namespace != HOME:
        return True  # the package's policies hold only in their namespace
    selecting = [
        p["spec"] for p in policies.values()
        if kind in p["spec"]["policyTypes"] and _selects(p["spec"]["podSelector"], pod.labels)
    ]  # fmt: skip
    if not selecting:
        return True
    key, peers_key = ("ingress", "from") if kind == "Ingress" else ("egress", "to")
    return any(
        _rule_admits(rule, peers_key, other, port, proto)
        for spec in selecting
        for rule in spec.get(key, [])
    )


def connects(
    source: Pod,
    destination: Destination,
    port: int,
    proto: str = "TCP",
    *,
    policies: Mapping[str, dict[str, Any]] = POLICIES,
) -> bool:
    """Kubernetes' rule: the source's egress and the destination's ingress both allow it."""
    out = _allowed("Egress", source, destination, port, proto, policies=policies)
    into = not isinstance(destination, Pod) or _allowed(
        "Ingress", destination, source, port, proto, policies=policies
    )
    return out and into


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_policy_selects_a_workload_and_names_ports(overlay: str) -> None:
    package = PACKAGES[overlay]
    for name, policy in package.of("NetworkPolicy").items():
        spec = policy["spec"]
        assert spec.get("policyTypes"), f"{name}: say which directions it governs"
        for rule in spec.get("ingress", []) + spec.get("egress", []):
            peers = rule.get("from", rule.get("to", []))
            # Only the rules for targets and channels (address blocks) are open on every port.
            if not peers or not all("ipBlock" in peer for peer in peers):
                assert rule.get("ports"), f"{name}: a rule to pods on every port: {rule}"
        assert any(
            _selects(spec["podSelector"], _pod_labels(package, w)) for w in package.workloads
        ), f"NetworkPolicy {name} selects no Sundial pod"
    extra = package.of("NetworkPolicy").keys() - POLICIES.keys()
    assert extra <= MESH_ONLY.get(overlay, set()), f"{overlay} allows more: {extra}"


# The one policy an overlay adds to production's: the mesh overlay's executor egress to
# the cluster's range (components/mesh-egress).
MESH_ONLY = {"mesh": {"sundial-executor-mesh"}}


ALLOWED = [
    ("client -> api", CLIENT, API, 50051),
    ("ingress controller -> api", INGRESS, API, 50051),
    ("executor -> ledger", EXECUTOR, SCHEDULER, 50051),
    ("api -> postgresql", API, POSTGRES, 5432),
    ("scheduler -> postgresql", SCHEDULER, POSTGRES, 5432),
    ("migrations -> postgresql", MIGRATE, POSTGRES, 5432),
    ("scheduler -> nats", SCHEDULER, NATS, 4222),
    ("executor -> nats", EXECUTOR, NATS, 4222),
    ("scheduler -> etcd", SCHEDULER, ETCD, 2379),
    ("api -> etcd", API, ETCD, 2379),
    ("executor -> public target", EXECUTOR, "203.0.113.10", 443),
    ("executor -> public target, other port", EXECUTOR, "198.51.100.7", 8443),
    ("executor -> public IPv6 target", EXECUTOR, "2001:db8::1", 443),
    ("api (notifier) -> public notification channel", API, "203.0.113.10", 443),
    ("api (notifier) -> public channel, other port", API, "198.51.100.7", 8443),
    ("prometheus -> api metrics", PROMETHEUS, API, METRICS_PORT),
    ("prometheus -> scheduler metrics", PROMETHEUS, SCHEDULER, METRICS_PORT),
    ("prometheus -> executor metrics", PROMETHEUS, EXECUTOR, METRICS_PORT),
]
DENIED = [
    ("api -> ledger", API, SCHEDULER, 50051),
    ("scheduler -> ledger", SCHEDULER, SCHEDULER, 50051),
    ("stranger -> ledger", STRANGER, SCHEDULER, 50051),
    ("client -> ledger", CLIENT, SCHEDULER, 50051),
    ("executor of another namespace -> ledger", FOREIGN_EXECUTOR, SCHEDULER, 50051),
    ("executor -> ledger, other port", EXECUTOR, SCHEDULER, 5432),
    ("stranger -> api", STRANGER, API, 50051),
    ("client -> executor", CLIENT, EXECUTOR, 50051),
    ("scheduler -> executor", SCHEDULER, EXECUTOR, 50051),
    ("executor -> postgresql", EXECUTOR, POSTGRES, 5432),
    ("executor -> etcd", EXECUTOR, ETCD, 2379),
    ("api -> nats", API, NATS, 4222),
    ("api -> postgresql, other port", API, POSTGRES, 5433),
    ("api -> cloud metadata", API, "169.254.169.254", 80),
    ("api -> private 10/8", API, "10.0.0.5", 443),
    ("api -> stranger pod", API, STRANGER, 8080),
    ("scheduler -> public address", SCHEDULER, "203.0.113.10", 443),
    ("migrations -> nats", MIGRATE, NATS, 4222),
    ("migrations -> etcd", MIGRATE, ETCD, 2379),
    ("migrations -> ledger", MIGRATE, SCHEDULER, 50051),
    ("migrations -> public address", MIGRATE, "203.0.113.10", 443),
    ("executor -> cloud metadata", EXECUTOR, "169.254.169.254", 80),
    ("executor -> private 10/8", EXECUTOR, "10.0.0.5", 80),
    ("executor -> private 172.16/12", EXECUTOR, "172.20.1.1", 443),
    ("executor -> private 192.168/16", EXECUTOR, "192.168.1.1", 443),
    ("executor -> shared 100.64/10", EXECUTOR, "100.64.0.1", 443),
    ("executor -> IPv6 unique local", EXECUTOR, "fd00::1", 443),
    ("executor -> IPv6 link-local", EXECUTOR, "fe80::1", 443),
    ("executor -> stranger pod", EXECUTOR, STRANGER, 8080),
    ("prometheus -> api grpc", PROMETHEUS, API, 50051),
    ("prometheus -> ledger", PROMETHEUS, SCHEDULER, 50051),
    ("other monitoring pod -> metrics", GRAFANA, API, METRICS_PORT),
    ("stranger -> metrics", STRANGER, SCHEDULER, METRICS_PORT),
    ("client -> metrics", CLIENT, API, METRICS_PORT),
]


@pytest.mark.parametrize(
    ("what", "source", "destination", "port"), ALLOWED, ids=[a[0] for a in ALLOWED]
)
def test_allowed_traffic(what: str, source: Pod, destination: Destination, port: int) -> None:
    assert connects(source, destination, port), what


@pytest.mark.parametrize(
    ("what", "source", "destination", "port"), DENIED, ids=[d[0] for d in DENIED]
)
def test_denied_traffic(what: str, source: Pod, destination: Destination, port: int) -> None:
    assert not connects(source, destination, port), what


@pytest.mark.parametrize(
    "pod", [API, SCHEDULER, EXECUTOR, MIGRATE], ids=["api", "scheduler", "executor", "migrate"]
)
def test_every_sundial_pod_resolves_names(pod: Pod) -> None:
    assert connects(pod, DNS, 53, "UDP") and connects(pod, DNS, 53, "TCP")
    assert not connects(pod, DNS, 80)


MESH = PACKAGES["mesh"].of("NetworkPolicy")


@pytest.mark.parametrize(
    ("what", "source", "destination", "port", "allowed"),
    [
        ("executor -> in-cluster service", EXECUTOR, "10.96.12.7", 8080, True),
        ("executor -> in-cluster pod", EXECUTOR, "10.244.1.9", 50051, True),
        ("executor -> public target", EXECUTOR, "203.0.113.10", 443, True),
        ("executor -> cloud metadata", EXECUTOR, "169.254.169.254", 80, False),
        ("executor -> private 192.168/16", EXECUTOR, "192.168.1.1", 443, False),
        ("api -> in-cluster service", API, "10.96.12.7", 8080, False),
        ("scheduler -> in-cluster service", SCHEDULER, "10.96.12.7", 8080, False),
    ],
)
def test_the_mesh_overlay_opens_the_cluster_range_to_executors_only(
    what: str, source: Pod, destination: Destination, port: int, allowed: bool
) -> None:
    assert connects(source, destination, port, policies=MESH) is allowed, what


def test_the_mesh_egress_policy_is_what_the_issue_asks_for_one_tenant() -> None:
    """components/mesh-egress/egress-policy.json, read as `sundial admin egress set
    --file` reads it: *.svc.cluster.local and the cluster range, whatever the protocol;
    metadata stays out; the NetworkPolicy opens the same range."""
    text = (DEPLOY / "components" / "mesh-egress" / "egress-policy.json").read_text()
    policy = wire.egress_policy_in(json_format.Parse(text, egress_pb2.EgressPolicy()), "file")
    operator = AddressPolicy()
    for protocol in Protocol:
        for host, address in (
            ("billing.payments.svc.cluster.local", "10.96.3.4"),
            ("10.244.1.9", "10.244.1.9"),
        ):
            assert judge(operator, policy, protocol, host, ipaddress.ip_address(address)) is None
        meta = ipaddress.ip_address("169.254.169.254")
        assert judge(operator, policy, protocol, "x.svc.cluster.local", meta) is not None
    [cidr] = [str(r.network) for r in policy.rules if r.network is not None]
    [rule] = MESH["sundial-executor-mesh"]["spec"]["egress"]
    assert [peer["ipBlock"]["cidr"] for peer in rule["to"]] == [cidr]
