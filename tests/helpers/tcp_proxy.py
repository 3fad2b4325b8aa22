"""A TCP proxy on loopback that fault tests put between a client and a real server.

It forwards ``127.0.0.1:<port>`` to an upstream ``host:port`` and breaks the path on
demand, in the three ways a network does (asyncpg's ``_testbase/fuzzer.py`` is the model)::

    async with TcpProxy("127.0.0.1", 5432) as proxy:   # mode "pass": forwards everything
        ... point the client at f"127.0.0.1:{proxy.port}" ...
        proxy.cut()              # every open connection reset; new ones are accepted
        proxy.blackhole()        # connections held open, nothing forwarded either way
        proxy.restore()          # forwarding resumes on the held connections
        await proxy.blackhole_for(5.0)

A black hole is a partition, not a reset: bytes read before it stay queued, nothing more
is read (TCP flow control then stalls the peers), connections opened meanwhile are
accepted but reach the upstream only once it heals, and nothing is closed by the proxy.
Whether a client notices (keepalives, timeouts) is what the test is about.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Literal

Mode = Literal["pass", "blackhole"]

_CHUNK = 65536


@dataclass(eq=False)
class _Link:
    """One client connection and, once made, its upstream connection."""

    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter | None = None
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def abort(self) -> None:
        for writer in (self.client, self.upstream):
            if writer is not None:
                writer.transport.abort()


class TcpProxy:
    """Forwards ``127.0.0.1:port`` to ``upstream_host:upstream_port``.

    Args:
        upstream_host: Where connections go.
        upstream_port: Its port.
        port: The port to listen on; 0 picks a free one (read :attr:`port` after start).
        name: For messages (``"postgres"``, ``"nats-1"``).
    """

    def __init__(self, upstream_host: str, upstream_port: int, *, port: int = 0, name: str = ""):
        self.upstream = (upstream_host, upstream_port)
        self.port = port
        self.name = name or f"{upstream_host}:{upstream_port}"
        self.cuts = 0
        """Connections reset by :meth:`cut` so far."""
        self._server: asyncio.Server | None = None
        self._links: set[_Link] = set()
        self._handlers: set[asyncio.Task[None]] = set()
        self._closing = False
        self._open = asyncio.Event()
        self._open.set()

    @property
    def mode(self) -> Mode:
        return "pass" if self._open.is_set() else "blackhole"

    @property
    def connections(self) -> int:
        """Client connections open now."""
        return len(self._links)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self) -> TcpProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    async def close(self) -> None:
        """Stop listening and reset every connection."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        # Handlers end on their own once their sockets are reset (not cancelled: Python
        # 3.11's stream server calls exception() on a cancelled handler and logs it).
        self._closing = True
        self._open.set()
        self.cut()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        if server is not None:
            await server.wait_closed()

    async def __aenter__(self) -> TcpProxy:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def cut(self) -> int:
        """Reset every open connection (both sides, RST); keep accepting new ones.

        Returns:
            How many client connections were reset.
        """
        links = list(self._links)
        for link in links:
            link.abort()
        self.cuts += len(links)
        return len(links)

    def blackhole(self) -> None:
        """Forward nothing from now on, in either direction, until :meth:`restore`."""
        self._open.clear()

    def restore(self) -> None:
        """Forward again (mode ``pass``), including what the black hole held back."""
        self._open.set()

    async def blackhole_for(self, seconds: float) -> None:
        """A partition of ``seconds`` (a fault's length, not a wait for an outcome)."""
        self.blackhole()
        try:
            await asyncio.sleep(seconds)
        finally:
            self.restore()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        link = _Link(writer)
        self._links.add(link)
        handler = asyncio.current_task()
        if handler is not None:
            self._handlers.add(handler)
        try:
            await self._open.wait()  # accepted, but held while the path is black-holed
            if self._closing:
                return
            try:
                up_reader, up_writer = await asyncio.open_connection(*self.upstream)
            except OSError:
                return  # upstream down: the client sees its connection reset
            link.upstream = up_writer
            link.tasks = [
                asyncio.create_task(self._pipe(reader, up_writer)),
                asyncio.create_task(self._pipe(up_reader, writer)),
            ]
            # Either direction ending (EOF, reset, cut) ends the pair.
            await asyncio.wait(link.tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._links.discard(link)
            if handler is not None:
                self._handlers.discard(handler)
            link.abort()
            for task in link.tasks:
                task.cancel()
            await asyncio.gather(*link.tasks, return_exceptions=True)

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while True:
                await self._open.wait()
                data = await src.read(_CHUNK)
                if not data:
                    return
                await self._open.wait()  # read just before a black hole: held, not sent
                dst.write(data)
                await dst.drain()
