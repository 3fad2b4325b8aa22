"""A real HTTP target for tests: records every call, answers as the test scripts it.

Built on the demo target's server (``sundial.devstack.HttpTargetServer``)::

    async with RecordingTarget() as target:
        target.script("/flaky", status=503, headers={"Retry-After": "2"})
        target.hold("/slow")             # calls to /slow wait until target.release("/slow")
        ... job with url=f"{target.url}/flaky" ...
        assert target.keys("/flaky") == [...]
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from dataclasses import dataclass, field

from sundial.devstack import HttpRequest, HttpResponse, HttpTargetServer


@dataclass
class Call:
    """One request the target received."""

    request: HttpRequest
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None
    status: int | None = None

    @property
    def key(self) -> str | None:
        """The Idempotency-Key header."""
        return self.request.headers.get("idempotency-key")

    @property
    def attempt(self) -> int:
        """The Sundial-Attempt header as a number (0 when missing)."""
        return int(self.request.headers.get("sundial-attempt", "0"))

    @property
    def path(self) -> str:
        """The request path."""
        return self.request.path


@dataclass
class _Script:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    delay_s: float = 0.0
    times: int | None = None
    """Calls left to answer so (None: every call)."""


class RecordingTarget:
    """An HTTP target on 127.0.0.1:<free port> that records calls and concurrency."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.active = 0
        self.max_active = 0
        self._active_by_path: dict[str, int] = defaultdict(int)
        self.max_active_by_path: dict[str, int] = defaultdict(int)
        self._scripts: dict[str, _Script] = {}
        self._gates: dict[str, asyncio.Event] = {}
        self._server = HttpTargetServer(self._handle)

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:41234``."""
        return self._server.url

    async def __aenter__(self) -> RecordingTarget:
        await self._server.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        for gate in self._gates.values():
            gate.set()
        await self._server.stop()

    def script(
        self,
        path: str,
        *,
        status: int = 200,
        headers: dict[str, str] | None = None,
        body: bytes = b"",
        delay_s: float = 0.0,
        times: int | None = None,
    ) -> None:
        """Answer calls to ``path`` (the path part of the URL, no query) like this; with
        ``times``, only the next that many calls (later ones get 200)."""
        self._scripts[path] = _Script(status, dict(headers or {}), body, delay_s, times)

    def hold(self, path: str) -> None:
        """Make calls to ``path`` wait until :meth:`release`."""
        self._gates[path] = asyncio.Event()

    def release(self, path: str) -> None:
        """Let held calls to ``path`` answer (and future ones at once)."""
        gate = self._gates.get(path)
        if gate is not None:
            gate.set()

    def calls_to(self, path: str) -> list[Call]:
        """Calls to ``path`` in arrival order."""
        return [c for c in self.calls if c.path == path]

    def keys(self, path: str | None = None) -> list[str | None]:
        """Idempotency keys of the calls (to ``path``), in arrival order."""
        return [c.key for c in self.calls if path is None or c.path == path]

    async def _handle(self, request: HttpRequest) -> HttpResponse:
        path = request.path.split("?", 1)[0]
        call = Call(request)
        self.calls.append(call)
        self.active += 1
        self._active_by_path[path] += 1
        self.max_active = max(self.max_active, self.active)
        self.max_active_by_path[path] = max(
            self.max_active_by_path[path], self._active_by_path[path]
        )
        try:
            script = self._scripts.get(path, _Script())
            if script.times is not None:
                script.times -= 1
                if script.times <= 0:
                    del self._scripts[path]
            gate = self._gates.get(path)
            if gate is not None:
                await gate.wait()
            if script.delay_s:
                await asyncio.sleep(script.delay_s)
            call.status = script.status
            return HttpResponse(script.status, script.body, script.headers)
        finally:
            call.finished = time.monotonic()
            self.active -= 1
            self._active_by_path[path] -= 1
