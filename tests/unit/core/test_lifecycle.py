"""run_app: ordered start in one task group, readiness, crashes, grace periods, signals."""

from __future__ import annotations

import asyncio
import logging
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sundial.core.config import ServerConfig
from sundial.core.grpc import build_server
from sundial.core.lifecycle import Component, run_app
from tests.helpers.eventually import assert_eventually

APP_SCRIPT = Path(__file__).with_name("lifecycle_app.py")
LIBS = Path(__file__).resolve().parents[3] / "libs"


class Part:
    """A controllable component that records what happens to it in a shared journal."""

    def __init__(
        self,
        name: str,
        journal: list[str],
        *,
        gate: asyncio.Event | None = None,
        fail_before_ready: bool = False,
        ignore_stop: bool = False,
        hang_in_stop: bool = False,
        return_early: bool = False,
    ) -> None:
        self.name = name
        self.journal = journal
        self.gate = gate
        self.fail_before_ready = fail_before_ready
        self.ignore_stop = ignore_stop
        self.hang_in_stop = hang_in_stop
        self.return_early = return_early
        self.crash = asyncio.Event()
        self.stop_calls = 0
        self.task_name: str | None = None
        self._stopped = asyncio.Event()

    async def run(self, started: Callable[[], None]) -> None:
        self.journal.append(f"run {self.name}")
        task = asyncio.current_task()
        self.task_name = task.get_name() if task else None
        try:
            if self.gate is not None:
                await self.gate.wait()
            if self.fail_before_ready:
                raise RuntimeError(f"{self.name} cannot start")
            started()
            if self.return_early:
                return
            if self.ignore_stop:
                await asyncio.Event().wait()
            stopped = asyncio.ensure_future(self._stopped.wait())
            crashed = asyncio.ensure_future(self.crash.wait())
            await asyncio.wait([stopped, crashed], return_when=asyncio.FIRST_COMPLETED)
            stopped.cancel()
            crashed.cancel()
            if self.crash.is_set():
                raise RuntimeError(f"{self.name} exploded")
            self.journal.append(f"end {self.name}")
        except asyncio.CancelledError:
            self.journal.append(f"cancelled {self.name}")
            raise

    async def stop(self) -> None:
        self.stop_calls += 1
        self.journal.append(f"stop {self.name}")
        if self.hang_in_stop:
            await asyncio.Event().wait()
        self._stopped.set()


def _app(
    parts: list[Part], stop: asyncio.Event, journal: list[str], *, grace_period_s: float = 10.0
) -> asyncio.Task[int]:
    async def on_ready() -> None:
        journal.append("ready")

    def on_stopping() -> None:
        journal.append("stopping")

    return asyncio.create_task(
        run_app(
            parts,
            grace_period_s=grace_period_s,
            on_ready=on_ready,
            on_stopping=on_stopping,
            install_signal_handlers=False,
            stop_event=stop,
        )
    )


async def _until(journal: list[str], entry: str) -> None:
    def check() -> None:
        assert entry in journal, journal

    await assert_eventually(check, timeout_s=10, what=f"{entry!r} in journal")


async def test_starts_in_order_reports_ready_and_stops_in_reverse() -> None:
    journal: list[str] = []
    parts = [Part(name, journal) for name in ("pool", "dispatcher", "server")]
    assert all(isinstance(p, Component) for p in parts)
    stop = asyncio.Event()
    app = _app(parts, stop, journal)
    await _until(journal, "ready")
    assert journal == ["run pool", "run dispatcher", "run server", "ready"]
    assert [p.task_name for p in parts] == ["pool", "dispatcher", "server"]  # one task each

    stop.set()
    assert await asyncio.wait_for(app, timeout=10) == 0
    assert journal[4:] == [
        "stopping",
        "stop server",
        "end server",
        "stop dispatcher",
        "end dispatcher",
        "stop pool",
        "end pool",
    ]
    assert [p.stop_calls for p in parts] == [1, 1, 1]


async def test_next_component_starts_only_after_the_previous_is_ready() -> None:
    journal: list[str] = []
    gate = asyncio.Event()
    parts = [Part("slow", journal, gate=gate), Part("after", journal)]
    stop = asyncio.Event()
    app = _app(parts, stop, journal)
    await _until(journal, "run slow")
    for _ in range(20):  # let the loop run: nothing may start while "slow" is not ready
        await asyncio.sleep(0)
    assert journal == ["run slow"]

    gate.set()
    await _until(journal, "ready")
    assert journal == ["run slow", "run after", "ready"]
    stop.set()
    assert await asyncio.wait_for(app, timeout=10) == 0


async def test_a_crash_stops_the_others_and_exits_1(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="sundial.core.lifecycle")
    journal: list[str] = []
    parts = [Part(name, journal) for name in ("a", "b", "c")]
    app = _app(parts, asyncio.Event(), journal)
    await _until(journal, "ready")

    parts[1].crash.set()
    assert await asyncio.wait_for(app, timeout=10) == 1
    assert journal[4:] == ["stopping", "stop c", "end c", "stop b", "stop a", "end a"]
    [crash] = [r for r in caplog.records if getattr(r, "transition", None) == "crashed"]
    assert crash.component == "b"  # type: ignore[attr-defined]
    assert crash.exc_info is not None and "b exploded" in str(crash.exc_info[1])
    # The crashed component gets no "stopping"/"stopped" lines: it already ended.
    b_lines = [r.transition for r in caplog.records if getattr(r, "component", None) == "b"]  # type: ignore[attr-defined]
    assert b_lines == ["started", "crashed"]


async def test_a_crash_while_starting_skips_the_rest_and_on_ready() -> None:
    journal: list[str] = []
    parts = [Part("a", journal), Part("b", journal, fail_before_ready=True), Part("c", journal)]
    app = _app(parts, asyncio.Event(), journal)
    assert await asyncio.wait_for(app, timeout=10) == 1
    assert "run c" not in journal
    assert "ready" not in journal
    assert journal[-3:] == ["stop b", "stop a", "end a"]


async def test_returning_before_stop_counts_as_a_crash() -> None:
    journal: list[str] = []
    parts = [Part("a", journal), Part("quitter", journal, return_early=True)]
    app = _app(parts, asyncio.Event(), journal)
    assert await asyncio.wait_for(app, timeout=10) == 1
    assert journal[-2:] == ["stop a", "end a"]


async def test_stop_during_startup_stops_a_component_that_never_got_ready() -> None:
    journal: list[str] = []
    never = asyncio.Event()
    parts = [Part("a", journal), Part("stuck", journal, gate=never)]
    stop = asyncio.Event()
    app = _app(parts, stop, journal, grace_period_s=0.1)
    await _until(journal, "run stuck")
    stop.set()
    assert await asyncio.wait_for(app, timeout=10) == 0
    assert "ready" not in journal
    # stop() was safe before the component was ready; its run() was then cancelled.
    assert journal[-4:] == ["stop stuck", "cancelled stuck", "stop a", "end a"]


async def test_grace_period_bounds_a_component_that_ignores_stop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="sundial.core.lifecycle")
    journal: list[str] = []
    parts = [
        Part("a", journal),
        Part("deaf", journal, ignore_stop=True),
        Part("hangs", journal, hang_in_stop=True),
    ]
    stop = asyncio.Event()
    app = _app(parts, stop, journal, grace_period_s=0.2)
    await _until(journal, "ready")
    began = time.monotonic()
    stop.set()
    assert await asyncio.wait_for(app, timeout=10) == 0
    assert time.monotonic() - began < 5
    assert "cancelled hangs" in journal
    assert "cancelled deaf" in journal
    assert journal[-2:] == ["stop a", "end a"]  # the others still got their turn
    assert "did not stop within 0.2 s" in caplog.text


async def test_server_health_follows_the_app() -> None:
    server = build_server(ServerConfig(grace_period_s=1), services=[], service_names=["x.Y"])
    stop = asyncio.Event()
    app = asyncio.create_task(
        run_app(
            [server],
            grace_period_s=5,
            on_ready=server.set_serving,
            on_stopping=server.set_not_serving,
            install_signal_handlers=False,
            stop_event=stop,
        )
    )
    async with grpc.aio.insecure_channel(server.address) as chan:
        stub = health_pb2_grpc.HealthStub(chan)

        async def serving() -> None:
            reply = await stub.Check(health_pb2.HealthCheckRequest(service="x.Y"), timeout=5)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING

        await assert_eventually(serving, timeout_s=10, what="health SERVING")
    stop.set()
    assert await asyncio.wait_for(app, timeout=10) == 0
    assert await server.wait_for_termination(timeout_s=10)


def test_duplicate_names_are_refused() -> None:
    journal: list[str] = []
    with pytest.raises(ValueError, match="unique"):
        asyncio.run(run_app([Part("a", journal), Part("a", journal)], grace_period_s=1))


# --- a real process and real signals ------------------------------------------------------


def _start_app(*args: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=str(LIBS))
    return subprocess.Popen(
        [sys.executable, str(APP_SCRIPT), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )


def _read_until(proc: subprocess.Popen[bytes], stream: IO[bytes], text: str) -> str:
    """Read ``stream`` (unbuffered) until ``text`` appears; return everything read.

    Raw ``os.read`` rather than ``readline``: a buffered reader can hold the awaited line
    while ``select`` reports the pipe empty.
    """
    seen = b""
    deadline = time.monotonic() + 20
    while text.encode() not in seen:
        remaining = deadline - time.monotonic()
        readable, _, _ = select.select([stream], [], [], max(remaining, 0))
        chunk = os.read(stream.fileno(), 65536) if readable else b""
        if not chunk:  # deadline passed or the process closed the pipe
            proc.kill()
            _, err = proc.communicate(timeout=10)
            raise AssertionError(f"never saw {text!r}; got {seen!r}; stderr: {err.decode()}")
        seen += chunk
    return seen.decode()


def _finish(proc: subprocess.Popen[bytes], timeout_s: float) -> tuple[int, str]:
    try:
        code = proc.wait(timeout=timeout_s)
    finally:
        if proc.poll() is None:
            proc.kill()
    _, err = proc.communicate(timeout=10)
    return code, err.decode()


@pytest.mark.parametrize("stubborn", [False, True])
def test_sigterm_exits_cleanly_within_the_grace_period(stubborn: bool) -> None:
    grace_s = 1.0
    proc = _start_app(str(grace_s), *(["stubborn"] if stubborn else []))
    assert proc.stdout is not None
    _read_until(proc, proc.stdout, "READY")
    began = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    code, err = _finish(proc, timeout_s=2 * grace_s + 10)
    elapsed = time.monotonic() - began
    assert code == 0, err
    # Two components, each bounded by the grace period.
    assert elapsed < 2 * grace_s + 5, err
    assert "received SIGTERM" in err
    for line in ("second stopping", "second stopped", "first stopping", "first stopped"):
        assert line in err
    if stubborn:
        assert "second did not stop within" in err


def test_second_signal_cancels_without_waiting_for_the_grace_period() -> None:
    proc = _start_app("600", "stubborn")
    assert proc.stdout is not None and proc.stderr is not None
    _read_until(proc, proc.stdout, "READY")
    proc.send_signal(signal.SIGINT)
    # Send the second signal only once the first one is being handled.
    seen = _read_until(proc, proc.stderr, "second stopping")
    proc.send_signal(signal.SIGINT)
    code, rest = _finish(proc, timeout_s=20)
    assert code == 0, seen + rest
    assert "cancelling every component" in seen + rest
