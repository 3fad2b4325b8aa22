"""Run Sundial's three services as real processes against a :class:`Stack`."""

from __future__ import annotations

import base64
import os
import signal
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sundial.core.tls import ClientTls, dial_sync
from sundial.devstack._process import (
    PORT_ATTEMPTS,
    ManagedProcess,
    StackError,
    free_port,
    port_taken,
)
from sundial.devstack._stack import Stack
from sundial.v1 import admin_pb2, admin_pb2_grpc

SERVICE_NAMES = ("api", "scheduler", "executor")


def health_status(
    address: str, service: str = "", timeout_s: float = 1.0, tls: ClientTls | None = None
) -> str:
    """The gRPC health status name of ``address`` (``SERVING``...), or ``UNREACHABLE``.

    ``tls``: dial a TLS server so (None: plaintext); a refused handshake is UNREACHABLE.
    """
    with dial_sync(address, tls) as channel:
        try:
            # The stub package declares HealthStub without the method attributes that its
            # __init__ sets, so Check is unknown to the type checker.
            answer = health_pb2_grpc.HealthStub(channel).Check(  # type: ignore[attr-defined]
                health_pb2.HealthCheckRequest(service=service), timeout=timeout_s
            )
        except grpc.RpcError:
            return "UNREACHABLE"
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status))


def local_secret_keys() -> str:
    """A fresh key-encryption key for a local deployment (``local-<hex>:<base64>``)."""
    return f"local-{os.urandom(4).hex()}:{base64.b64encode(os.urandom(32)).decode()}"


READY_SERVICE = {
    "api": "sundial.v1.JobService",
    "scheduler": "sundial.internal.v1.RunLedgerService",
}
"""The health entry that says a process of each service serves: a service it alone has,
so another kind of process already on a picked port (the test suite runs two processes,
each starting services) is not taken for it. The executor serves no service of its own:
the server's overall status."""


@dataclass
class ServiceProcess:
    """One service process; ``address`` is its gRPC listen address on loopback."""

    name: str
    address: str
    process: ManagedProcess
    tls: ClientTls | None = None
    """How to dial it when it serves TLS (the readiness probe does so)."""
    http_url: str | None = None
    """The API's HTTP port (Connect JSON API and console), when the stack turned it on."""

    def start(self, timeout_s: float = 60.0) -> None:
        self.process.start()
        self.wait_ready(timeout_s)

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        """Wait until the started process serves (health SERVING)."""
        service = READY_SERVICE.get(self.name, "")
        self.process.wait_ready(
            lambda: health_status(self.address, service, tls=self.tls) == "SERVING", timeout_s
        )

    def stop(self, timeout_s: float = 30.0) -> None:
        self.process.stop(timeout_s)


@dataclass
class Services:
    """The API, scheduler and executor processes of one local deployment.

    They serve TLS when ``extra_env`` names a certificate (``SUNDIAL_TLS_CERT_FILE``,
    ``SUNDIAL_TLS_KEY_FILE``, and ``SUNDIAL_TLS_CLIENT_CA_FILE`` for mTLS); then
    ``client_tls`` must say how to dial them (the CA that signed their certificate, and a
    client certificate under mTLS). The readiness probe dials with it, and so does the
    executor to reach the ledger unless ``extra_env`` sets ``SUNDIAL_LEDGER_TLS_*`` itself.
    """

    stack: Stack
    log_dir: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    processes: dict[str, ServiceProcess] = field(default_factory=dict)
    client_tls: ClientTls | None = None
    """How to dial the services when they serve TLS; None: plaintext."""

    env_by_service: dict[str, dict[str, str]] = field(default_factory=dict)
    """Variables for the processes of one service only, by service name (over
    ``extra_env``): e.g. each service's own ``SUNDIAL_METRICS_LISTEN``."""

    http: bool = False
    """Serve the API's HTTP port too (SUNDIAL_HTTP_LISTEN on a free loopback port):
    the Connect JSON API and the web console, at ``processes["api"].http_url``."""

    secret_keys: str = field(default_factory=local_secret_keys, repr=False)
    """The key-encryption key the API and the schedulers seal and open tenant secrets
    with (SUNDIAL_SECRET_KEYS), made for this deployment unless ``extra_env`` names one;
    executors never get it."""

    executor_token: str = field(default="", repr=False)
    """The executor token executors present to the ledger (SUNDIAL_LEDGER_TOKEN): from
    ``extra_env``, else issued through the API's AdminService with the bootstrap admin
    token (SUNDIAL_ADMIN_TOKEN) when the first executor starts."""

    def service_env(self, name: str, address: str) -> dict[str, str]:
        env = {
            **os.environ,
            **self.stack.env(name),
            **self.extra_env,
            **self.env_by_service.get(name, {}),
        }
        env["SUNDIAL_LISTEN"] = address
        if name in ("api", "scheduler"):
            if not env.get("SUNDIAL_SECRET_KEYS_FILE"):
                env.setdefault("SUNDIAL_SECRET_KEYS", self.secret_keys)
        else:
            env.pop("SUNDIAL_SECRET_KEYS", None)
            env.pop("SUNDIAL_SECRET_KEYS_FILE", None)
        env.setdefault("SUNDIAL_NODE_ID", f"{name}-{address.rsplit(':', 1)[1]}")
        schedulers = [p.address for p in self.processes.values() if p.name == "scheduler"]
        if schedulers:  # executors balance over every ledger
            env.setdefault("SUNDIAL_LEDGER_ADDRESS", ",".join(schedulers))
        for key, value in _ledger_tls_env(self.client_tls).items():
            env.setdefault(key, value)
        return env

    def add(self, name: str) -> ServiceProcess:
        """Start one more process of service ``name`` (e.g. a second scheduler)."""
        return self._serving(self._launch(name))

    def _serving(self, service: ServiceProcess) -> ServiceProcess:
        """``service`` once it serves; started again on fresh ports while one it picked
        (:func:`free_port`) was taken before it bound it (another test's server)."""
        for attempt in range(1, PORT_ATTEMPTS + 1):
            try:
                service.wait_ready()
                return service
            except StackError as exc:
                if attempt == PORT_ATTEMPTS or not port_taken(exc):
                    raise
            key = next(k for k, p in self.processes.items() if p is service)
            self.processes.pop(key).stop()
            service = self._launch(service.name)
        return service

    def _launch(self, name: str) -> ServiceProcess:
        """Start a process of service ``name`` without waiting until it serves; it is in
        ``processes`` at once, so :meth:`stop` stops it whatever happens next."""
        address = f"127.0.0.1:{free_port()}"
        env = self.service_env(name, address)
        if name == "executor" and not env.get("SUNDIAL_LEDGER_TOKEN"):
            env["SUNDIAL_LEDGER_TOKEN"] = self.issue_executor_token(env)
        if env.get("SUNDIAL_TLS_CERT_FILE") and self.client_tls is None:
            raise StackError("the services serve TLS (SUNDIAL_TLS_CERT_FILE): set client_tls")
        http_url = None
        if name == "api" and self.http:
            env["SUNDIAL_HTTP_LISTEN"] = f"127.0.0.1:{free_port()}"
            scheme = "https" if env.get("SUNDIAL_TLS_CERT_FILE") else "http"
            http_url = f"{scheme}://{env['SUNDIAL_HTTP_LISTEN']}"
        service = ServiceProcess(
            name,
            address,
            ManagedProcess(
                f"sundial-{name}",
                [sys.executable, "-m", f"sundial.{name}"],
                log_path=self.log_dir / f"{name}-{address.rsplit(':', 1)[1]}.log",
                env=env,
                stop_signal=signal.SIGTERM,
            ),
            tls=self.client_tls,
            http_url=http_url,
        )
        key = name if name not in self.processes else f"{name}-{address.rsplit(':', 1)[1]}"
        service.process.start()
        self.processes[key] = service
        return service

    def issue_executor_token(self, env: dict[str, str]) -> str:
        """The executor token (issued once through the running API, then reused)."""
        if self.executor_token:
            return self.executor_token
        admin_token = env.get("SUNDIAL_ADMIN_TOKEN", "")
        api = self.processes.get("api")
        if api is None or not admin_token:
            raise StackError(
                "an executor needs SUNDIAL_LEDGER_TOKEN, or a running API and "
                "SUNDIAL_ADMIN_TOKEN to issue one"
            )
        request = admin_pb2.CreateApiTokenRequest(
            role=admin_pb2.TOKEN_ROLE_EXECUTOR, description="local stack executors"
        )
        with dial_sync(api.address, self.client_tls) as channel:
            answer = admin_pb2_grpc.AdminServiceStub(channel).CreateApiToken(
                request, metadata=(("authorization", f"Bearer {admin_token}"),), timeout=10
            )
        self.executor_token = answer.secret
        return self.executor_token

    def start(self, replicas: int = 1, *, executors: int | None = None) -> Services:
        """Start the API, then ``replicas`` schedulers, then ``replicas`` executors (or
        ``executors`` of them; they need the schedulers' ledger addresses).

        The API and the schedulers start side by side (each waits for PostgreSQL, NATS
        and etcd by itself, and a scheduler needs no API); the executors start once the
        API serves (it issues their token) and need the schedulers' addresses only, not
        their readiness. Returns once every process serves.
        """
        try:
            api = self._launch("api")
            waiting = [self._launch("scheduler") for _ in range(replicas)]
            self._serving(api)
            count = replicas if executors is None else executors
            waiting += [self._launch("executor") for _ in range(count)]
            for service in waiting:
                self._serving(service)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the executors, together, then the schedulers and the API, together.

        Executors drain (their runs' outcomes go to a ledger) while the schedulers still
        serve; nothing else orders a stop, and each stop waits for its process's own
        grace steps (drains, exporter flushes), so processes of one step stop side by
        side instead of adding up their waits.
        """
        executors = [key for key, p in self.processes.items() if p.name == "executor"]
        rest = [key for key in self.processes if key not in executors]
        for keys in (executors, rest):
            _stop_together([self.processes.pop(key) for key in keys])


def _stop_together(services: list[ServiceProcess]) -> None:
    """Stop ``services`` side by side; returns once every one stopped (the first error
    is raised after that)."""
    if len(services) <= 1:
        for service in services:
            service.stop()
        return
    with ThreadPoolExecutor(max_workers=len(services), thread_name_prefix="stop") as pool:
        for stopping in [pool.submit(service.stop) for service in services]:
            stopping.result()


def _ledger_tls_env(tls: ClientTls | None) -> dict[str, str]:
    """The executor's ``SUNDIAL_LEDGER_TLS_*`` variables for dialling the ledger with ``tls``."""
    if tls is None:
        return {}
    env = {"SUNDIAL_LEDGER_TLS": "1"}
    if tls.server_name:
        env["SUNDIAL_LEDGER_TLS_SERVER_NAME"] = tls.server_name
    for name, path in (
        ("CA_FILE", tls.ca_file),
        ("CERT_FILE", tls.cert_file),
        ("KEY_FILE", tls.key_file),
    ):
        if path is not None:
            env[f"SUNDIAL_LEDGER_TLS_{name}"] = str(path)
    return env
