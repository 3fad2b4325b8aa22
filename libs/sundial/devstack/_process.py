"""A child server process: start it, wait until it is ready, stop it without leftovers."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

_log = logging.getLogger(__name__)

T = TypeVar("T")


# The first program every child runs (``python -I -S -c``): it switches to the
# unprivileged user when asked, asks the kernel for SIGKILL when its parent dies
# (PR_SET_PDEATHSIG, which a change of credentials would clear, hence after the
# switch), exits if that parent already died, and execs the real program, which keeps
# the setting. It replaces a ``preexec_fn``: subprocess runs a preexec_fn as Python code
# between fork and exec, in a child that inherited the parent's locks but not its
# threads, and a lock held at the fork by another thread (gRPC core's threads, which a
# health-check channel leaves behind; a logging or stdout lock) then hangs the child
# before it ever execs. Without a preexec_fn, subprocess forks and execs in C with
# async-signal-safe calls only, so starting a child is safe whatever threads exist.
_EXEC_SHIM = """\
import ctypes, os, signal, sys
parent, uid, gid = (int(value) for value in sys.argv[1:4])
prctl = ctypes.CDLL(None, use_errno=True).prctl
if uid >= 0:
    os.setgroups([])
    if gid >= 0:
        os.setgid(gid)
    os.setuid(uid)
prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
if os.getppid() != parent:
    os._exit(1)  # the parent died before the line above: nobody would stop us
os.execvp(sys.argv[4], sys.argv[4:])
"""


_HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def interrupts_held() -> Iterator[None]:
    """Hold a Ctrl-C or SIGTERM that arrives in the block until it ends, then act on it
    as the handler in force would (``sundial dev`` raises ``KeyboardInterrupt`` on both).

    Starting a child is fork, exec, then a wait for the exec's outcome inside
    ``subprocess.Popen``: a ``KeyboardInterrupt`` raised there ends the call before its
    caller holds the child, which then runs on with nobody to stop it (``sundial dev``
    interrupted while starting left a server running after it exited). A no-op outside
    the main thread, where Python runs no signal handler anyway.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous = {sig: signal.signal(sig, lambda n, _f: held.append(n)) for sig in _HELD_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    for signum in held:
        handler = previous[signal.Signals(signum)]
        if callable(handler):
            handler(signum, None)
        elif handler == signal.SIG_DFL:
            os.kill(os.getpid(), signum)


def shimmed(argv: Sequence[str], user: int | None, group: int | None) -> list[str]:
    """``argv`` started through :data:`_EXEC_SHIM` (as ``user``/``group`` if given).

    The interpreter loads before the switch to ``user``, who need not be able to read
    it (a virtual environment under /root).
    """
    uid = -1 if user is None else user
    gid = -1 if user is None or group is None else group
    return [
        sys.executable,
        "-I",  # ignore PYTHON* variables and the user's site-packages
        "-S",  # no site: the shim needs the standard library only
        "-c",
        _EXEC_SHIM,
        str(os.getpid()),
        str(uid),
        str(gid),
        *argv,
    ]


@dataclass(frozen=True)
class ServerTls:
    """PEM files a local server serves TLS with; clients must present a certificate
    signed by ``client_ca_file`` (mutual TLS)."""

    cert_file: Path
    key_file: Path
    client_ca_file: Path

    def client_context(self, cert_file: Path, key_file: Path) -> ssl.SSLContext:
        """A client context trusting ``client_ca_file`` (the tests' one CA signs both
        sides) and presenting ``cert_file``."""
        context = ssl.create_default_context(cafile=str(self.client_ca_file))
        context.load_cert_chain(cert_file, key_file)
        return context


class StackError(RuntimeError):
    """A local server failed to start or stop; the message quotes the tail of its log."""


def free_port(host: str = "127.0.0.1") -> int:
    """Return a port that was free on ``host`` a moment ago.

    The port is only reserved while the probe socket is open, so callers that hand it to
    another process retry on a bind failure (see :meth:`ManagedProcess.start`).
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


PORT_ATTEMPTS = 5
"""Starts tried, each on freshly picked ports, before a taken port ends a start."""


def port_taken(exc: StackError) -> bool:
    """``exc`` says a server could not bind a port (its log quotes "address already in
    use", capitalised by some servers: gRPC writes "Address already in use")."""
    return "address already in use" in str(exc).lower()


def with_fresh_ports(start: Callable[[], T]) -> T:
    """``start()``, tried again while it fails because a port it picked with
    :func:`free_port` was taken before its server bound it (the error quotes the
    server's log: "address already in use").

    ``start`` picks its ports anew on each call and stops what it started when it fails.
    """
    for attempt in range(1, PORT_ATTEMPTS + 1):
        try:
            return start()
        except StackError as exc:
            if attempt == PORT_ATTEMPTS or not port_taken(exc):
                raise
            _log.warning(
                "a picked port was taken meanwhile; starting again on other ports",
                extra={"action": "stack.port_taken", "attempt": attempt},
            )
    raise AssertionError("unreachable")


def tail(path: Path, lines: int = 30) -> str:
    """The last ``lines`` lines of a log file, or a note that it is missing."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return f"(no log at {path.name})"


def wait_until(
    check: Callable[[], bool], *, timeout_s: float, what: str, alive: Callable[[], bool]
) -> None:
    """Poll ``check`` until it is true, the process dies or the deadline passes."""
    deadline = time.monotonic() + timeout_s
    delay = 0.02
    while True:
        if check():
            return
        if not alive():
            raise StackError(f"{what} exited before it was ready")
        if time.monotonic() > deadline:
            raise StackError(f"{what} was not ready within {timeout_s:.0f} s")
        time.sleep(delay)
        delay = min(delay * 1.5, 0.25)


class ManagedProcess:
    """One long-running child process with its own log file.

    The child runs in its own session so that a Ctrl-C typed at the terminal reaches only
    the parent, which then stops its children in order (servers must outlive the
    services that use them). It is killed if the parent dies without stopping it.
    Linux ties that to the thread that started the child: start children from a
    long-lived thread (the main thread, or a thread pool that outlives them).
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        log_path: Path,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        user: int | None = None,
        group: int | None = None,
        stop_signal: signal.Signals = signal.SIGTERM,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.env = env
        self.cwd = cwd
        self.user = user
        self.group = group
        self.stop_signal = stop_signal
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log, interrupts_held():
            # No preexec_fn (see _EXEC_SHIM): the shim switches users and sets the
            # parent-death signal. `group` counts only with a `user`; root's
            # supplementary groups are dropped then too. A Ctrl-C meanwhile is acted
            # on once the child is ours to stop (interrupts_held).
            self.proc = subprocess.Popen(
                shimmed(self.argv, self.user, self.group),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,
            )
        _log.debug("started %s", self.name, extra={"action": "stack.start", "pid": self.proc.pid})

    def wait_ready(self, check: Callable[[], bool], timeout_s: float) -> None:
        try:
            wait_until(check, timeout_s=timeout_s, what=self.name, alive=self.alive)
        except StackError as exc:
            self.stop(timeout_s=5)
            raise StackError(f"{exc}; last lines of its log:\n{tail(self.log_path)}") from None

    def stop(self, timeout_s: float = 15.0) -> None:
        """Stop gracefully with ``stop_signal``; SIGKILL after ``timeout_s``. Idempotent."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(self.stop_signal)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _log.warning("%s ignored %s; killing it", self.name, self.stop_signal.name)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
