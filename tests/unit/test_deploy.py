"""deploy/k8s: the manifests parse, hang together, match the services' configuration, use
only documented Secrets, and their NetworkPolicies let through exactly the traffic the
design allows (an evaluator of the NetworkPolicy rules the manifests use)."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

from sundial.api.config import ApiConfig
from sundial.core.config import describe
from sundial.executor.config import ExecutorConfig
from sundial.scheduler.config import SchedulerConfig

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "k8s"
CONFIGS = {
    "sundial-api": ApiConfig,
    "sundial-scheduler": SchedulerConfig,
    "sundial-executor": ExecutorConfig,
}
TLS_KEYS = frozenset({"tls.crt", "tls.key"})


def _load() -> list[dict[str, Any]]:
    docs = []
    for path in sorted(DEPLOY.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            assert isinstance(doc, dict), f"{path.name}: a document that is not a mapping"
            docs.append(doc)
    return docs


DOCS = _load()


def _of(kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in DOCS if d["kind"] == kind}


DEPLOYMENTS = _of("Deployment")
POLICIES = _of("NetworkPolicy")


def _containers() -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(deployment name, pod spec, container) for every container."""
    for name, deployment in DEPLOYMENTS.items():
        pod = deployment["spec"]["template"]["spec"]
        for container in pod["containers"]:
            yield name, pod, container


def _matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    # The manifests use matchLabels only, so this is the whole selector semantics.
    assert set(selector) <= {"matchLabels"}, f"unsupported selector {selector}"
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def test_every_document_is_a_named_object_once() -> None:
    assert {"Deployment", "Service", "NetworkPolicy", "ConfigMap"} <= {d["kind"] for d in DOCS}
    seen = set()
    for doc in DOCS:
        assert doc.get("apiVersion") and doc.get("kind"), doc
        key = (doc["kind"], doc["metadata"]["name"])
        assert key not in seen, f"{key} defined twice"
        seen.add(key)
    assert "Secret" not in {d["kind"] for d in DOCS}, "Secrets are created, never committed"


@pytest.mark.parametrize("name", sorted(DEPLOYMENTS))
def test_deployment_is_consistent(name: str) -> None:
    spec = DEPLOYMENTS[name]["spec"]
    labels = spec["template"]["metadata"]["labels"]
    assert _matches(spec["selector"], labels)
    assert labels.get("app.kubernetes.io/part-of") == "sundial"  # the default deny's selector
    pod = spec["template"]["spec"]
    assert pod.get("automountServiceAccountToken") is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    [container] = pod["containers"]
    assert container["command"][0] == name
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    mounts = container.get("volumeMounts", [])
    for mount in mounts:
        assert mount["name"] in volumes, mount
        assert mount.get("readOnly") is True and "subPath" not in mount, mount
    assert {m["name"] for m in mounts} == set(volumes), "a volume nobody mounts"
    for volume in volumes.values():
        if "secret" in volume:
            assert volume["secret"]["defaultMode"] == 0o440, volume


@pytest.mark.parametrize("name", sorted(DEPLOYMENTS))
def test_env_names_are_the_services_config_variables(name: str) -> None:
    known = {setting.env_var for setting in describe(CONFIGS[name])}
    [container] = DEPLOYMENTS[name]["spec"]["template"]["spec"]["containers"]
    names = [entry["name"] for entry in container.get("env", [])]
    assert len(names) == len(set(names)), f"{name}: a variable set twice"
    assert not container.get("envFrom"), f"{name}: every variable is named, none from envFrom"
    unknown = sorted(n for n in names if n.startswith("SUNDIAL_") and n not in known)
    assert not unknown, f"{name} ({CONFIGS[name].__name__}) has no variable {unknown}"


def _mounted_keys(pod: dict[str, Any], container: dict[str, Any]) -> dict[str, set[str]]:
    """Mount path -> the file names a mounted Secret or ConfigMap provides."""
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    documented = _documented()
    found: dict[str, set[str]] = {}
    for mount in container.get("volumeMounts", []):
        volume = volumes[mount["name"]]
        source = volume.get("secret") or volume.get("configMap") or {}
        name = source.get("secretName") or source.get("name")
        keys = documented.get(name, set())
        if source.get("items"):
            assert {i["key"] for i in source["items"]} <= keys, source
            keys = {i["path"] for i in source["items"]}
        found[mount["mountPath"]] = keys
    return found


def _env_value(entry: dict[str, Any]) -> str | None:
    """A variable's value, looked up in the manifests' ConfigMaps if it comes from one."""
    ref = entry.get("valueFrom", {}).get("configMapKeyRef")
    if ref:
        return str(_of("ConfigMap")[ref["name"]]["data"][ref["key"]])
    return entry.get("value")


def _file_paths(container: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(variable, path) for every file a container is told to read."""
    for entry in container.get("env", []):
        value = _env_value(entry) or ""
        if entry["name"].endswith("_FILE"):
            yield entry["name"], value
        if entry["name"] == "SUNDIAL_DATABASE_URL":
            for path in parse_qs(urlsplit(value).query).get("sslrootcert", []):
                yield entry["name"], path


@pytest.mark.parametrize("name", ["sundial-api", "sundial-scheduler"])
def test_database_url_verifies_the_server_and_holds_no_password(name: str) -> None:
    [container] = DEPLOYMENTS[name]["spec"]["template"]["spec"]["containers"]
    env = {entry["name"]: entry for entry in container["env"]}
    dsn = urlsplit(_env_value(env["SUNDIAL_DATABASE_URL"]) or "")
    assert parse_qs(dsn.query)["sslmode"] == ["verify-full"]
    assert dsn.password is None, "the password comes from SUNDIAL_DATABASE_PASSWORD"
    assert "secretKeyRef" in env["SUNDIAL_DATABASE_PASSWORD"]["valueFrom"]


def test_credentials_come_from_secrets() -> None:
    for deployment, _, container in _containers():
        for entry in container.get("env", []):
            if re.search(r"(TOKEN|PASSWORD|USER)$", entry["name"]):
                assert "secretKeyRef" in entry.get("valueFrom", {}), (deployment, entry["name"])


@pytest.mark.parametrize(("deployment", "variable", "path"), [
    (name, variable, path)
    for name, _, container in _containers()
    for variable, path in _file_paths(container)
])  # fmt: skip
def test_every_file_a_service_reads_is_mounted(deployment: str, variable: str, path: str) -> None:
    [(pod, container)] = [(p, c) for n, p, c in _containers() if n == deployment]
    directory, _, file = path.rpartition("/")
    provided = _mounted_keys(pod, container)
    assert directory in provided, f"{deployment}: {variable}={path} is not in any mount"
    assert file in provided[directory], f"{deployment}: {variable}: no {file} in {directory}"


def test_every_service_selects_a_deployment_port() -> None:
    for name, service in _of("Service").items():
        selector = {"matchLabels": service["spec"]["selector"]}
        selected = [
            d["spec"]["template"]
            for d in DEPLOYMENTS.values()
            if _matches(selector, d["spec"]["template"]["metadata"]["labels"])
        ]
        assert len(selected) == 1, f"Service {name} selects {len(selected)} Deployments"
        ports = {
            p["containerPort"]
            for c in selected[0]["spec"]["containers"]
            for p in c.get("ports", [])
        }
        assert {p["targetPort"] for p in service["spec"]["ports"]} <= ports, name


# --- Secrets and ConfigMaps: referenced == documented -----------------------------------


def _documented() -> dict[str, set[str]]:
    """Name -> keys of every Secret and ConfigMap deploy/k8s/README.md creates, plus the
    ConfigMaps the manifests define."""
    text = (DEPLOY / "README.md").read_text().replace("\\\n", " ")
    made: dict[str, set[str]] = {}
    for match in re.finditer(
        r"kubectl create (secret generic|secret tls|configmap) (\S+)(.*)", text
    ):
        kind, name, args = match.groups()
        keys = set(re.findall(r"--from-(?:literal|file)=([\w.-]+)=", args))
        made[name] = TLS_KEYS | keys if kind == "secret tls" else keys
    for name, config in _of("ConfigMap").items():
        made[name] = set(config["data"])
    return made


def _tls_secrets() -> set[str]:
    text = (DEPLOY / "README.md").read_text()
    return set(re.findall(r"kubectl create secret tls (\S+)", text))


def _references() -> dict[str, set[str]]:
    """Name -> keys of every Secret and ConfigMap the Deployments use."""
    used: dict[str, set[str]] = {}
    for _, pod, container in _containers():
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
    for name, keys in _references().items():
        assert name in documented, f"{name} is used but deploy/k8s/README.md never creates it"
        assert keys <= documented[name], f"{name}: keys {keys - documented[name]} undocumented"
    assert set(documented) == set(_references()), "documented but unused"
    secret_volumes = {
        v["secret"]["secretName"]
        for _, pod, _ in _containers()
        for v in pod.get("volumes", [])
        if "secret" in v
    }
    assert secret_volumes == _tls_secrets(), "mounted secrets are kubernetes.io/tls ones"


# --- NetworkPolicies ------------------------------------------------------------------------

HOME = {"kubernetes.io/metadata.name": "sundial"}


@dataclass(frozen=True)
class Pod:
    labels: Mapping[str, str]
    namespace: Mapping[str, str] = field(default_factory=lambda: HOME)


Destination = Pod | str  # a pod, or an IP address outside the cluster


def _pod(deployment: str) -> Pod:
    return Pod(DEPLOYMENTS[deployment]["spec"]["template"]["metadata"]["labels"])


API, SCHEDULER, EXECUTOR = _pod("sundial-api"), _pod("sundial-scheduler"), _pod("sundial-executor")
POSTGRES = Pod({"app.kubernetes.io/name": "postgresql"})
NATS = Pod({"app.kubernetes.io/name": "nats"})
ETCD = Pod({"app.kubernetes.io/name": "etcd"})
DNS = Pod({"k8s-app": "kube-dns"}, {"kubernetes.io/metadata.name": "kube-system"})
CLIENT = Pod({"sundial.io/api-client": "true"}, {"kubernetes.io/metadata.name": "billing"})
INGRESS = Pod({"app": "controller"}, {"kubernetes.io/metadata.name": "ingress-nginx"})
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
        in_namespace = _matches(peer["namespaceSelector"], other.namespace)
    else:
        in_namespace = other.namespace == HOME  # a bare podSelector: the policy's namespace
    return in_namespace and _matches(peer.get("podSelector", {}), other.labels)


def _rule_admits(
    rule: dict[str, Any], peers_key: str, other: Destination, port: int, proto: str
) -> bool:
    ports = rule.get("ports")
    if ports and not any(p.get("protocol", "TCP") == proto and p["port"] == port for p in ports):
        return False
    peers = rule.get(peers_key)
    return peers is None or any(_peer_admits(peer, other) for peer in peers)


def _allowed(kind: str, pod: Pod, other: Destination, port: int, proto: str) -> bool:
    """Whether ``pod``'s policies of ``kind`` (Ingress/Egress) let ``other`` through."""
    if pod.namespace != HOME:
        return True  # the manifests' policies hold only in their namespace
    selecting = [
        p["spec"] for p in POLICIES.values()
        if kind in p["spec"]["policyTypes"] and _matches(p["spec"]["podSelector"], pod.labels)
    ]  # fmt: skip
    if not selecting:
        return True
    key, peers_key = ("ingress", "from") if kind == "Ingress" else ("egress", "to")
    return any(
        _rule_admits(rule, peers_key, other, port, proto)
        for spec in selecting
        for rule in spec.get(key, [])
    )


def connects(source: Pod, destination: Destination, port: int, proto: str = "TCP") -> bool:
    """Kubernetes' rule: the source's egress and the destination's ingress both allow it."""
    out = _allowed("Egress", source, destination, port, proto)
    into = not isinstance(destination, Pod) or _allowed("Ingress", destination, source, port, proto)
    return out and into


def test_every_policy_selects_a_deployment_and_names_ports() -> None:
    for name, policy in POLICIES.items():
        spec = policy["spec"]
        assert spec.get("policyTypes"), f"{name}: say which directions it governs"
        for rule in spec.get("ingress", []) + spec.get("egress", []):
            peers = rule.get("from", rule.get("to", []))
            # Only the executors' rule for targets (address blocks) is open on every port.
            if not peers or not all("ipBlock" in peer for peer in peers):
                assert rule.get("ports"), f"{name}: a rule to pods on every port: {rule}"
        assert any(
            _matches(spec["podSelector"], d["spec"]["template"]["metadata"]["labels"])
            for d in DEPLOYMENTS.values()
        ), f"NetworkPolicy {name} selects no Sundial pod"


ALLOWED = [
    ("client -> api", CLIENT, API, 50051),
    ("ingress controller -> api", INGRESS, API, 50051),
    ("executor -> ledger", EXECUTOR, SCHEDULER, 50051),
    ("api -> postgresql", API, POSTGRES, 5432),
    ("scheduler -> postgresql", SCHEDULER, POSTGRES, 5432),
    ("scheduler -> nats", SCHEDULER, NATS, 4222),
    ("executor -> nats", EXECUTOR, NATS, 4222),
    ("scheduler -> etcd", SCHEDULER, ETCD, 2379),
    ("api -> etcd", API, ETCD, 2379),
    ("executor -> public target", EXECUTOR, "203.0.113.10", 443),
    ("executor -> public target, other port", EXECUTOR, "198.51.100.7", 8443),
    ("executor -> public IPv6 target", EXECUTOR, "2001:db8::1", 443),
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
    ("api -> public address", API, "203.0.113.10", 443),
    ("scheduler -> public address", SCHEDULER, "203.0.113.10", 443),
    ("executor -> cloud metadata", EXECUTOR, "169.254.169.254", 80),
    ("executor -> private 10/8", EXECUTOR, "10.0.0.5", 80),
    ("executor -> private 172.16/12", EXECUTOR, "172.20.1.1", 443),
    ("executor -> private 192.168/16", EXECUTOR, "192.168.1.1", 443),
    ("executor -> shared 100.64/10", EXECUTOR, "100.64.0.1", 443),
    ("executor -> IPv6 unique local", EXECUTOR, "fd00::1", 443),
    ("executor -> IPv6 link-local", EXECUTOR, "fe80::1", 443),
    ("executor -> stranger pod", EXECUTOR, STRANGER, 8080),
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


@pytest.mark.parametrize("pod", [API, SCHEDULER, EXECUTOR], ids=["api", "scheduler", "executor"])
def test_every_sundial_pod_resolves_names(pod: Pod) -> None:
    assert connects(pod, DNS, 53, "UDP") and connects(pod, DNS, 53, "TCP")
    assert not connects(pod, DNS, 80)
