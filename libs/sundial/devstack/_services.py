"""Run Sundial's three services as real processes against a :class:`Stack`."""

from __future__ import annotations

import os
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sundial.devstack._process import ManagedProcess, free_port
from sundial.devstack._stack import Stack

SERVICE_NAMES = ("api", "scheduler", "executor")


def health_status(address: str, service: str = "", timeout_s: float = 1.0) -> str:
    """The gRPC health status name of ``address`` (``SERVING``...), or ``UNREACHABLE``."""
    with grpc.insecure_channel(address) as channel:
        try:
            # The stub package declares HealthStub without the method attributes that its
            # __init__ sets, so Check is unknown to the type checker.
            answer = health_pb2_grpc.HealthStub(channel).Check(  # type: ignore[attr-defined]
                health_pb2.HealthCheckRequest(service=service), timeout=timeout_s
            )
        except grpc.RpcError:
            return "UNREACHABLE"
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status))


@dataclass
class ServiceProcess:
    """One service process; ``address`` is its gRPC listen address on loopback."""

    name: str
    address: str
    process: ManagedProcess

    def start(self, timeout_s: float = 60.0) -> None:
        self.process.start()
        self.process.wait_ready(lambda: health_status(self.address) == "SERVING", timeout_s)

    def stop(self, timeout_s: float = 30.0) -> None:
        self.process.stop(timeout_s)


@dataclass
class Services:
    """The API, scheduler and executor processes of one local deployment."""

    stack: Stack
    log_dir: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    processes: dict[str, ServiceProcess] = field(default_factory=dict)

    def service_env(self, name: str, address: str) -> dict[str, str]:
        env = {**os.environ, **self.stack.env(), **self.extra_env}
        env["SUNDIAL_LISTEN"] = address
        env.setdefault("SUNDIAL_NODE_ID", f"{name}-{address.rsplit(':', 1)[1]}")
        if "scheduler" in self.processes:
            env.setdefault("SUNDIAL_LEDGER_ADDRESS", self.processes["scheduler"].address)
        return env

    def add(self, name: str) -> ServiceProcess:
        """Start one more process of service ``name`` (e.g. a second scheduler)."""
        address = f"127.0.0.1:{free_port()}"
        service = ServiceProcess(
            name,
            address,
            ManagedProcess(
                f"sundial-{name}",
                [sys.executable, "-m", f"sundial.{name}"],
                log_path=self.log_dir / f"{name}-{address.rsplit(':', 1)[1]}.log",
                env=self.service_env(name, address),
                stop_signal=signal.SIGTERM,
            ),
        )
        service.start()
        key = name if name not in self.processes else f"{name}-{address.rsplit(':', 1)[1]}"
        self.processes[key] = service
        return service

    def start(self) -> Services:
        try:
            for name in SERVICE_NAMES:  # the executor needs the scheduler's ledger address
                self.add(name)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop services in reverse start order (executors drain before schedulers)."""
        for key in reversed(list(self.processes)):
            self.processes.pop(key).stop()
