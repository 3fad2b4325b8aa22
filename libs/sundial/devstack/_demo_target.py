"""A small HTTP target for demos and tests: answers every call and logs it.

It speaks just enough HTTP/1.1 (keep-alive, Content-Length bodies) for Sundial's
executors, with the standard library only::

    python -m sundial.devstack._demo_target --port 8085     # logs one JSON line per call

The local stack starts it through :func:`start_demo_target` (``sundial dev`` prints its
URL). Tests reuse :class:`HttpTargetServer` with their own handler (see
``tests/helpers/target_server.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import sys
import time
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from sundial.devstack._process import ManagedProcess, free_port

__all__ = [
    "DemoTarget",
    "HttpRequest",
    "HttpResponse",
    "HttpTargetServer",
    "start_demo_target",
]

_log = logging.getLogger(__name__)
_MAX_BODY = 1024 * 1024
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 413: "Payload Too Large"}


@dataclass
class HttpRequest:
    """One request as received."""

    method: str
    path: str
    headers: dict[str, str]
    """Header names lower-cased."""
    body: bytes
    received_at: float = field(default_factory=time.time)


@dataclass
class HttpResponse:
    """What to answer."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[HttpRequest], Awaitable[HttpResponse]]


class HttpTargetServer:
    """A minimal asyncio HTTP/1.1 server calling ``handler`` for every request."""

    def __init__(self, handler: Handler, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self._handler = handler
        self._host = host
        self._port = port
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        """The bound port."""
        assert self._server is not None, "not started"
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        """``http://host:port``."""
        return f"http://{self._host}:{self.port}"

    async def start(self) -> HttpTargetServer:
        """Listen; returns self."""
        # A deep backlog: executors open many connections at once, and a dropped SYN
        # costs a 1 s (then 3 s) retransmit that would look like Sundial being late.
        self._server = await asyncio.start_server(self._serve, self._host, self._port, backlog=4096)
        return self

    async def stop(self) -> None:
        """Close the listener and every open connection."""
        if self._server is None:
            return
        self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        await self._server.wait_closed()
        self._server = None

    async def __aenter__(self) -> HttpTargetServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            while True:
                request = await _read_request(reader)
                if request is None:
                    return
                try:
                    response = await self._handler(request)
                except Exception:
                    _log.exception("target handler failed")
                    response = HttpResponse(500, b"handler failed")
                writer.write(_encode(response))
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            return
        except asyncio.CancelledError:
            return
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


async def _read_request(reader: asyncio.StreamReader) -> HttpRequest | None:
    line = await reader.readline()
    if not line:
        return None
    method, path, _version = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
    headers: dict[str, str] = {}
    while True:
        header = (await reader.readline()).decode("latin-1").rstrip("\r\n")
        if not header:
            break
        name, _, value = header.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0") or 0)
    if length > _MAX_BODY:
        raise ValueError("body too large")
    body = await reader.readexactly(length) if length else b""
    return HttpRequest(method, path, headers, body)


def _encode(response: HttpResponse) -> bytes:
    reason = _REASONS.get(response.status, "Status")
    lines = [f"HTTP/1.1 {response.status} {reason}"]
    headers = {"content-type": "application/json", **response.headers}
    headers["content-length"] = str(len(response.body))
    lines.extend(f"{name}: {value}" for name, value in headers.items())
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + response.body


async def demo_handler(request: HttpRequest) -> HttpResponse:
    """Log the call (one JSON line on stdout) and answer 200."""
    if request.path == "/healthz":
        return HttpResponse(200, b'{"ok":true}')
    print(
        json.dumps(
            {
                "ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(request.received_at)),
                "method": request.method,
                "path": request.path,
                "idempotency_key": request.headers.get("idempotency-key"),
                "attempt": request.headers.get("sundial-attempt"),
                "scheduled_at": request.headers.get("sundial-scheduled-at"),
                "body_bytes": len(request.body),
            }
        ),
        flush=True,
    )
    return HttpResponse(200, b'{"ok":true}')


@dataclass
class DemoTarget:
    """The demo target running as a child process; ``url`` is its base URL."""

    url: str
    process: ManagedProcess

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the process."""
        self.process.stop(timeout_s)


def _healthy(url: str) -> bool:
    try:
        # No proxies: an http_proxy in the environment must not see loopback probes.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(f"{url}/healthz", timeout=1) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def start_demo_target(log_dir: Path, *, port: int | None = None) -> DemoTarget:
    """Start the demo target on loopback and wait until it answers.

    Its calls are logged to ``<log_dir>/demo-target.log``. Jobs call it at
    ``<url>/<anything>``; executors must allow loopback targets
    (``SUNDIAL_ALLOW_LOOPBACK_TARGETS=1``, which the local stack sets).
    """
    port = port or free_port()
    url = f"http://127.0.0.1:{port}"
    process = ManagedProcess(
        "demo-target",
        [sys.executable, "-m", "sundial.devstack._demo_target", "--port", str(port)],
        log_path=log_dir / "demo-target.log",
    )
    process.start()
    process.wait_ready(lambda: _healthy(url), 15.0)
    return DemoTarget(url, process)


def main() -> None:
    """``python -m sundial.devstack._demo_target``: serve until interrupted."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8085)
    args = parser.parse_args()

    async def serve() -> None:
        server = await HttpTargetServer(demo_handler, host=args.host, port=args.port).start()
        print(f"demo target listening on {server.url}", flush=True)
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())


if __name__ == "__main__":
    main()
