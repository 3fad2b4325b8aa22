"""A real gRPC target for tests: a ``grpc.aio`` server implementing TargetService.

Records every Execute call (request and metadata) and answers with a scripted status::

    async with GrpcTargetServer() as server:
        server.answer = (grpc.StatusCode.UNAVAILABLE, "busy", (("retry-after", "9"),))
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import grpc

from sundial.v1 import target_pb2, target_pb2_grpc


@dataclass
class ExecuteCall:
    """One Execute call as received."""

    request: target_pb2.ExecuteRequest
    metadata: dict[str, str]


class GrpcTargetServer(target_pb2_grpc.TargetServiceServicer):
    """TargetService on 127.0.0.1:<free port>, plaintext."""

    def __init__(self) -> None:
        self.calls: list[ExecuteCall] = []
        self.answer: tuple[grpc.StatusCode, str, tuple[tuple[str, str], ...]] = (
            grpc.StatusCode.OK,
            "",
            (),
        )
        self.delay_s = 0.0
        self.active = 0
        self.max_active = 0
        self.cancelled = 0
        self._server: grpc.aio.Server | None = None
        self.address = ""

    async def __aenter__(self) -> GrpcTargetServer:
        self._server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
        target_pb2_grpc.add_TargetServiceServicer_to_server(self, self._server)
        port = self._server.add_insecure_port("127.0.0.1:0")
        self.address = f"127.0.0.1:{port}"
        await self._server.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._server is not None:
            await self._server.stop(0)

    async def Execute(
        self, request: target_pb2.ExecuteRequest, context: grpc.aio.ServicerContext
    ) -> target_pb2.ExecuteResponse:
        metadata = {k: v for k, v in context.invocation_metadata() or () if isinstance(v, str)}
        self.calls.append(ExecuteCall(request, metadata))
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.active -= 1
        code, details, trailing = self.answer
        if code != grpc.StatusCode.OK:
            context.set_trailing_metadata(trailing)
            await context.abort(code, details)
        return target_pb2.ExecuteResponse(message="done")
