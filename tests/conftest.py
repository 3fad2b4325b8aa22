"""Session fixtures: one real stack (PostgreSQL, NATS JetStream, etcd) for the whole run.

Each test that needs a database gets a fresh one: ``database_url`` is empty,
``migrated_database_url`` is a copy of a template that already holds the schema
(copying takes a tenth of a second, migrating longer), made ahead by
:class:`TemplateCopies` while the test before runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from sundial.core.db import migrate
from sundial.devstack import Stack
from tests.helpers.dns_server import DnsServer, system_dns


@pytest.fixture(autouse=True)
def _no_cli_profile(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The CLI reads connection profiles from the user's config file: the tests use
    none (a test that wants one writes its own under ``SUNDIAL_CONFIG``)."""
    monkeypatch.setenv("SUNDIAL_CONFIG", str(tmp_path_factory.getbasetemp() / "no-config.yaml"))
    monkeypatch.delenv("SUNDIAL_PROFILE", raising=False)


def with_database(url: str, name: str) -> str:
    """``url`` pointing at database ``name`` instead of its own."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


@pytest.fixture
async def dns_server(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[DnsServer]:
    """A DNS server on loopback that the process's default resolver asks instead of the
    machine's (which this sandbox cannot reach): the test says what it answers."""
    async with system_dns(monkeypatch) as server:
        yield server


@pytest.fixture(scope="session")
def stack() -> Iterator[Stack]:
    # Throwaway databases: the fast, non-durable PostgreSQL settings.
    with Stack(durable=False) as running:
        yield running


@pytest.fixture(scope="session")
def template_database(stack: Stack) -> str:
    """A database holding the migrated schema; tests copy it, never use it."""
    name = f"sundial_template_{uuid.uuid4().hex[:8]}"

    async def build() -> None:
        admin = await asyncpg.connect(stack.database_url)
        try:
            await admin.execute(f'CREATE DATABASE "{name}"')
        finally:
            await admin.close()
        await migrate(with_database(stack.database_url, name))

    asyncio.run(build())
    return name


async def _create_database(stack: Stack, template: str | None) -> str:
    name = f"test_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(stack.database_url)
    try:
        # FILE_COPY copies the template's files whole (WAL_LOG, the default, logs each
        # block): a few times faster for a schema this size on the stack's unsynced
        # PostgreSQL, where the checkpoints it takes cost little.
        clause = f' TEMPLATE "{template}" STRATEGY FILE_COPY' if template else ""
        await admin.execute(f'CREATE DATABASE "{name}"{clause}')
    finally:
        await admin.close()
    return name


async def _drop_database(stack: Stack, name: str) -> None:
    admin = await asyncpg.connect(stack.database_url)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


@pytest.fixture
async def database_url(stack: Stack) -> AsyncIterator[str]:
    """A fresh, empty database for this test alone."""
    name = await _create_database(stack, None)
    yield with_database(stack.database_url, name)
    await _drop_database(stack, name)


class TemplateCopies:
    """Copies of the schema template, each made before a test asks for it.

    ``CREATE DATABASE ... TEMPLATE`` takes 0.1-0.3 s here, a test's setup otherwise. One
    thread of the session's makes the next copy while the current test runs, and drops
    the copies tests are done with, so taking one costs nothing unless tests end faster
    than copies are made. Each copy is still fresh and used by one test, class or module.
    """

    def __init__(self, stack: Stack, template: str) -> None:
        self._stack = stack
        self._template = template
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="template-copies")
        self._next = self._worker.submit(self._make)
        self._drops: list[Future[None]] = []

    def _make(self) -> str:
        return asyncio.run(_create_database(self._stack, self._template))

    def _drop(self, name: str) -> None:
        asyncio.run(_drop_database(self._stack, name))

    @contextlib.contextmanager
    def copy(self) -> Iterator[str]:
        """The URL of a fresh copy (the next one is made meanwhile), dropped afterwards
        once the thread is free."""
        made, self._next = self._next, self._worker.submit(self._make)
        name = made.result()
        try:
            yield with_database(self._stack.database_url, name)
        finally:
            self._drops.append(self._worker.submit(self._drop, name))

    def close(self) -> None:
        """Drop the copy made for no one; wait for every drop (raising a failed one's
        error)."""
        self._drops.append(self._worker.submit(self._drop, self._next.result()))
        self._worker.shutdown(wait=True)
        for dropped in self._drops:
            dropped.result()


@pytest.fixture(scope="session")
def template_copies(stack: Stack, template_database: str) -> Iterator[TemplateCopies]:
    copies = TemplateCopies(stack, template_database)
    yield copies
    copies.close()


@pytest.fixture
def migrated_database_url(template_copies: TemplateCopies) -> Iterator[str]:
    """A fresh database with Sundial's schema, for this test alone."""
    with template_copies.copy() as url:
        yield url


@pytest.fixture(scope="class")
def class_database_url(template_copies: TemplateCopies) -> Iterator[str]:
    """A fresh database with Sundial's schema for the tests of one class, which share
    services started once for them (each test acts through tenants of its own)."""
    with template_copies.copy() as url:
        yield url


@pytest.fixture(scope="module")
def module_database_url(template_copies: TemplateCopies) -> Iterator[str]:
    """A fresh database with Sundial's schema for the tests of one module, which share
    it (and whatever serves it) and keep apart by tenant."""
    with template_copies.copy() as url:
        yield url


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Only coroutine tests get the loop guard: an autouse fixture would also attach to
    # hypothesis tests, whose health check rejects function-scoped fixtures.
    for item in items:
        if isinstance(item, pytest.Function) and inspect.iscoroutinefunction(item.obj):
            item.fixturenames.append("_fail_on_background_errors")


def _grpc_poller_noise(context: dict[str, object]) -> bool:
    """grpc.aio's completion-queue poller bound to an earlier test's (closed) event loop.

    grpc.aio keeps one process-wide poller that schedules its wake-ups on the loop it was
    bound to; pytest-asyncio gives each test a loop of its own, so a late wake-up for an
    earlier loop surfaces here as "Event loop is closed" (or BlockingIOError when two
    loops share the socket): grpc/grpc issues 25364 and 34139. Nothing of this test's is
    involved, so it is not this test's error.
    """
    handle = str(context.get("handle", "")) + str(context.get("message", ""))
    exception = context.get("exception")
    return "PollerCompletionQueue._handle_events" in handle and (
        isinstance(exception, BlockingIOError)
        or (isinstance(exception, RuntimeError) and "Event loop is closed" in str(exception))
    )


@pytest.fixture
async def _fail_on_background_errors() -> AsyncIterator[None]:
    """Fail a test when a background task or callback raised and nobody looked."""
    loop = asyncio.get_running_loop()
    errors: list[dict[str, object]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(
        lambda _loop, context: None if _grpc_poller_noise(context) else errors.append(context)
    )
    yield
    loop.set_exception_handler(previous)
    if errors:
        pytest.fail(f"unhandled errors in background tasks: {errors!r}")


# --- under CI, a skip is a failure ------------------------------------------------------

CI_MAY_SKIP: dict[str, str] = {}
"""Test node ids (or a prefix of them: a module, a class) that may skip under
``CI=true``, each with the reason CI cannot run it. Keep it short and say why.

Empty: every skip in the suite is for a tool that .ci/run installs (kubectl, chromium
and chromedriver, node, curl, promtool), so a skip in CI means an install step is
missing and the test never ran, which must not pass for green."""


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def _allowed_to_skip(nodeid: str) -> bool:
    return any(
        nodeid == allowed
        or nodeid.startswith(allowed + "::")
        or (allowed.endswith("/") and nodeid.startswith(allowed))
        for allowed in CI_MAY_SKIP
    )


_ci_skips: list[tuple[str, str]] = []


def _record_skip(report: pytest.CollectReport | pytest.TestReport) -> None:
    if not report.skipped or hasattr(report, "wasxfail") or not _in_ci():
        return
    if _allowed_to_skip(report.nodeid):
        return
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    _ci_skips.append((report.nodeid, reason))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _record_skip(report)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    _record_skip(report)  # a module that skips itself (allow_module_level)


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _ci_skips and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _ci_skips:
        return
    terminalreporter.section("skipped under CI (not in CI_MAY_SKIP of tests/conftest.py)")
    for nodeid, reason in _ci_skips:
        terminalreporter.line(f"SKIPPED IN CI {nodeid}: {reason}", red=True)
