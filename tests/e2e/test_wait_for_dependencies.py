"""Services started before their dependencies wait for them: NOT_SERVING, then SERVING.

Real processes: the API and a scheduler are started against a PostgreSQL port where
nothing listens yet; they stay alive, answer health NOT_SERVING and log a WARNING per
attempt (without the password); then a real PostgreSQL starts on that port and both
turn SERVING, with no restart. The same for a scheduler started before NATS. A signal
ends the wait cleanly; a bad value in the configuration still exits at once with 2.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from sundial.devstack import Services, Stack, free_port, health_status, runtime_dir
from sundial.devstack._nats import NatsServer
from sundial.devstack._postgres import PostgresServer
from sundial.devstack._process import ManagedProcess
from tests.helpers.eventually import wait_until_sync

PASSWORD = "never-logged-3f9a"
SERVING_TIMEOUT_S = 60.0


def _process(
    services: Services, name: str, log_dir: Path, env: dict[str, str]
) -> tuple[ManagedProcess, str]:
    address = f"127.0.0.1:{free_port()}"
    full_env = {**services.service_env(name, address), **env}
    process = ManagedProcess(
        f"sundial-{name}",
        [sys.executable, "-m", f"sundial.{name}"],
        log_path=log_dir / f"{name}.log",
        env=full_env,
    )
    return process, address


def _waiting_lines(log: Path) -> list[dict[str, object]]:
    lines = []
    for line in log.read_text(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("action") == "dependency.wait":
            lines.append(record)
    return lines


def _assert_waiting(process: ManagedProcess, address: str, attempts: int) -> None:
    """Alive, NOT_SERVING, and at least ``attempts`` failed attempts logged."""
    assert process.alive(), f"{process.name} exited while waiting"
    assert health_status(address) == "NOT_SERVING"
    lines = _waiting_lines(process.log_path)
    assert len(lines) >= attempts, f"{len(lines)} attempts logged so far"


def test_api_and_scheduler_wait_for_postgres_and_serve_once_it_is_up(
    stack: Stack, tmp_path: Path
) -> None:
    port = free_port()
    url = f"postgresql://postgres:{PASSWORD}@127.0.0.1:{port}/postgres"
    services = Services(stack, log_dir=tmp_path)
    env = {
        "SUNDIAL_DATABASE_URL": url,
        "SUNDIAL_LOG_FORMAT": "json",
        "SUNDIAL_ADMIN_TOKEN": "test-admin-token-0123456789",
    }
    api, api_address = _process(services, "api", tmp_path, env)
    scheduler, scheduler_address = _process(services, "scheduler", tmp_path, env)
    # A folder PostgreSQL can reach when it runs as another user (we may be root).
    late_dir = Path(tempfile.mkdtemp(prefix="late-pg-", dir=runtime_dir()))
    late_dir.chmod(0o755)
    postgres = PostgresServer(late_dir, durable=False, port=port)
    try:
        api.start()
        scheduler.start()
        # Several attempts each, refused, while health says NOT_SERVING.
        for process, address in ((api, api_address), (scheduler, scheduler_address)):
            wait_until_sync(
                lambda p=process, a=address: _try(_assert_waiting, p, a, 3),
                timeout_s=30,
                what=f"{process.name} waiting for PostgreSQL",
            )
        for process in (api, scheduler):
            lines = _waiting_lines(process.log_path)
            assert {line["dependency"] for line in lines} == {"PostgreSQL"}
            assert lines[0]["address"] == f"127.0.0.1:{port}/postgres"
            assert [line["attempt"] for line in lines[:3]] == [1, 2, 3]
            assert all(line["level"] == "WARNING" for line in lines)
            assert PASSWORD not in process.log_path.read_text()

        postgres.start()
        for process, address in ((api, api_address), (scheduler, scheduler_address)):
            wait_until_sync(
                lambda p=process, a=address: p.alive() and health_status(a) == "SERVING",
                timeout_s=SERVING_TIMEOUT_S,
                what=f"{process.name} SERVING after PostgreSQL came up",
            )
        assert api.alive() and scheduler.alive()
    finally:
        scheduler.stop()
        api.stop()
        postgres.stop()
        shutil.rmtree(late_dir, ignore_errors=True)


def test_scheduler_waits_for_nats_and_serves_once_it_is_up(
    stack: Stack, migrated_database_url: str, tmp_path: Path
) -> None:
    port = free_port()
    late_dir = Path(tempfile.mkdtemp(prefix="late-nats-", dir=runtime_dir()))
    nats = NatsServer(late_dir, port=port)
    user, password = nats.users["scheduler"]
    services = Services(stack, log_dir=tmp_path)
    scheduler, address = _process(
        services,
        "scheduler",
        tmp_path,
        {
            "SUNDIAL_DATABASE_URL": migrated_database_url,
            "SUNDIAL_NATS_URL": f"nats://127.0.0.1:{port}",
            "SUNDIAL_NATS_USER": user,
            "SUNDIAL_NATS_PASSWORD": password,
            "SUNDIAL_LOG_FORMAT": "json",
        },
    )
    try:
        scheduler.start()
        wait_until_sync(
            lambda: _try(_assert_waiting, scheduler, address, 1),
            timeout_s=30,
            what="scheduler waiting for NATS",
        )
        lines = _waiting_lines(scheduler.log_path)
        assert {line["dependency"] for line in lines} == {"NATS"}
        assert password not in scheduler.log_path.read_text()
        nats.start()
        wait_until_sync(
            lambda: scheduler.alive() and health_status(address) == "SERVING",
            timeout_s=SERVING_TIMEOUT_S,
            what="scheduler SERVING after NATS came up",
        )
    finally:
        scheduler.stop()
        nats.stop()
        shutil.rmtree(late_dir, ignore_errors=True)


def _run(service: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run ``service`` to its exit (bounded), with ``env`` over ours."""
    return subprocess.run(
        [sys.executable, "-m", f"sundial.{service}"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _try(check: object, *args: object) -> bool:
    try:
        check(*args)  # type: ignore[operator]
    except AssertionError:
        return False
    return True


def test_sigterm_while_waiting_exits_cleanly(stack: Stack, tmp_path: Path) -> None:
    services = Services(stack, log_dir=tmp_path)
    dead = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"
    api, address = _process(
        services, "api", tmp_path, {"SUNDIAL_DATABASE_URL": dead, "SUNDIAL_LOG_FORMAT": "json"}
    )
    try:
        api.start()
        wait_until_sync(
            lambda: _try(_assert_waiting, api, address, 1), timeout_s=30, what="api waiting"
        )
        assert api.proc is not None
        api.proc.send_signal(signal.SIGTERM)
        assert api.proc.wait(timeout=10) == 0
    finally:
        api.stop()
    assert "Traceback" not in api.log_path.read_text()


@pytest.mark.parametrize(
    ("variable", "value"),
    [("SUNDIAL_POOL_MIN_SIZE", "-1"), ("SUNDIAL_DATABASE_URL", "mysql://db/x")],
)
def test_a_bad_configuration_value_still_exits_at_once_with_2(
    stack: Stack, variable: str, value: str
) -> None:
    result = _run("api", {**stack.env("api"), variable: value})
    assert result.returncode == 2, result.stderr
    assert "configuration error" in result.stderr


def test_a_refused_password_is_not_waited_for(stack: Stack, migrated_database_url: str) -> None:
    # NATS is up but refuses the user: waiting cannot fix that, so the start fails.
    env = {
        **stack.env("scheduler"),
        "SUNDIAL_DATABASE_URL": migrated_database_url,
        "SUNDIAL_NATS_PASSWORD": "not-the-password",
        "SUNDIAL_LOG_FORMAT": "json",
    }
    result = _run("scheduler", env)
    assert result.returncode == 1, result.stderr[-2000:]
    assert "AuthorizationError" in result.stderr
    assert "not-the-password" not in result.stderr
    assert "dependency.wait" not in result.stderr
